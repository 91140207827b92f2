package transport

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An MQTT 5 CONNACK is read whole before its last byte reaches the client,
// and refused unless its properties are what the standard allows: no
// property length in five bytes (which would hide what follows), no value
// MQTT 5 forbids, none a session could not survive (a Maximum Packet Size
// of 1), no property twice but User Property, nothing cut short.
func TestGuardReadsAnMQTT5CONNACKsPropertiesWhole(t *testing.T) {
	connack := func(props ...byte) []byte {
		body := []byte{0, 0}
		body = append(body, varintBytes(len(props))...)
		return frame(2, append(body, props...))
	}
	str := func(s string) []byte { return append([]byte{0, byte(len(s))}, s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for name, tc := range map[string]struct {
		packet []byte
		want   string // "" if it passes
	}{
		"no properties":          {connack(), ""},
		"two bytes only":         {frame(2, []byte{0, 0}), ""},
		"Server Keep Alive 0":    {connack(0x13, 0, 0), ""},
		"Receive Maximum 1":      {connack(0x21, 0, 1), ""},
		"Maximum Packet Size 64": {connack(0x27, 0, 0, 0, 64), ""},
		"User Property twice":    {connack(cat([]byte{0x26}, str("k"), str("v"), []byte{0x26}, str("k"), str("w"))...), ""},
		"a Server Reference":     {connack(cat([]byte{0x1c}, str("b.fleet.test"))...), ""},
		"a property length in five bytes": {frame(2, []byte{0, 0, 0x83, 0x80, 0x80, 0x80, 0x00, 0x13, 0, 0}),
			"a CONNACK whose property length is malformed (more than four bytes)"},
		"a property length past the packet": {frame(2, []byte{0, 0, 9, 0x13, 0, 0}),
			"a CONNACK whose properties declare 9 bytes and take 3"},
		"Receive Maximum 0": {connack(0x21, 0, 0),
			"a CONNACK with Receive Maximum of 0, which MQTT 5 does not allow or no session survives"},
		"Maximum Packet Size 0": {connack(0x27, 0, 0, 0, 0),
			"a CONNACK with Maximum Packet Size of 0, which MQTT 5 does not allow or no session survives"},
		"Maximum Packet Size 1": {connack(0x27, 0, 0, 0, 1),
			"a CONNACK with Maximum Packet Size of 1, which MQTT 5 does not allow or no session survives"},
		"Maximum QoS 2": {connack(0x24, 2),
			"a CONNACK with Maximum QoS of 2, which MQTT 5 does not allow or no session survives"},
		"Server Keep Alive twice": {connack(0x13, 0, 60, 0x13, 0, 0), "a CONNACK with Server Keep Alive twice"},
		"a PUBLISH's property":    {connack(0x01, 1), "a CONNACK with property 0x1, which MQTT 5 does not allow there"},
		"a string cut short":      {connack(0x1c, 0, 9, 'h'), "a CONNACK with Server Reference cut short"},
		"a string not UTF-8":      {connack(0x1f, 0, 2, 0xff, 0xfe), "a CONNACK with Reason String that is not UTF-8"},
		"a string holding NUL":    {connack(0x12, 0, 2, 'a', 0), "a CONNACK with Assigned Client Identifier holding U+0000"},
		"a number cut short":      {connack(0x27, 0, 0), "a CONNACK with Maximum Packet Size cut short"},
	} {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(20) { // however the stream is cut
				g := NewConn(&chunkConn{r: bytes.NewReader(tc.packet), rng: rand.New(rand.NewPCG(seed, 3))}, 1024, true, nil)
				b, err := io.ReadAll(g)
				if tc.want == "" {
					require.NoError(t, err)
					assert.Equal(t, tc.packet, b)
					continue
				}
				var br *ProtocolError
				require.ErrorAs(t, err, &br)
				assert.Equal(t, tc.want, br.Reason)
				assert.Less(t, len(b), len(tc.packet), "the CONNACK's last byte never reached the client")
			}
		})
	}
}
