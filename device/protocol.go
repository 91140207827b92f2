package device

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"
)

// protocol is the MQTT version an Agent speaks: 3.1.1 through paho
// (v3.go), or 5 through paho.golang (v5.go). The agent owns the timing and
// the endpoints; a protocol makes the one attempt it is asked for over a
// connection the agent dials (Agent.dial), carries subscriptions and
// publishes while the session is up, and reports the session's loss on
// Agent.lost.
type protocol interface {
	// connect makes one attempt and reads its outcome. If ctx ends first
	// the attempt is cut short, and the caller disconnects a connect that
	// won the race.
	connect(ctx context.Context) Result
	// sessionPresent is the last accepted CONNACK's flag.
	sessionPresent() bool
	subscribe(ctx context.Context, topic string, s subscription) error
	// publish sends on the session; conn is the attempt count when the
	// caller saw the session up (see ErrUnconfirmed).
	publish(ctx context.Context, conn uint64, topic string, qos byte, retained bool, payload []byte) error
	disconnect()
}

// Protocol is the MQTT version an Agent speaks. The zero Protocol is
// MQTT311. A Protocol is a plain value, safe to share.
type Protocol uint8

const (
	MQTT311 Protocol = iota // MQTT 3.1.1, through github.com/eclipse/paho.mqtt.golang
	MQTT5                   // MQTT 5, through github.com/eclipse/paho.golang
)

func (p Protocol) String() string {
	switch p {
	case MQTT311:
		return "3.1.1"
	case MQTT5:
		return "5"
	}
	return "protocol(?)"
}

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

func newProtocol(a *Agent) (protocol, error) {
	if a.cfg.Protocol == MQTT5 {
		return newV5(a)
	}
	return newV3(a), nil
}

// dial opens a connection to the endpoint the next attempt goes to, and
// watches it (guardConn). Stopping the agent aborts the dial, its own or
// Config.Dial's (through its context), and closes a connection still in
// its handshake.
func (a *Agent) dial(timeout time.Duration, v5 bool) (*guardConn, error) {
	ctx := a.runCtx
	u := a.target()
	var conn net.Conn
	var err error
	if a.cfg.Dial != nil {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err = a.cfg.Dial(dctx, u)
		cancel()
	} else {
		conn, err = dialURL(ctx, u, timeout, a.cfg.TLS)
	}
	if err != nil {
		return nil, err
	}
	s := newGuardConn(conn, a.cfg.MaxIncomingPacket)
	s.v5 = v5
	a.wire.Store(s)
	if err := ctx.Err(); err != nil { // stopped while dialling: connect may have missed this conn
		conn.Close()
		return nil, err
	}
	return s, nil
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
