package device

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/herdguard/herdguard/device/internal/inbox"
	"github.com/herdguard/herdguard/device/internal/transport"
)

// Protocol is the MQTT version an Agent speaks. The zero Protocol is
// MQTT311. A Protocol is a plain value, safe to share.
type Protocol = transport.Protocol

const (
	MQTT311 = transport.MQTT311 // MQTT 3.1.1, through github.com/eclipse/paho.mqtt.golang
	MQTT5   = transport.MQTT5   // MQTT 5, through github.com/eclipse/paho.golang
)

// ParseProtocol reads a Protocol as String writes it: "3.1.1" or "5".
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "3.1.1":
		return MQTT311, nil
	case "5":
		return MQTT5, nil
	}
	return 0, fmt.Errorf("%w: MQTT version %q: want 3.1.1 or 5", ErrInvalid, s)
}

// newProtocol makes the client of the MQTT version the Config names. The
// agent owns the timing and the endpoints. The client makes the one attempt
// it is asked for, over a connection the agent dials (host.Dial). It
// carries subscriptions and publishes while the session is up. It reports
// the session's loss on Agent.lost.
func newProtocol(a *Agent) (transport.Client, error) {
	cfg := &a.cfg
	s := transport.Settings{Broker: a.endpoints[0], ClientID: cfg.ClientID, Username: cfg.Credentials.Username, Password: cfg.Credentials.Password,
		KeepAlive: cfg.KeepAlive, PingTimeout: cfg.PingTimeout, ConnectTimeout: cfg.ConnectTimeout,
		PersistentSession: cfg.Session.Persistent, SessionExpiry: cfg.Session.Expiry,
		IncomingQueue: cfg.Incoming.Queue, IncomingQueueBytes: cfg.Incoming.QueueBytes, MaxIncomingPacket: cfg.Incoming.MaxPacket}
	c, err := transport.New(s, host{a}, cfg.Protocol == MQTT5)
	if errors.Is(err, transport.ErrNoMQTT5) {
		return nil, configError("Protocol", "{Protocol} is MQTT 5, and this firmware was built without it (nomqtt5)")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return c, nil
}

// host is the Agent as its transport client sees it.
type host struct{ a *Agent }

// Dial opens a connection to the endpoint the next attempt goes to, and
// guards it. Stopping the agent aborts the dial, its own or Config.Dial's
// (through its context), and closes a connection still in its handshake.
func (h host) Dial(timeout time.Duration, v5 bool) (*transport.Conn, error) {
	a := h.a
	ctx := a.runCtx
	u := a.target()
	var conn net.Conn
	var err error
	if a.cfg.Dial != nil {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err = a.cfg.Dial(dctx, u)
		cancel()
	} else {
		conn, err = transport.DialURL(ctx, u, timeout, a.cfg.TLS)
	}
	if err != nil {
		return nil, err
	}
	g := transport.NewConn(conn, a.cfg.Incoming.MaxPacket, v5, &a.maxQoS)
	a.wire.Store(g)
	if err := ctx.Err(); err != nil { // stopped while dialling: connect may have missed this conn
		conn.Close()
		return nil, err
	}
	return g, nil
}

// NewAttempt readies the agent for a connect attempt. A loss reported of an
// earlier session is stale. The attempt is counted before it can complete
// anything, as a resend may complete older publishes.
func (h host) NewAttempt() {
	select {
	case <-h.a.lost:
	default:
	}
	h.a.conns.Add(1)
	h.a.wire.Store(nil)
}

func (h host) Wire() *transport.Conn { return h.a.wire.Load() }
func (h host) Conns() uint64         { return h.a.conns.Load() }
func (h host) Connected() bool       { return h.a.Connected() }

func (h host) Lost(err error) {
	select {
	case h.a.lost <- err:
	default:
	}
}

func (h host) Deliver(handler transport.Handler, topic string, payload []byte, ack func(), gone <-chan struct{}) {
	h.a.inbox.Put(inbox.Delivery{Handler: handler, Topic: topic, Payload: payload, Ack: ack}, gone)
}

func (h host) HandlerFor(topic string) (transport.Handler, byte) { return h.a.handlerFor(topic) }

func (h host) Unsolicited() { h.a.unsolicited.Add(1) }

// meaning reports, once a connection, the too-large packet or the broken
// frame err is: as an event and to Metrics, or in the log.
func (a *Agent) meaning(err error) error {
	var tl *PacketTooLargeError
	var br *ProtocolError
	switch {
	case errors.As(err, &tl):
		if v := a.oversized(); v != nil {
			return v
		}
		return tl
	case errors.As(err, &br):
		if v := a.brokeProtocol(); v != nil {
			return v
		}
		return br
	}
	return err
}

// result is an attempt's outcome as the Machine reads it.
func (a *Agent) result(r transport.Result) Result {
	err := a.meaning(r.Err)
	if r.Code > 0 {
		err = &ConnackError{Code: r.Code, Reference: r.Reference, Err: err}
	}
	return Result{Code: r.Code, Err: err}
}

// target is the endpoint the next attempt goes to: where a broker
// redirected the device, or the next configured one.
func (a *Agent) target() *url.URL {
	if u := a.redirected.Load(); u != nil {
		return u
	}
	return a.endpoints[a.endpoint.Load()]
}

// targetName is the target as logs and events show it.
func (a *Agent) targetName() string {
	if u := a.redirected.Load(); u != nil {
		return u.Redacted()
	}
	return a.names[a.endpoint.Load()]
}
