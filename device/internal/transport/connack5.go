package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// MinMaximumPacketSize is the least Maximum Packet Size a broker may name:
// below it no PUBLISH a device sends fits, and a session would stay up
// while every publish failed. MQTT 5 forbids only 0; 64 is the floor the
// device keeps to for its own incoming bound.
const MinMaximumPacketSize = 64

// connackProperty is what MQTT 5 allows of one CONNACK property: its
// value's form (a fixed size in bytes, or a string, a string pair or binary
// data) and, for a number, the values it may take.
type connackProperty struct {
	name string
	form int // 1, 2 or 4 bytes, or one of the forms below
	ok   func(v uint32) bool
}

const (
	formString = -1 - iota
	formPair
	formBinary
)

func oneOf01(v uint32) bool { return v <= 1 }

// connackProperties are the properties MQTT 5 (3.2.2.3) allows in a
// CONNACK. Any other identifier is a protocol error.
var connackProperties = map[byte]connackProperty{
	0x11: {"Session Expiry Interval", 4, nil},
	0x21: {"Receive Maximum", 2, func(v uint32) bool { return v > 0 }},
	0x24: {"Maximum QoS", 1, oneOf01},
	0x25: {"Retain Available", 1, oneOf01},
	0x27: {"Maximum Packet Size", 4, func(v uint32) bool { return v >= MinMaximumPacketSize }},
	0x12: {"Assigned Client Identifier", formString, nil},
	0x22: {"Topic Alias Maximum", 2, nil},
	0x1F: {"Reason String", formString, nil},
	0x26: {"User Property", formPair, nil},
	0x28: {"Wildcard Subscription Available", 1, oneOf01},
	0x29: {"Subscription Identifiers Available", 1, oneOf01},
	0x2A: {"Shared Subscription Available", 1, oneOf01},
	0x13: {"Server Keep Alive", 2, nil},
	0x1A: {"Response Information", formString, nil},
	0x1C: {"Server Reference", formString, nil},
	0x15: {"Authentication Method", formString, nil},
	0x16: {"Authentication Data", formBinary, nil},
}

// checkConnack5 reads an MQTT 5 CONNACK's body (flags, reason code,
// properties) as the standard has it, and returns the breach if it is not
// so. paho.golang reads what it can of a malformed one: a property length
// in five bytes, a Receive Maximum of 0 or a Maximum Packet Size of 1 would
// otherwise hold a session that can never work.
func checkConnack5(body []byte) *ProtocolError {
	if len(body) == 2 {
		return nil // no properties at all: read as none
	}
	breach := func(format string, a ...any) *ProtocolError {
		return &ProtocolError{Type: 2, Reason: "a CONNACK " + fmt.Sprintf(format, a...), Protocol: MQTT5}
	}
	n, size, ok := varint(body[2:])
	if !ok {
		return breach("whose property length is malformed (more than four bytes)")
	}
	props := body[2+size:]
	if n != len(props) {
		return breach("whose properties declare %d bytes and take %d", n, len(props))
	}
	seen := map[byte]bool{}
	for len(props) > 0 {
		id := props[0]
		p, known := connackProperties[id]
		if !known {
			return breach("with property %#x, which MQTT 5 does not allow there", id)
		}
		if seen[id] && p.form != formPair {
			return breach("with %s twice", p.name)
		}
		seen[id] = true
		rest, bad := checkProperty(p, props[1:])
		if bad != "" {
			return breach("with %s %s", p.name, bad)
		}
		props = rest
	}
	return nil
}

// checkProperty reads one property's value from b and returns what
// follows it, or why the value is wrong.
func checkProperty(p connackProperty, b []byte) (rest []byte, bad string) {
	switch p.form {
	case 1, 2, 4:
		if len(b) < p.form {
			return nil, "cut short"
		}
		var v uint32
		for _, d := range b[:p.form] {
			v = v<<8 | uint32(d)
		}
		if p.ok != nil && !p.ok(v) {
			return nil, fmt.Sprintf("of %d, which MQTT 5 does not allow or no session survives", v)
		}
		return b[p.form:], ""
	case formPair:
		rest, bad = checkString(b)
		if bad != "" {
			return nil, bad
		}
		return checkString(rest)
	case formString:
		return checkString(b)
	}
	if _, rest, ok := prefixed(b); ok {
		return rest, ""
	}
	return nil, "cut short"
}

// prefixed reads what MQTT prefixes with two bytes of length.
func prefixed(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 2 || len(b)-2 < int(binary.BigEndian.Uint16(b)) {
		return nil, nil, false
	}
	n := 2 + int(binary.BigEndian.Uint16(b))
	return b[2:n], b[n:], true
}

// checkString reads a UTF-8 string as MQTT 5 encodes it: two bytes of
// length, then well-formed UTF-8 with no U+0000.
func checkString(b []byte) (rest []byte, bad string) {
	s, rest, ok := prefixed(b)
	switch {
	case !ok:
		return nil, "cut short"
	case !utf8.Valid(s):
		return nil, "that is not UTF-8"
	case bytes.IndexByte(s, 0) >= 0:
		return nil, "holding U+0000"
	}
	return rest, ""
}

// varint reads an MQTT variable byte integer: its value, and the bytes it
// took. ok is false past four bytes or at the end of b.
func varint(b []byte) (v, size int, ok bool) {
	for i := 0; i < 4 && i < len(b); i++ {
		v |= int(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1, true
		}
	}
	return 0, 0, false
}
