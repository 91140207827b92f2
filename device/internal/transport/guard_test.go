package transport

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
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
	return append(append([]byte{typ << 4}, varintBytes(len(body))...), body...)
}

// varintBytes is n as an MQTT variable byte integer.
func varintBytes(n int) []byte {
	var out []byte
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		out = append(out, d)
		if n == 0 {
			return out
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
		g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rng}, limit, false, nil)
		read := 0
		var err error
		buf := make([]byte, 1+rng.IntN(4096))
		for err == nil {
			var n int
			n, err = g.Read(buf)
			read += n
		}
		var v *PacketTooLargeError
		require.ErrorAs(t, err, &v, "seed %d", seed)
		assert.Equal(t, PacketTooLargeError{Type: 3, Length: over, Limit: limit}, *v, "seed %d", seed)
		assert.Equal(t, int(code), g.ConnackCode(), "seed %d", seed)
		assert.Less(t, read, len(stream)-over, "seed %d: no byte of the oversized packet reached the reader", seed)
		_, err = g.Read(buf)
		assert.ErrorAs(t, err, &v, "every later read fails too")
	}
	// a stream that ends cleanly is passed through whole
	g := NewConn(&chunkConn{r: bytes.NewReader(frame(2, []byte{0, 0})), rng: rand.New(rand.NewPCG(1, 1))}, limit, false, nil)
	b, err := io.ReadAll(g)
	require.NoError(t, err)
	assert.Len(t, b, 4)
	assert.Equal(t, 0, g.ConnackCode())
}

// granted is a maxQoS for NewConn.
func granted(q uint32) *atomic.Uint32 {
	v := new(atomic.Uint32)
	v.Store(q)
	return v
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
		g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rand.New(rand.NewPCG(1, 2))}, limit, false, granted(1))
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

// A broker sends at most the QoS it granted, and MQTT has no QoS 3. The
// guard refuses a PUBLISH above what the agent's subscriptions may receive
// before any byte of it reaches paho, which would keep it unacknowledged
// (QoS 2 until a PUBREL). The bound is read as each PUBLISH arrives.
func TestGuardRefusesAPublishAboveTheGrantedQoS(t *testing.T) {
	publish := func(qos byte) []byte {
		p := frame(3, []byte{0, 1, 'a', 0, 1, 'x'})
		p[0] |= qos << 1
		return p
	}
	for _, tc := range []struct {
		granted uint32
		qos     byte
		want    string // "" if it passes
	}{
		{0, 0, ""},
		{0, 1, "a PUBLISH at QoS 1, above the QoS 0 the device's subscriptions were granted"},
		{1, 1, ""},
		{1, 2, "a PUBLISH at QoS 2, above the QoS 1 the device's subscriptions were granted"},
		{2, 3, "a PUBLISH with QoS 3, which MQTT does not have"},
	} {
		stream := append(frame(2, []byte{0, 0}), publish(tc.qos)...)
		g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rand.New(rand.NewPCG(1, 1))}, 1024, false, granted(tc.granted))
		b, err := io.ReadAll(g)
		if tc.want == "" {
			require.NoError(t, err)
			assert.Equal(t, stream, b)
			continue
		}
		var br *ProtocolError
		require.ErrorAs(t, err, &br, "QoS %d granted %d", tc.qos, tc.granted)
		assert.Equal(t, tc.want, br.Reason)
		assert.LessOrEqual(t, len(b), 4, "not one byte of the PUBLISH (nor of the read it came in)")
	}

	// the bound as it stands when the PUBLISH comes: raised after a SUBACK
	q := granted(0)
	stream := append(frame(2, []byte{0, 0}), publish(1)...)
	g := NewConn(&chunkConn{r: bytes.NewReader(stream), rng: rand.New(rand.NewPCG(1, 1))}, 1024, false, q)
	buf := make([]byte, 4)
	_, err := io.ReadFull(g, buf)
	require.NoError(t, err)
	q.Store(1)
	rest, err := io.ReadAll(g)
	require.NoError(t, err)
	assert.Equal(t, stream[4:], rest)
}

// paho v1.5.1 stores each incoming QoS 1 or 2 PUBLISH until it is
// acknowledged or released. The store the transport gives it keeps no more
// than the agent's queue and the few on their way to it, in count and in
// bytes: past that it keeps nothing more and ends the connection.
func TestTheStorePahoKeepsIsBounded(t *testing.T) {
	publish := func(id uint16, size int) *packets.PublishPacket {
		p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		p.Qos, p.MessageID, p.TopicName, p.Payload = 1, id, "t", make([]byte, size)
		return p
	}
	for name, tc := range map[string]struct {
		size, fit int
	}{
		"the count binds": {size: 10, fit: 4 + storeSlack},
		"the bytes bind":  {size: 1000, fit: (4000 + storeSlack*1000) / 1001},
	} {
		t.Run(name, func(t *testing.T) {
			var over []string
			s := newBoundedStore(&Settings{IncomingQueue: 4, IncomingQueueBytes: 4000, MaxIncomingPacket: 1000},
				func(reason string) { over = append(over, reason) })
			s.Open()
			for id := range uint16(tc.fit) {
				s.Put(inboundKey+strconv.Itoa(int(id)), publish(id, tc.size))
			}
			assert.Empty(t, over)
			s.Put("i.9999", publish(9999, tc.size))
			require.Len(t, over, 1)
			assert.Contains(t, over[0], "left unacknowledged")
			assert.Nil(t, s.Get("i.9999"), "not kept")
			assert.Len(t, s.All(), tc.fit)

			// acknowledged, one makes room for another; outgoing ones are
			// the caller's to bound
			s.Del(inboundKey + "0")
			s.Put("i.9999", publish(9999, tc.size))
			assert.Len(t, over, 1)
			s.Put("o.1", publish(1, 100*tc.size))
			assert.Len(t, over, 1)

			// a persistent session's store survives a close; a clean one
			// starts empty
			s.Close()
			s.Open()
			s.Put("i.10000", publish(10000, tc.size))
			assert.Len(t, over, 2)
			s.Reset()
			s.Put("i.10000", publish(10000, tc.size))
			assert.Len(t, over, 2)
		})
	}
}
