package device

import (
	"time"

	"github.com/herdguard/herdguard/device/internal/transport"
)

// DefaultMaxIncomingPacket is Config.Incoming.MaxPacket's default: far above
// any command or configuration a device is sent, far below what would starve
// a device of memory.
const DefaultMaxIncomingPacket = 256 << 10

// MinIncomingPacket is the least Config.Incoming.MaxPacket: below it even a
// CONNACK or a SUBACK would not fit, and the device could never connect.
const MinIncomingPacket = 64

// MaxKeepAlive is the longest Config.KeepAlive: MQTT sends it in two
// bytes of seconds.
const MaxKeepAlive = 65535 * time.Second

// PacketTooLargeError is why the agent closed a connection whose next
// packet declared more bytes than Config.Incoming.MaxPacket (Length, Limit),
// or whose length was malformed (Length -1). Type is the MQTT control
// packet type. The agent closes the connection before paho reads the
// packet: paho v1.5.1 allocates whatever length a header declares, so one
// hostile header could take a device's memory. Safe to share.
type PacketTooLargeError = transport.PacketTooLargeError

// ProtocolError is why the agent closed a connection on which the broker
// broke MQTT in a way paho would misread: a first packet that is not a
// well-formed CONNACK with a code the protocol knows (paho takes a CONNACK
// of any length, and an unknown code, as a session), a SUBACK or MQTT 5
// DISCONNECT code the protocol does not define, a PUBLISH above the QoS
// granted. Type is the packet type, Reason what was wrong, Protocol the
// version the agent spoke. The attempt, or the session, does not count as
// connected; the next attempt waits the policy's delay. It wraps
// ErrProtocol. Safe to share.
type ProtocolError = transport.ProtocolError

// ErrProtocol is wrapped by every *ProtocolError.
var ErrProtocol = transport.ErrProtocol
