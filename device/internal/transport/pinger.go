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
// sends a PINGREQ once nothing has gone either way for the keepalive, and
// calls the connection dead when no PINGRESP has come timeout later. So a
// silent path is noticed within keepalive + timeout. The keepalive is the
// shorter of the device's own and the broker's Server Keep Alive: a broker
// may ask for pings more often, never for none (a Server Keep Alive of 0,
// or 65,535 s, would otherwise leave a silent path unnoticed for ever).
// paho.golang's own pinger waits a whole keepalive for the PINGRESP, and
// Config.PingTimeout would mean nothing.
type pinger struct {
	own, timeout time.Duration

	mu                 sync.Mutex
	lastSent, lastRecv time.Time
	pingSent           time.Time // the PINGREQ awaiting its PINGRESP, or zero
}

// interval is the keepalive the session pings at, given the broker's
// Server Keep Alive (paho.golang passes the device's own if the broker
// named none).
func (p *pinger) interval(server uint16) time.Duration {
	if server == 0 {
		return p.own
	}
	return min(p.own, time.Duration(server)*time.Second)
}

func (p *pinger) Run(ctx context.Context, conn net.Conn, keepAlive uint16) error {
	interval := p.interval(keepAlive)
	p.mu.Lock()
	now := time.Now()
	p.lastSent, p.lastRecv, p.pingSent = now, now, time.Time{}
	p.mu.Unlock()
	timer := time.NewTimer(interval)
	defer timer.Stop()
	failed := make(chan error, 1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case now := <-timer.C:
			p.mu.Lock()
			due := p.due(interval)
			if !p.pingSent.IsZero() && !now.Before(due) {
				p.mu.Unlock()
				return errPingTimeout
			}
			if p.pingSent.IsZero() && !now.Before(due) {
				p.pingSent = now
				due = now.Add(p.timeout)
				go func() { // a write blocked by a full socket must not stop the clock
					if _, err := packets.NewControlPacket(packets.PINGREQ).WriteTo(conn); err != nil {
						select {
						case failed <- err:
						default:
						}
					}
				}()
			}
			p.mu.Unlock()
			timer.Reset(due.Sub(now))
		}
	}
}

// due is when the pinger must act next: the PINGRESP's deadline if a
// PINGREQ awaits one, else a keepalive after the last packet either way.
// The caller holds mu.
func (p *pinger) due(interval time.Duration) time.Time {
	if !p.pingSent.IsZero() {
		return p.pingSent.Add(p.timeout)
	}
	last := p.lastSent
	if p.lastRecv.Before(last) {
		last = p.lastRecv
	}
	return last.Add(interval)
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
