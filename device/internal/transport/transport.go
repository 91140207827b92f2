// Package transport makes the MQTT attempts the device's agent asks for,
// and carries its session while it is up: MQTT 3.1.1 through paho v1
// (v3.go), MQTT 5 through paho.golang (v5.go). Every byte from the broker
// is read through a guard (Conn) that refuses what the clients would
// misread or over-allocate.
//
// It states facts: a CONNACK's code, a broken frame (*ProtocolError), a
// packet over the limit (*PacketTooLargeError), a server's DISCONNECT
// (*DisconnectError); package device exports those types as its own (one
// definition, errors.go). Package device owns every attempt's timing.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// NoConnack is Result.Code when no CONNACK was read.
const NoConnack = -1

// Errors of Subscribe and Publish; package device exports each under the
// same name.
var (
	ErrNotConnected        = errors.New("device: not connected")
	ErrUnconfirmed         = errors.New("device: publish not confirmed by a PUBACK on its connection")
	ErrPublishRefused      = errors.New("device: publish refused by the broker")
	ErrTooLargeForBroker   = errors.New("device: publish over the broker's maximum packet size")
	ErrSubscriptionRefused = errors.New("device: subscription refused by the broker")
	// ErrNoMQTT5: MQTT 5 was asked of a build without it (the nomqtt5 tag).
	ErrNoMQTT5 = errors.New("Config.Protocol is MQTT 5, and this firmware was built without it (nomqtt5)")
)

// Result is one attempt's outcome: the CONNACK code (NoConnack if none
// was read) and, for a refusal, the Server Reference it named. Err is nil
// for a session. For a refusal it is the client's own error, if any.
type Result struct {
	Code      int
	Reference string
	Err       error
}

// Client is one MQTT version's client, driven by the agent.
type Client interface {
	// Connect makes one attempt and reads its outcome. If ctx ends first
	// the attempt is cut short, and the caller disconnects a connect that
	// won the race.
	Connect(ctx context.Context) Result
	// SessionPresent is the last accepted CONNACK's flag.
	SessionPresent() bool
	// Subscribe subscribes the session to topic and returns the QoS the
	// broker granted. Messages reach the agent through Host.HandlerFor.
	Subscribe(ctx context.Context, topic string, qos byte) (granted byte, err error)
	// Publish sends on the session; conn is Host.Conns when the caller saw
	// the session up (see ErrUnconfirmed).
	Publish(ctx context.Context, conn uint64, topic string, qos byte, retained bool, payload []byte) error
	Disconnect()
}

// Handler receives a message on a subscribed topic.
type Handler = func(topic string, payload []byte)

// Host is the agent a Client works for.
type Host interface {
	// Dial opens the connection of an attempt, to the endpoint the agent
	// chose, through a guard that Wire then returns.
	Dial(timeout time.Duration, v5 bool) (*Conn, error)
	// NewAttempt readies the agent for an attempt (Conns counts it).
	NewAttempt()
	// Wire is the current attempt's guarded connection, or nil.
	Wire() *Conn
	// Conns counts the attempts made.
	Conns() uint64
	// Lost reports the loss of the session; it never blocks.
	Lost(err error)
	// Deliver hands a message to its handler, waiting while the agent's
	// queue is full, until gone closes.
	Deliver(h Handler, topic string, payload []byte, ack func(), gone <-chan struct{})
	// HandlerFor is the handler of the subscriptions topic matches, or
	// nil, and the highest QoS they may receive.
	HandlerFor(topic string) (h Handler, maxQoS byte)
	// Unsolicited counts a message that matched no subscription: it was
	// acknowledged and dropped.
	Unsolicited()
	// Connected reports whether the agent counts the session up.
	Connected() bool
}

// Settings are the agent's, as a Client needs them; the agent validated
// them.
type Settings struct {
	Broker                                 *url.URL // the first endpoint (paho v1 wants one)
	ClientID, Username, Password           string
	KeepAlive, PingTimeout, ConnectTimeout time.Duration
	PersistentSession                      bool
	SessionExpiry                          time.Duration
	IncomingQueue, IncomingQueueBytes      int
	MaxIncomingPacket                      int
}

// New makes the client of one MQTT version: 5 if v5, else 3.1.1.
func New(s Settings, h Host, v5 bool) (Client, error) {
	if v5 {
		return newV5(s, h)
	}
	return newV3(s, h), nil
}

// dispatch hands a message that came on g to the handler of the
// subscriptions it matches, through the agent's queue, to be acknowledged
// once handled. A message that matches none is acknowledged at once and
// dropped, so that a client keeps none of them. One at a QoS above what its
// subscriptions were granted breaks MQTT: it ends the connection.
func dispatch(h Host, g *Conn, topic string, qos byte, payload []byte, ack func()) {
	handler, allowed := h.HandlerFor(topic)
	switch {
	case handler == nil:
		ack()
		h.Unsolicited()
	case qos > allowed:
		g.Break(3, fmt.Sprintf("a PUBLISH at QoS %d on %q, whose subscription was granted QoS %d", qos, topic, allowed))
	default:
		h.Deliver(handler, topic, payload, ack, g.Closed())
	}
}
