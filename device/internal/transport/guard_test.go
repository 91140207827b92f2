package transport

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkConn serves a byte stream in reads of random sizes, as a network would.
type chunkConn struct {
	net.Conn
	r   *bytes.Reader
	rng *rand.Rand
}

func (c *chunkConn) Read(p []byte) (int, error) {
	n := min(len(p), 1+c.rng.IntN(300))
	return c.r.Read(p[:n])
}

func (c *chunkConn) Close() error { return nil }

func frame(typ byte, body []byte) []byte {
	out := []byte{typ << 4}
	n := len(body)
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		out = append(out, d)
		if n == 0 {
			return append(out, body...)
		}
	}
}

// The guard follows frames however the stream is cut, reads the CONNACK
// code, and stops exactly at the first header over the limit.
func TestGuardFollowsFramesAcrossAnyChunking(t *testing.T) {
	const limit = 5000
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		code := byte(rng.IntN(6)) // the codes MQTT 3.1.1 knows
		stream := frame(2, []byte{0, code})
		for range 20 {
			typ := byte(1 + rng.IntN(14))
			if typ == 9 { // a SUBACK's codes are checked: valid ones
				body := []byte{0, 1}
				for range 1 + rng.IntN(limit-2) {
					body = append(body, []byte{0, 1, 2, 0x80}[rng.IntN(4)])
				}
				stream = append(stream, frame(9, body)...)
				continue
			}
			stream = append(stream, frame(typ, make([]byte, rng.IntN(limit+1)))...)
		}
		over := limit + 1 + rng.IntN(1<<20)
		stream = append(stream, frame(3, make([]byte, over))...)
		g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rng}, limit, false)
		read := 0
		var err error
		buf := make([]byte, 1+rng.IntN(4096))
		for err == nil {
			var n int
			n, err = g.Read(buf)
			read += n
		}
		var v *TooLarge
		require.ErrorAs(t, err, &v, "seed %d", seed)
		assert.Equal(t, TooLarge{Type: 3, Length: over, Limit: limit}, *v, "seed %d", seed)
		assert.Equal(t, int(code), g.ConnackCode(), "seed %d", seed)
		assert.Less(t, read, len(stream)-over, "seed %d: no byte of the oversized packet reached the reader", seed)
		_, err = g.Read(buf)
		assert.ErrorAs(t, err, &v, "every later read fails too")
	}
	// a stream that ends cleanly is passed through whole
	g := NewConn(&chunkConn{r: bytes.NewReader(frame(2, []byte{0, 0})), rng: rand.New(rand.NewPCG(1, 1))}, limit, false)
	b, err := io.ReadAll(g)
	require.NoError(t, err)
	assert.Len(t, b, 4)
	assert.Equal(t, 0, g.ConnackCode())
}

// Whatever a broker sends, paho reading through the guard returns an
// error, never panics, and never sees a packet over the limit.
func FuzzPahoReadsThroughTheGuard(f *testing.F) {
	f.Add([]byte{0x20, 2, 0, 0, 0x30, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{0x30, 5, 0, 9, 'a', 'b', 'c'})
	f.Add([]byte{0x32, 3, 0, 1, 'a'})
	f.Add([]byte{0x90, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{0x20, 2, 0, 0x87})
	f.Fuzz(func(t *testing.T, stream []byte) {
		const limit = 64
		g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rand.New(rand.NewPCG(1, 2))}, limit, false)
		for {
			p, err := packets.ReadPacket(g)
			if err != nil {
				return
			}
			if pub, ok := p.(*packets.PublishPacket); ok && len(pub.Payload) > limit {
				t.Fatalf("a %d-byte payload passed a %d-byte limit", len(pub.Payload), limit)
			}
		}
	})
}
