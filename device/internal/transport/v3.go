package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// v3 speaks MQTT 3.1.1 through paho v1.5.1, with paho's own reconnect and
// retry off. One paho client serves the agent's life. It is told to connect
// once each time the agent's timing says so, over a connection the agent
// dials.
type v3 struct {
	s       Settings
	h       Host
	client  paho.Client
	present atomic.Bool // the last accepted CONNACK's flag
}

func newV3(s Settings, h Host) *v3 {
	p := &v3{s: s, h: h}
	p.client = paho.NewClient(p.options())
	return p
}

// options is the paho client the agent drives: paho's own reconnect and
// retry off, since every connect's timing is the agent's.
func (p *v3) options() *paho.ClientOptions {
	cfg, h := &p.s, p.h
	opts := paho.NewClientOptions().AddBroker(cfg.Broker.String()).SetClientID(cfg.ClientID).
		SetProtocolVersion(4). // else every refusal is retried as 3.1: twice the load in a storm
		SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(cfg.ConnectTimeout).SetKeepAlive(cfg.KeepAlive).SetPingTimeout(cfg.PingTimeout).
		SetCleanSession(!cfg.PersistentSession).SetResumeSubs(false).
		// each message handed to the inbox in order, by paho's reading
		// goroutine
		SetOrderMatters(true).
		SetAutoAckDisabled(true). // a QoS 1 message acknowledged once its handler has it
		SetCustomOpenConnectionFn(func(_ *url.URL, o paho.ClientOptions) (net.Conn, error) {
			c, err := h.Dial(o.ConnectTimeout, false) // paho knows only the first endpoint
			if err != nil {
				return nil, err // not a nil *Conn in a non-nil net.Conn
			}
			return c, nil
		}).
		SetConnectionLostHandler(func(_ paho.Client, err error) { h.Lost(err) }).
		// every message, subscribed or not: paho v1.5.1 would keep one
		// that matches no route, unacknowledged, for the session's life
		SetDefaultPublishHandler(p.received).
		SetStore(newBoundedStore(cfg, func(reason string) {
			if w := h.Wire(); w != nil {
				h.Lost(w.Break(3, reason))
			}
		}))
	if cfg.Username != "" {
		opts.SetUsername(cfg.Username)
	}
	if cfg.Password != "" {
		opts.SetPassword(cfg.Password)
	}
	return opts
}

func (p *v3) SessionPresent() bool { return p.present.Load() }

// paho's answers to a Connect made while its status has not settled. A
// failed connect's token completes before its status returns to
// disconnected. After a zombie CONNACK, paho's own teardown can race the
// agent's Disconnect.
const (
	statusNotDisconnected = "status can only transition to connecting from disconnected"
	statusStillConnected  = "status is already connected or reconnecting"
)

// connect makes one attempt and reads its outcome, trusting the CONNACK
// byte on the wire over paho's token. If ctx ends first the attempt is cut
// short: its socket is closed, which fails paho's handshake at once.
// connect still waits for paho to finish with it. No paho goroutine thus
// outlives the agent. A connect that won the race is disconnected by the
// caller.
func (p *v3) Connect(ctx context.Context) Result {
	h := p.h
	h.NewAttempt()
	var tok paho.Token
	// real time: this is paho's internal state, not the schedule
	settle := time.Now().Add(p.s.ConnectTimeout)
	for {
		tok = p.client.Connect()
		select { // never overlap two connects
		case <-tok.Done():
		case <-ctx.Done():
			if w := h.Wire(); w != nil {
				w.Conn.Close()
			}
			<-tok.Done() // prompt now: a TCP/TLS dial watches ctx too
		}
		err := tok.Error()
		if err == nil || time.Now().After(settle) || ctx.Err() != nil {
			break
		}
		msg := err.Error()
		if msg != statusStillConnected && msg != statusNotDisconnected {
			break // a real attempt that failed
		}
		if msg == statusStillConnected {
			p.client.Disconnect(0)
		}
		time.Sleep(time.Millisecond) // paho's status settles in microseconds
	}
	code := NoConnack
	w := h.Wire()
	if w != nil {
		code = w.ConnackCode()
	}
	err := tok.Error()
	if w != nil && w.Oversized() != nil && err != nil {
		return Result{Code: NoConnack, Err: w.Oversized()}
	}
	if w != nil && w.Broken() != nil {
		if err == nil {
			p.client.Disconnect(0) // paho called it a session: the wire says otherwise
		}
		return Result{Code: NoConnack, Err: w.Broken()}
	}
	switch {
	case err == nil && code > 0:
		// The zombie: paho calls it connected, the broker refused it.
		p.client.Disconnect(0)
		return Result{Code: code, Err: errPahoZombie}
	case err == nil:
		p.present.Store(tok.(*paho.ConnectToken).SessionPresent())
		return Result{Code: 0}
	}
	if code == NoConnack {
		if rc := int(tok.(*paho.ConnectToken).ReturnCode()); rc > 0 && rc < 6 {
			code = rc
		}
	}
	return Result{Code: code, Err: err}
}

// errPahoZombie is the transport's word on a refusal paho v1.5.1 reports
// as a session: a CONNACK code it does not know.
var errPahoZombie = errors.New("paho reports it as a successful connect")

func (p *v3) Disconnect() {
	if p.client.IsConnectionOpen() {
		p.client.Disconnect(250)
	}
}

// received is every message paho reads: it has no routes of its own.
func (p *v3) received(_ paho.Client, msg paho.Message) {
	g := p.h.Wire() // the message came on it: paho reads one connection at a time
	if g == nil {
		return // not acknowledged: the connection it came on is gone
	}
	dispatch(p.h, g, msg.Topic(), msg.Qos(), msg.Payload(), msg.Ack)
}

func (p *v3) Subscribe(ctx context.Context, topic string, qos byte) (byte, error) {
	tok := p.client.Subscribe(topic, qos, nil) // no route: received has them all
	select {
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			return 0, err
		}
		st, ok := tok.(*paho.SubscribeToken)
		if !ok {
			return qos, nil
		}
		granted := st.Result()[topic]
		if granted == 0x80 {
			return 0, fmt.Errorf("%w: %s", ErrSubscriptionRefused, topic)
		}
		return granted, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (p *v3) Publish(ctx context.Context, conn uint64, topic string, qos byte, retained bool, payload []byte) error {
	tok := p.client.Publish(topic, qos, retained, payload)
	select {
	case <-tok.Done():
		err := tok.Error()
		switch {
		case errors.Is(err, paho.ErrNotConnected):
			return ErrNotConnected
		case err == nil && qos > 0 && p.h.Conns() != conn:
			return ErrUnconfirmed
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
