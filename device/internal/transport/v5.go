//go:build !nomqtt5

package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	paho5 "github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"
)

// v5 speaks MQTT 5 through paho.golang. A paho.golang client lives for one
// connection. The agent makes a new one for each attempt, over a connection
// it dialled. It keeps the session state (in flight QoS 1 messages, packet
// IDs) across them. paho.golang has no reconnect of its own. autopaho,
// which has, is not used.
type v5 struct {
	s       Settings
	h       Host
	session *state.State

	mu     sync.Mutex
	client *paho5.Client // the current session's, nil between sessions
	wire   *Conn         // its connection

	present atomic.Bool   // the last accepted CONNACK's flag
	maxOut  atomic.Uint32 // the broker's Maximum Packet Size (0: none named)
}

func newV5(s Settings, h Host) (Client, error) {
	return &v5{s: s, h: h, session: state.NewInMemory()}, nil
}

func (p *v5) SessionPresent() bool { return p.present.Load() }

// current is the session's client and its connection, or nil.
func (p *v5) current() (*paho5.Client, *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.client, p.wire
}

// connect makes one attempt: dial, CONNECT, and read the CONNACK, whose
// code and properties (a Server Reference, the broker's limits) the guard
// and paho.golang read.
func (p *v5) Connect(ctx context.Context) Result {
	cfg := &p.s
	p.h.NewAttempt()
	p.mu.Lock()
	p.client, p.wire = nil, nil
	p.mu.Unlock()
	g, err := p.h.Dial(cfg.ConnectTimeout, true)
	if err != nil {
		return Result{Code: NoConnack, Err: err}
	}
	cp := p.connectPacket()
	g.LimitUnacknowledged(int(*cp.Properties.ReceiveMaximum))
	c := paho5.NewClient(paho5.ClientConfig{
		ClientID:                   cfg.ClientID,
		Conn:                       packets.NewThreadSafeConn(g),
		Session:                    p.session,
		PingHandler:                &pinger{own: cfg.KeepAlive, timeout: cfg.PingTimeout},
		PacketTimeout:              cfg.ConnectTimeout,
		EnableManualAcknowledgment: true, // a QoS 1 message acknowledged once its handler has it
		OnPublishReceived:          []func(paho5.PublishReceived) (bool, error){func(r paho5.PublishReceived) (bool, error) { return p.received(g, r) }},
		OnServerDisconnect:         func(d *paho5.Disconnect) { p.serverDisconnect(g, d) },
		OnClientError:              func(err error) { p.lost(g, err) },
	})
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	ca, err := c.Connect(cctx, cp)
	cancel()
	if v := g.Oversized(); v != nil {
		return Result{Code: NoConnack, Err: v}
	}
	if v := g.Broken(); v != nil {
		if err == nil {
			// paho.golang called it a session: the wire says otherwise
			_ = c.Disconnect(&paho5.Disconnect{ReasonCode: 0x82})
		}
		return Result{Code: NoConnack, Err: v}
	}
	if ca != nil && ca.ReasonCode >= 0x80 {
		r := Result{Code: int(ca.ReasonCode), Err: err}
		if ca.Properties != nil {
			r.Reference = ca.Properties.ServerReference
		}
		return r
	}
	if err != nil {
		return Result{Code: NoConnack, Err: err}
	}
	p.present.Store(ca.SessionPresent)
	p.maxOut.Store(0)
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		p.maxOut.Store(*ca.Properties.MaximumPacketSize)
	}
	p.mu.Lock()
	p.client, p.wire = c, g
	p.mu.Unlock()
	return Result{Code: 0}
}

// connectPacket is the agent's CONNECT. Its limits go to the broker as
// Receive Maximum and Maximum Packet Size. Maximum Packet Size is the
// incoming packet bound, with the largest fixed header. A persistent
// session asks for its expiry. paho.golang holds up to Receive Maximum
// messages ahead of the inbox. Receive Maximum is thus as many as
// IncomingQueueBytes holds of the largest packet, at most IncomingQueue.
// What waits there is then bounded as the inbox is.
func (p *v5) connectPacket() *paho5.Connect {
	cfg := &p.s
	receive := uint16(max(1, min(cfg.IncomingQueue, cfg.IncomingQueueBytes/cfg.MaxIncomingPacket, math.MaxUint16)))
	maxPacket := uint32(cfg.MaxIncomingPacket + 5)
	cp := &paho5.Connect{ClientID: cfg.ClientID, KeepAlive: uint16(cfg.KeepAlive / time.Second), CleanStart: !cfg.PersistentSession,
		Properties: &paho5.ConnectProperties{ReceiveMaximum: &receive, MaximumPacketSize: &maxPacket,
			// MQTT 5's default, which paho.golang would send as off: a
			// refusal's reason is worth reading
			RequestProblemInfo: true}}
	if cfg.PersistentSession {
		// MaxUint32 would be for ever
		expiry := uint32(min(cfg.SessionExpiry/time.Second, math.MaxUint32-1))
		cp.Properties.SessionExpiryInterval = &expiry
	}
	if cfg.Username != "" {
		cp.UsernameFlag, cp.Username = true, cfg.Username
	}
	if cfg.Password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(cfg.Password)
	}
	return cp
}

