package wire

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	packets5 "github.com/eclipse/paho.golang/packets"
	packets3 "github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/herdguard/herdguard/device"
)

// The packets a device sends that never change: MQTT's two-byte PINGREQ and
// a DISCONNECT without a reason (normal disconnection, in 3.1.1 and 5).
var (
	pingreq    = []byte{0xC0, 0}
	disconnect = []byte{0xE0, 0}
)

// Packet types, the high nibble of a fixed header's first byte.
const (
	typeConnack    = 2
	typePublish    = 3
	typePuback     = 4
	typePingresp   = 13
	typeDisconnect = 14
)

// connectPacket is the CONNECT a device with this client ID sends: clean,
// with the keepalive in whole seconds, encoded by the module's codecs
// (paho.mqtt.golang's for 3.1.1, paho.golang's for 5) as the agent's own
// clients would.
func connectPacket(v5 bool, clientID string, keepAlive time.Duration) []byte {
	var buf bytes.Buffer
	secs := uint16(min(keepAlive/time.Second, 65535))
	if v5 {
		cp := &packets5.ControlPacket{FixedHeader: packets5.FixedHeader{Type: packets5.CONNECT},
			Content: &packets5.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, CleanStart: true, ClientID: clientID,
				KeepAlive: secs, Properties: &packets5.Properties{}}}
		_, _ = cp.WriteTo(&buf) // a bytes.Buffer takes every write
		return buf.Bytes()
	}
	cp := packets3.NewControlPacket(packets3.Connect).(*packets3.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.CleanSession = "MQTT", 4, true
	cp.ClientIdentifier, cp.Keepalive = clientID, secs
	_ = cp.Write(&buf)
	return buf.Bytes()
}

// frame is one whole packet read off the wire, as it came (the codecs
// read it from its fixed header on), and its body.
type frame struct {
	raw, body []byte
}

func (f frame) typ() byte { return f.raw[0] >> 4 }

// errTooLarge and errMalformed end a connection whose broker sent what the
// firmware would not read: a packet over its bound, or a fixed header MQTT
// does not allow. They cost that connection, never the loop.
var (
	errTooLarge  = errors.New("wire: incoming packet over the firmware's bound")
	errMalformed = errors.New("wire: malformed fixed header")
)

// nextFrame splits the first whole packet off b. It returns n == 0 if b
// holds only part of one. Its bound is the remaining length the firmware
// reads at most (device.DefaultMaxIncomingPacket): a longer packet is
// refused on its header, before a byte of its body is kept.
func nextFrame(b []byte, limit int) (f frame, n int, err error) {
	if len(b) < 2 {
		return frame{}, 0, nil
	}
	length, shift := 0, 0
	for i := 1; ; i++ {
		if i > 4 {
			return frame{}, 0, errMalformed // a length in more than four bytes
		}
		if i >= len(b) {
			return frame{}, 0, nil
		}
		length |= int(b[i]&0x7F) << shift
		shift += 7
		if b[i]&0x80 == 0 {
			if length > limit {
				return frame{}, 0, fmt.Errorf("%w: %d bytes, the bound %d", errTooLarge, length, limit)
			}
			if len(b) < i+1+length {
				return frame{}, 0, nil
			}
			return frame{raw: b[:i+1+length], body: b[i+1 : i+1+length]}, i + 1 + length, nil
		}
	}
}

// defaultLimit is the firmware's bound on one incoming packet.
const defaultLimit = device.DefaultMaxIncomingPacket

// connack is what a CONNACK said: its code and, in MQTT 5, the server it
// names (the Server Reference of 0x9C and 0x9D).
type connack struct {
	code      int
	reference string
}

// readConnack decodes a CONNACK frame with the module's codecs. A 3.1.1
// CONNACK is two bytes; one that is not, or an MQTT 5 one the codec cannot
// read, is a broken broker, as the agent's transport finds it.
func readConnack(v5 bool, f frame) (connack, error) {
	if v5 {
		cp, err := packets5.ReadPacket(bytes.NewReader(f.raw))
		if err != nil {
			return connack{}, fmt.Errorf("wire: unreadable CONNACK: %w", err)
		}
		c := cp.Content.(*packets5.Connack)
		out := connack{code: int(c.ReasonCode)}
		if c.Properties != nil {
			out.reference = c.Properties.ServerReference
		}
		return out, nil
	}
	if len(f.body) != 2 {
		return connack{}, fmt.Errorf("wire: a 3.1.1 CONNACK of %d bytes", len(f.body))
	}
	cp, err := packets3.ReadPacket(bytes.NewReader(f.raw))
	if err != nil {
		return connack{}, fmt.Errorf("wire: unreadable CONNACK: %w", err)
	}
	return connack{code: int(cp.(*packets3.ConnackPacket).ReturnCode)}, nil
}

// readDisconnect decodes an MQTT 5 DISCONNECT: its reason code and the
// server it names (0x9C, 0x9D). A body-less one is a normal disconnection.
func readDisconnect(f frame) (connack, error) {
	cp, err := packets5.ReadPacket(bytes.NewReader(f.raw))
	if err != nil {
		return connack{}, fmt.Errorf("wire: unreadable DISCONNECT: %w", err)
	}
	d := cp.Content.(*packets5.Disconnect)
	out := connack{code: int(d.ReasonCode)}
	if d.Properties != nil {
		out.reference = d.Properties.ServerReference
	}
	return out, nil
}

// publishPacket is a QoS 1 PUBLISH of payload to topic, packet ID id, DUP
// if dup, encoded by the protocol's codec.
func publishPacket(v5 bool, topic string, id uint16, dup bool, payload []byte) []byte {
	var buf bytes.Buffer
	if v5 {
		cp := &packets5.ControlPacket{FixedHeader: packets5.FixedHeader{Type: packets5.PUBLISH},
			Content: &packets5.Publish{Topic: topic, QoS: 1, Duplicate: dup, PacketID: id, Payload: payload,
				Properties: &packets5.Properties{}}}
		_, _ = cp.WriteTo(&buf)
		return buf.Bytes()
	}
	cp := packets3.NewControlPacket(packets3.Publish).(*packets3.PublishPacket)
	cp.TopicName, cp.Qos, cp.Dup, cp.MessageID, cp.Payload = topic, 1, dup, id, payload
	_ = cp.Write(&buf)
	return buf.Bytes()
}
