package device

import "fmt"

// Redirect codes: the broker names another server (its Server Reference)
// in a CONNACK or a DISCONNECT.
const (
	CodeUseAnotherServer = 0x9C
	CodeServerMoved      = 0x9D
)

// v5Reasons names the reason codes MQTT 5 defines for a CONNACK, and
// whether each may come in one (c) or in a server's DISCONNECT (d). Any
// other code is a protocol error: paho.golang would take a CONNACK code
// under 0x80 for success whatever it is.
var v5Reasons = map[byte]struct {
	name string
	in   string
}{
	0x00: {"success", "cd"},
	0x80: {"unspecified error", "cd"},
	0x81: {"malformed packet", "cd"},
	0x82: {"protocol error", "cd"},
	0x83: {"implementation specific error", "cd"},
	0x84: {"unsupported protocol version", "c"},
	0x85: {"client identifier not valid", "c"},
	0x86: {"bad user name or password", "c"},
	0x87: {"not authorized", "cd"},
	0x88: {"server unavailable", "c"},
	0x89: {"server busy", "cd"},
	0x8A: {"banned", "c"},
	0x8B: {"server shutting down", "d"},
	0x8C: {"bad authentication method", "c"},
	0x8D: {"keep alive timeout", "d"},
	0x8E: {"session taken over", "d"},
	0x8F: {"topic filter invalid", "d"},
	0x90: {"topic name invalid", "cd"},
	0x93: {"receive maximum exceeded", "d"},
	0x94: {"topic alias invalid", "d"},
	0x95: {"packet too large", "cd"},
	0x96: {"message rate too high", "d"},
	0x97: {"quota exceeded", "cd"},
	0x98: {"administrative action", "d"},
	0x99: {"payload format invalid", "cd"},
	0x9A: {"retain not supported", "cd"},
	0x9B: {"QoS not supported", "cd"},
	0x9C: {"use another server", "cd"},
	0x9D: {"server moved", "cd"},
	0x9E: {"shared subscriptions not supported", "d"},
	0x9F: {"connection rate exceeded", "cd"},
	0xA0: {"maximum connect time", "d"},
	0xA1: {"subscription identifiers not supported", "d"},
	0xA2: {"wildcard subscriptions not supported", "d"},
}

// v5Known says whether code is one MQTT 5 defines for the packet: 'c' a
// CONNACK, 'd' a server's DISCONNECT.
func v5Known(code byte, packet byte) bool {
	r, ok := v5Reasons[code]
	if !ok {
		return false
	}
	for i := 0; i < len(r.in); i++ {
		if r.in[i] == packet {
			return true
		}
	}
	return false
}

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
	s := fmt.Sprintf("DISCONNECT %#02x (%s)", e.Code, codeText(e.Code))
	if e.Reference != "" {
		s += " to " + e.Reference
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// codeText names a CONNACK or DISCONNECT code of either protocol.
func codeText(code int) string {
	if code >= 0x80 && code <= 0xff {
		if r, ok := v5Reasons[byte(code)]; ok {
			return r.name
		}
	}
	return connackText(code)
}
