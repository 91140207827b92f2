package transport

// reasons names the reason codes MQTT 5 defines for a CONNACK, and
// whether each may come in one (c) or in a server's DISCONNECT (d). Any
// other code is a protocol error: paho.golang would take a CONNACK code
// under 0x80 for success whatever it is.
var reasons = map[byte]struct {
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

// known says whether code is one MQTT 5 defines for the packet: 'c' a
// CONNACK, 'd' a server's DISCONNECT.
func known(code byte, packet byte) bool {
	r, ok := reasons[code]
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

// CodeText names a CONNACK or DISCONNECT code of either protocol.
func CodeText(code int) string {
	if code >= 0x80 && code <= 0xff {
		if r, ok := reasons[byte(code)]; ok {
			return r.name
		}
	}
	return connackText(code)
}

func connackText(code int) string {
	switch code {
	case 1:
		return "unacceptable protocol version"
	case 2:
		return "identifier rejected"
	case 3:
		return "server unavailable"
	case 4:
		return "bad user name or password"
	case 5:
		return "not authorised"
	}
	return "unknown to MQTT 3.1.1"
}