// lost reports the loss of the session on g, if g is still the current
// connection: paho.golang may report an error more than once, and after
// the agent's own Disconnect.
func (p *v5) lost(g *Conn, err error) {
	if p.h.Wire() == g {
		p.h.Lost(err)
	}
}

// serverDisconnect is the broker ending the session: its reason code, and
// a Server Reference if it named one. A code MQTT 5 does not define for a
// server's DISCONNECT is a protocol error.
func (p *v5) serverDisconnect(g *Conn, d *paho5.Disconnect) {
	if !known(d.ReasonCode, 'd') {
		p.lost(g, g.Break(14, fmt.Sprintf("DISCONNECT reason code %d (%#x), unknown to MQTT 5", d.ReasonCode, d.ReasonCode)))
		return
	}
	de := &DisconnectError{Code: int(d.ReasonCode)}
	if d.Properties != nil {
		de.Reference, de.Reason = d.Properties.ServerReference, d.Properties.ReasonString
	}
	p.lost(g, de)
}

// received hands a message that came on g to dispatch. paho.golang is
// told it was handled either way: dispatch acknowledges it.
func (p *v5) received(g *Conn, r paho5.PublishReceived) (bool, error) {
	pb, c := r.Packet, r.Client
	ack := func() {
		select {
		case <-g.closed: // acknowledged on a connection that is gone, it would reach no one
		default:
			_ = c.Ack(pb)
		}
	}
	dispatch(p.h, g, pb.Topic, pb.QoS, pb.Payload, ack)
	return true, nil
}

// subackCodes are the SUBACK reason codes MQTT 5 defines.
var subackCodes = map[byte]string{
	0x00: "granted QoS 0", 0x01: "granted QoS 1", 0x02: "granted QoS 2", 0x80: "unspecified error",
	0x83: "implementation specific error", 0x87: "not authorized", 0x8F: "topic filter invalid",
	0x91: "packet identifier in use", 0x97: "quota exceeded", 0x9E: "shared subscriptions not supported",
	0xA1: "subscription identifiers not supported", 0xA2: "wildcard subscriptions not supported",
}

func (p *v5) Subscribe(ctx context.Context, topic string, qos byte) (byte, error) {
	c, g := p.current()
	if c == nil {
		return 0, ErrNotConnected
	}
	sa, err := c.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: topic, QoS: qos}}})
	if sa == nil {
		return 0, err
	}
	if len(sa.Reasons) != 1 {
		return 0, g.Break(9, fmt.Sprintf("a SUBACK with %d reason codes for one topic", len(sa.Reasons)))
	}
	code := sa.Reasons[0]
	name, known := subackCodes[code]
	switch {
	case !known:
		return 0, g.Break(9, fmt.Sprintf("SUBACK reason code %d (%#x), unknown to MQTT 5", code, code))
	case code >= 0x80:
		return 0, fmt.Errorf("%w: %s: %#02x (%s)", ErrSubscriptionRefused, topic, code, name)
	}
	return code, nil
}

// publishSize is the size of a PUBLISH without properties, as MQTT 5's
// Maximum Packet Size counts it: fixed header included.
func publishSize(topic string, qos byte, payload []byte) int {
	n := 2 + len(topic) + 1 + len(payload) // topic, properties length, payload
	if qos > 0 {
		n += 2 // packet ID
	}
	header := 2
	for l := n >> 7; l > 0; l >>= 7 {
		header++
	}
	return header + n
}

// errShutdown is paho.golang's report of a QoS 1 publish whose connection
// ended before its PUBACK came.
const errShutdown = "PUBLISH transmitted but not fully acknowledged at time of shutdown"

func (p *v5) Publish(ctx context.Context, conn uint64, topic string, qos byte, retained bool, payload []byte) error {
	c, _ := p.current()
	if c == nil {
		return ErrNotConnected
	}
	if max := p.maxOut.Load(); max > 0 && publishSize(topic, qos, payload) > int(max) {
		return fmt.Errorf("%w: a PUBLISH of %d bytes, over the broker's Maximum Packet Size of %d", ErrTooLargeForBroker,
			publishSize(topic, qos, payload), max)
	}
	resp, err := c.PublishWithOptions(ctx, &paho5.Publish{QoS: qos, Retain: retained, Topic: topic, Payload: payload}, paho5.PublishOptions{})
	switch {
	case resp != nil && resp.ReasonCode >= 0x80:
		return fmt.Errorf("%w: PUBACK %#02x (%s)", ErrPublishRefused, resp.ReasonCode, CodeText(int(resp.ReasonCode)))
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case qos > 0 && (err.Error() == errShutdown || p.h.Conns() != conn):
		return ErrUnconfirmed
	case !p.h.Connected():
		return ErrNotConnected
	}
	return err
}

func (p *v5) Disconnect() {
	p.mu.Lock()
	c := p.client
	p.client, p.wire = nil, nil
	p.mu.Unlock()
	if c != nil {
		_ = c.Disconnect(&paho5.Disconnect{ReasonCode: 0})
	}
}

// errPingTimeout is the loss of a session whose PINGREQ went unanswered.
var errPingTimeout = errors.New("pingresp not received, disconnecting")
