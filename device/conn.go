package device

import (
	"errors"
	"fmt"
	"time"
)

// DefaultMaxIncomingPacket is Config.MaxIncomingPacket's default: far above
// any command or configuration a device is sent, far below what would starve
// a device of memory.
const DefaultMaxIncomingPacket = 256 << 10

// MinIncomingPacket is the least Config.MaxIncomingPacket: below it even a
// CONNACK or a SUBACK would not fit, and the device could never connect.
const MinIncomingPacket = 64

// MaxKeepAlive is the longest Config.KeepAlive: MQTT sends it in two
// bytes of seconds.
const MaxKeepAlive = 65535 * time.Second

// PacketTooLargeError is why the agent closed a connection whose next
// packet declared more bytes than Config.MaxIncomingPacket, or whose length
// was malformed. The agent closes the connection before paho reads the
// packet. paho v1.5.1 allocates whatever length a header declares, then
// copies the payload again. One hostile header could thus take a device's
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
	return fmt.Sprintf("device: incoming MQTT packet (type %d) declares %d bytes, over the %d-byte limit (Config.MaxIncomingPacket)",
		e.Type, e.Length, e.Limit)
}

// ProtocolError is why the agent closed a connection on which the broker
// broke MQTT 3.1.1 in a way paho v1.5.1 would misread. One case is a first
// packet that is not a CONNACK of exactly two bytes with its reserved bits
// clear and a return code 3.1.1 knows. paho takes a CONNACK of any length,
// and an unknown code, as a session. The other case is a SUBACK with a
// return code other than 0, 1, 2 and 0x80. The attempt, or the session,
// does not count as connected. The next attempt waits the policy's delay.
// It wraps ErrProtocol. The agent makes them. Once made it is not changed,
// so it is safe to share.
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

// ErrProtocol is wrapped by every *ProtocolError.
var ErrProtocol = errors.New("device: MQTT protocol error")
