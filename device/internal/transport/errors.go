package transport

import (
	"errors"
	"fmt"
)

// The device's public error types are defined here, where the facts are
// found, and package device exports each under the same name (an alias):
// one type a fact, no translation between layers.

// Protocol is the MQTT version an agent speaks. The zero Protocol is
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

// PacketTooLargeError is why the agent closed a connection whose next
// packet declared more bytes than Config.Incoming.MaxPacket, or whose length
// was malformed. The guard closes the connection before the client reads
// the packet: paho v1.5.1 allocates whatever length a header declares, then
// copies the payload again, so one hostile header could take a device's
// memory. The zero value is not meaningful: the agent makes them. Once made
// it is not changed, so it is safe to share.
type PacketTooLargeError struct {
	Type   byte // the MQTT control packet type (2 CONNACK, 3 PUBLISH, 9 SUBACK, ...)
	Length int  // the remaining length declared; -1 for a malformed length
	Limit  int
}

func (e *PacketTooLargeError) Error() string {
	if e.Length < 0 {
		return fmt.Sprintf("device: incoming MQTT packet (type %d) has a malformed length", e.Type)
	}
	return fmt.Sprintf("device: incoming MQTT packet (type %d) declares %d bytes, over the %d-byte limit (Config.Incoming.MaxPacket)",
		e.Type, e.Length, e.Limit)
}

// ErrProtocol is wrapped by every *ProtocolError.
var ErrProtocol = errors.New("device: MQTT protocol error")

// ProtocolError is why the agent closed a connection on which the broker
// broke MQTT in a way the client would misread. One case is a first packet
// that is not a CONNACK of exactly two bytes (3.1.1) with its reserved bits
// clear and a return code the protocol knows: paho takes a CONNACK of any
// length, and an unknown code, as a session. Others are a SUBACK or an MQTT
// 5 DISCONNECT with a code the protocol does not define, and a PUBLISH above
// the QoS granted. The attempt, or the session, does not count as
// connected; the next attempt waits the policy's delay. It wraps
// ErrProtocol. The agent makes them. Once made it is not changed, so it is
// safe to share.
type ProtocolError struct {
	Type     byte     // the MQTT control packet type (2 CONNACK, 9 SUBACK, 14 DISCONNECT, ...)
	Reason   string   // what was wrong, as a sentence's end
	Protocol Protocol // the version the agent spoke
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("device: the broker broke MQTT %s (packet type %d): %s", e.Protocol, e.Type, e.Reason)
}

// Unwrap returns ErrProtocol.
func (e *ProtocolError) Unwrap() error { return ErrProtocol }

// DisconnectError is an MQTT 5 broker ending a session with a DISCONNECT:
// its reason code and, for 0x9C and 0x9D, the Server Reference it named.
// errors.As finds it in an EventLost's Err. Once made it is not changed,
// so it is safe to share.
type DisconnectError struct {
	Code      int
	Reference string // the Server Reference, if the broker sent one
	Reason    string // the broker's Reason String, if it sent one
}

func (e *DisconnectError) Error() string {
	s := fmt.Sprintf("DISCONNECT %#02x (%s)", e.Code, CodeText(e.Code))
	if e.Reference != "" {
		s += " to " + e.Reference
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}
