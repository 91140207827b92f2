//go:build !nomqtt5

package transport

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho/log"
)

// pinger is the MQTT 5 session's keepalive, as paho v1's is for 3.1.1. It
// sends a PINGREQ once nothing has gone either way for the keepalive. The
// keepalive is the broker's Server Keep Alive, if it named one. It calls
// the connection dead when no PINGRESP has come timeout later. It checks
// every min(keepalive/4, 5 s). A silent path is thus noticed within
// keepalive + timeout + that, as on 3.1.1. (paho.golang's own pinger waits
// a whole keepalive for the PINGRESP, and Config.PingTimeout would mean
// nothing.)
type pinger struct {
	timeout time.Duration

	mu                 sync.Mutex
	lastSent, lastRecv time.Time
	pingSent           time.Time // the PINGREQ awaiting its PINGRESP, or zero
}

func (p *pinger) Run(ctx context.Context, conn net.Conn, keepAlive uint16) error {
	if keepAlive == 0 {
		return nil // the broker's Server Keep Alive of 0 turns it off, and binds the client
	}
	interval := time.Duration(keepAlive) * time.Second
	tick := time.NewTicker(min(interval/4, 5*time.Second))
	defer tick.Stop()
	p.mu.Lock()
	now := time.Now()
	p.lastSent, p.lastRecv, p.pingSent = now, now, time.Time{}
	p.mu.Unlock()
	failed := make(chan error, 1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case now := <-tick.C:
			p.mu.Lock()
			switch {
			case !p.pingSent.IsZero():
				if now.Sub(p.pingSent) >= p.timeout {
					p.mu.Unlock()
					return errPingTimeout
				}
				p.mu.Unlock()
				continue
			case now.Sub(p.lastSent) < interval && now.Sub(p.lastRecv) < interval:
				p.mu.Unlock()
				continue
			}
			p.pingSent = now
			p.mu.Unlock()
			go func() { // a write blocked by a full socket must not stop the clock
				if _, err := packets.NewControlPacket(packets.PINGREQ).WriteTo(conn); err != nil {
					select {
					case failed <- err:
					default:
					}
				}
			}()
		}
	}
}

func (p *pinger) PacketSent() {
	p.mu.Lock()
	p.lastSent = time.Now()
	p.mu.Unlock()
}

func (p *pinger) PacketReceived() {
	p.mu.Lock()
	p.lastRecv = time.Now()
	p.mu.Unlock()
}

func (p *pinger) PingResp() {
	p.mu.Lock()
	p.pingSent = time.Time{}
	p.mu.Unlock()
}

func (p *pinger) SetDebug(log.Logger) {}
