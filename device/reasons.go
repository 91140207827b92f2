package device

import (
	"fmt"

	"github.com/herdguard/herdguard/device/internal/transport"
)

// Redirect codes: the broker names another server (its Server Reference)
// in a CONNACK or a DISCONNECT.
const (
	CodeUseAnotherServer = 0x9C
	CodeServerMoved      = 0x9D
)

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
	s := fmt.Sprintf("DISCONNECT %#02x (%s)", e.Code, transport.CodeText(e.Code))
	if e.Reference != "" {
		s += " to " + e.Reference
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}
