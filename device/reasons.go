package device

import (
	"github.com/herdguard/herdguard/device/internal/transport"
)

// Redirect codes: the broker names another server (its Server Reference)
// in a CONNACK or a DISCONNECT.
const (
	CodeUseAnotherServer = 0x9C
	CodeServerMoved      = 0x9D
)

// DisconnectError is an MQTT 5 broker ending a session with a DISCONNECT:
// its reason code (Code) and, for 0x9C and 0x9D, the Server Reference it
// named (Reference), with its Reason String if it sent one. errors.As finds
// it in an EventLost's Err. Safe to share.
type DisconnectError = transport.DisconnectError
