//go:build !nomqtt5

package transport

import (
	"bytes"
	"math/rand/v2"
	"testing"

	packets5 "github.com/eclipse/paho.golang/packets"
)

// Whatever an MQTT 5 broker sends, paho.golang reading through the guard
// returns an error, never panics, and never sees a packet over the limit:
// a panic in its reading goroutine would take the device down.
func FuzzPahoGolangReadsThroughTheGuard(f *testing.F) {
	f.Add([]byte{0x20, 3, 0, 0, 0, 0x30, 0xff, 0xff, 0xff, 0x7f})
	// CONNACK 0x9C with a Server Reference
	f.Add([]byte{0x20, 8, 0, 0x9c, 5, 0x1c, 0, 2, 'h', 'b'})
	// PUBLISH with no properties
	f.Add([]byte{0x30, 6, 0, 1, 'a', 0, 'x', 'y'})
	// QoS 1, a payload format property
	f.Add([]byte{0x32, 9, 0, 1, 'a', 0, 1, 3, 0x01, 0x01, 'z'})
	// DISCONNECT 0x9C with a reference
	f.Add([]byte{0xe0, 7, 0x9c, 5, 0x1c, 0, 2, 'h', 'b'})
	f.Add([]byte{0x90, 4, 0, 1, 0, 0x80}) // SUBACK
	// a properties length past the packet
	f.Add([]byte{0x20, 5, 0, 0, 0xff, 0xff, 0xff})
	// a user property cut short
	f.Add([]byte{0x30, 0x0a, 0, 1, 'a', 0x05, 0x26, 0, 1, 'k', 0, 0xff})
	f.Fuzz(func(t *testing.T, stream []byte) {
		const limit = 64
		g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rand.New(rand.NewPCG(1, 2))}, limit, true, granted(1))
		for {
			p, err := packets5.ReadPacket(g)
			if err != nil {
				return
			}
			if pub, ok := p.Content.(*packets5.Publish); ok && len(pub.Payload) > limit {
				t.Fatalf("a %d-byte payload passed a %d-byte limit", len(pub.Payload), limit)
			}
		}
	})
}
