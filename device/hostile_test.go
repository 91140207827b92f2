package device_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/fakeclock"
)

// hostileBroker answers each connection paho opens through Dial: script
// runs on the broker's end after the CONNECT has been read. maxRead is the
// largest buffer paho read the device's end into: paho reads a packet's
// body into a buffer of the size its header declares.
type hostileBroker struct {
	conns   chan net.Conn
	script  func(n int, c net.Conn) // n counts connections from 1
	done    chan struct{}
	maxRead atomic.Int64
}

// spyConn records the largest read.
type spyConn struct {
	net.Conn
	max *atomic.Int64
}

func (c spyConn) Read(p []byte) (int, error) {
	for n := int64(len(p)); ; {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			break
		}
	}
	return c.Conn.Read(p)
}

func newHostileBroker(t *testing.T, script func(n int, c net.Conn)) *hostileBroker {
	h := &hostileBroker{conns: make(chan net.Conn, 16), script: script, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		n := 0
		for c := range h.conns {
			n++
			if _, err := packets.ReadPacket(c); err == nil {
				h.script(n, c)
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { close(h.conns); <-h.done })
	return h
}

func (h *hostileBroker) dial(context.Context, *url.URL) (net.Conn, error) {
	device, broker := net.Pipe()
	h.conns <- broker
	return spyConn{Conn: device, max: &h.maxRead}, nil
}

// connack writes a CONNACK 0.
func connack(c net.Conn) error {
	_, err := c.Write([]byte{0x20, 2, 0, 0})
	return err
}

// header is an MQTT fixed header declaring length bytes.
func header(typeAndFlags byte, length int) []byte {
	h := []byte{typeAndFlags}
	for {
		d := byte(length % 128)
		length /= 128
		if length > 0 {
			d |= 0x80
		}
		h = append(h, d)
		if length == 0 {
			return h
		}
	}
}

// stream writes b, then zeros until the reader goes away.
func stream(c net.Conn, b []byte) {
	if _, err := c.Write(b); err != nil {
		return
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := c.Write(chunk); err != nil {
			return
		}
	}
}

// quiet answers like a well-behaved broker that has nothing to say: a
// CONNACK 0, and a SUBACK granting each SUBSCRIBE.
func quiet(c net.Conn) { answerSubscribes(c, 0) }

// answerSubscribes sends a CONNACK 0, then answers each SUBSCRIBE with a
// SUBACK of code for its one topic.
func answerSubscribes(c net.Conn, code byte) {
	if connack(c) != nil {
		return
	}
	for {
		p, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		if sub, ok := p.(*packets.SubscribePacket); ok {
			if _, err := c.Write([]byte{0x90, 3, byte(sub.MessageID >> 8), byte(sub.MessageID), code}); err != nil {
				return
			}
		}
	}
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// hostileRig is an agent whose every connection goes to a hostile broker.
type hostileRig struct {
	*rig
	metrics *counts
	broker  *hostileBroker
}

func newHostileRig(t *testing.T, script func(n int, c net.Conn), mod func(*device.Config)) *hostileRig {
	h := newHostileBroker(t, script)
	r := &rig{t: t, clock: fakeclock.New(t0), events: make(chan device.Event, 1000)}
	m := &counts{outcomes: map[device.AttemptOutcome]int{}}
	tm := device.DefaultTiming()
	cfg := device.Config{Broker: "tcp://hostile:1883", ClientID: "dev-1", Timing: &tm, Clock: r.clock,
		Source: rand.NewPCG(1, 1), Dial: h.dial, Metrics: m, OnEvent: func(e device.Event) { r.events <- e }}
	if mod != nil {
		mod(&cfg)
	}
	r.start(cfg)
	return &hostileRig{rig: r, metrics: m, broker: h}
}

// A broker, or anyone on a plaintext path, declares a packet bigger than
// the device may hold. The agent closes the connection before paho
// allocates it (paho v1.5.1 would allocate the declared length, then copy
// the payload again), reports it, and reconnects on the policy's schedule.
func TestOversizedPacketClosesTheConnectionBeforePahoAllocatesIt(t *testing.T) {
	const limit = device.DefaultMaxIncomingPacket
	for name, tc := range map[string]struct {
		typ    byte
		length int
		send   func(c net.Conn, hdr []byte) // after the CONNECT
	}{
		"connack one over": {2, limit + 1, func(c net.Conn, hdr []byte) { stream(c, hdr) }},
		"publish one over": {3, limit + 1, func(c net.Conn, hdr []byte) {
			if connack(c) == nil {
				stream(c, hdr)
			}
		}},
		"publish of 0x0FFFFFFF bytes, streamed": {3, 0x0FFFFFFF, func(c net.Conn, hdr []byte) {
			if connack(c) == nil {
				stream(c, hdr)
			}
		}},
		"suback one over": {9, limit + 1, func(c net.Conn, hdr []byte) {
			if connack(c) != nil {
				return
			}
			if _, err := packets.ReadPacket(c); err == nil { // the SUBSCRIBE
				stream(c, hdr)
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			hdr := header(tc.typ<<4, tc.length) // a PUBLISH at QoS 0
			r := newHostileRig(t, func(n int, c net.Conn) {
				if n == 1 {
					tc.send(c, hdr)
					return
				}
				quiet(c)
			}, nil)
			if tc.typ == 9 {
				require.NoError(t, r.agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(string, []byte) {}))
			}
			runtime.GC()
			before := totalAlloc()
			r.advanceWait()
			tooLarge := r.next(device.EventPacketTooLarge)
			allocated := totalAlloc() - before

			var perr *device.PacketTooLargeError
			require.ErrorAs(t, tooLarge.Err, &perr)
			assert.Equal(t, device.PacketTooLargeError{Type: tc.typ, Length: tc.length, Limit: limit}, *perr)
			assert.Less(t, allocated, uint64(4<<20), "bytes allocated while the hostile packet arrived")
			assert.Less(t, r.broker.maxRead.Load(), int64(limit), "paho never read into a buffer of the declared size")
			t.Logf("allocated %d KiB while a packet declaring %d bytes arrived", allocated>>10, tc.length)

			if tc.typ == 2 { // during the handshake: a failed attempt
				failed := r.next(device.EventAttemptFailed)
				assert.ErrorAs(t, failed.Err, &perr)
				assert.Equal(t, device.NoConnack, failed.Code)
			} else {
				lost := r.next(device.EventLost)
				assert.ErrorAs(t, lost.Err, &perr)
			}
			wait := r.advanceWait() // the policy's schedule, as after any failure
			assert.Positive(t, wait)
			r.next(device.EventConnected)
			r.metrics.mu.Lock()
			assert.Equal(t, 1, r.metrics.tooLarge)
			r.metrics.mu.Unlock()
		})
	}
}

// A packet exactly at the limit is a packet like any other.
func TestPacketAtTheLimitIsDelivered(t *testing.T) {
	const limit = 1 << 10
	got := make(chan int, 1)
	topic := "cmd/dev-1"
	r := newHostileRig(t, func(n int, c net.Conn) {
		if connack(c) != nil {
			return
		}
		sub, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		ack := packets.NewControlPacket(packets.Suback).(*packets.SubackPacket)
		ack.MessageID, ack.ReturnCodes = sub.Details().MessageID, []byte{0}
		if ack.Write(c) != nil {
			return
		}
		body := append([]byte{0, byte(len(topic))}, topic...)
		body = append(body, bytes.Repeat([]byte{'x'}, limit-len(body))...)
		if _, err := c.Write(append(header(0x30, limit), body...)); err == nil {
			_, _ = io.Copy(io.Discard, c)
		}
	}, func(c *device.Config) { c.Incoming.MaxPacket = limit })
	require.NoError(t, r.agent.Subscribe(context.Background(), topic, 0, func(_ string, p []byte) { got <- len(p) }))
	r.bootAndConnect()
	select {
	case n := <-got:
		assert.Equal(t, limit-2-len(topic), n)
	case <-time.After(bound):
		t.Fatal("the message at the limit never reached the handler")
	}
}

// A length with a fifth byte is malformed: paho would read the next byte
// as the body and lose the frame.
func TestMalformedLengthClosesTheConnection(t *testing.T) {
	r := newHostileRig(t, func(n int, c net.Conn) {
		if n == 1 && connack(c) == nil {
			stream(c, []byte{0x30, 0x80, 0x80, 0x80, 0x80, 0x01})
			return
		}
		quiet(c)
	}, nil)
	r.advanceWait()
	e := r.next(device.EventPacketTooLarge)
	var perr *device.PacketTooLargeError
	require.True(t, errors.As(e.Err, &perr))
	assert.Equal(t, -1, perr.Length)
	assert.Contains(t, perr.Error(), "malformed")
}

func TestMaxIncomingPacketIsValidated(t *testing.T) {
	for _, n := range []int{-1, 1, device.MinIncomingPacket - 1, 1 << 28} {
		_, err := device.New(device.Config{Broker: "tcp://127.0.0.1:1883", ClientID: "x", Incoming: device.IncomingLimits{MaxPacket: n}})
		assert.Error(t, err, n)
	}
}

// A CONNACK paho v1.5.1 would take for a session (one longer than two
// bytes, one with reserved bits set, a code MQTT 3.1.1 does not know, a
// first packet that is no CONNACK) is a protocol error: the attempt does
// not count as connected, the event and the metric say why, and the next
// attempt waits the policy's delay. Thirty of them in a row count no
// connect.
func TestALyingCONNACKIsAProtocolError(t *testing.T) {
	for name, tc := range map[string]struct {
		bytes []byte
		why   string
	}{
		"three bytes, code 0x80": {[]byte{0x20, 3, 0, 0x80, 0}, "a CONNACK of 3 bytes, not 2"},
		"reserved header flags":  {[]byte{0x21, 2, 0, 0}, "the first packet is of type 2, flags 0x1, not a CONNACK"},
		"reserved ack flags":     {[]byte{0x20, 2, 0x02, 0}, "a CONNACK with reserved flags 0x2"},
		"code 6":                 {[]byte{0x20, 2, 0, 6}, "CONNACK return code 6 (0x6), unknown to MQTT 3.1.1"},
		"MQTT 5's 0x97":          {[]byte{0x20, 2, 0, 0x97}, "CONNACK return code 151 (0x97), unknown to MQTT 3.1.1"},
		"a PUBLISH first":        {[]byte{0x30, 5, 0, 1, 'a', 'h', 'i'}, "the first packet is of type 3, flags 0x0, not a CONNACK"},
	} {
		t.Run(name, func(t *testing.T) {
			const lies = 30
			r := newHostileRig(t, func(n int, c net.Conn) {
				if n <= lies {
					_, _ = c.Write(tc.bytes)
					return
				}
				quiet(c)
			}, nil)
			var waits []time.Duration
			for range lies {
				waits = append(waits, r.advanceWait())
				f := r.next(device.EventAttemptFailed)
				assert.ErrorIs(t, f.Err, device.ErrProtocol)
				assert.ErrorContains(t, f.Err, tc.why)
				assert.Equal(t, device.NoConnack, f.Code)
			}
			r.advanceWait()
			r.next(device.EventConnected)
			assert.Equal(t, int64(1), r.agent.Stats().Connects, "none of the lies counted as connected")
			r.metrics.mu.Lock()
			assert.Equal(t, lies, r.metrics.outcomes[device.AttemptProtocolError])
			assert.Equal(t, 1, r.metrics.outcomes[device.AttemptAccepted])
			r.metrics.mu.Unlock()
			for k, w := range waits[1:] {
				assert.GreaterOrEqual(t, w, min(time.Duration(1<<min(k, 5))*time.Second, 32*time.Second),
					"attempt %d waited the policy's delay: no lie resets the backoff", k+2)
			}
		})
	}
}

// A SUBACK MQTT 3.1.1 does not know (a return code, reserved flags, no
// return code at all) ends the session as a protocol error; the agent
// reconnects on the policy's schedule.
func TestASUBACKWithAnUnknownCodeIsAProtocolError(t *testing.T) {
	for name, tc := range map[string]struct {
		suback func(id uint16) []byte
		want   string
	}{
		"an unknown code": {func(id uint16) []byte { return []byte{0x90, 3, byte(id >> 8), byte(id), 0x87} },
			"SUBACK return code 135 (0x87), unknown to MQTT 3.1.1"},
		"reserved flags": {func(id uint16) []byte { return []byte{0x92, 3, byte(id >> 8), byte(id), 0x01} },
			"a SUBACK with reserved flags 0x2"},
		"no return code": {func(id uint16) []byte { return []byte{0x90, 2, byte(id >> 8), byte(id)} },
			"a SUBACK of 2 bytes, with no return code"},
	} {
		t.Run(name, func(t *testing.T) {
			r := newHostileRig(t, func(n int, c net.Conn) {
				if n > 1 {
					quiet(c)
					return
				}
				if connack(c) != nil {
					return
				}
				p, err := packets.ReadPacket(c)
				if err != nil {
					return
				}
				_, _ = c.Write(tc.suback(p.(*packets.SubscribePacket).MessageID))
				_, _ = io.Copy(io.Discard, c)
			}, nil)
			r.bootAndConnect()
			ctx, cancel := context.WithCancel(context.Background())
			subscribed := make(chan error, 1)
			go func() { subscribed <- r.agent.Subscribe(ctx, "cmd/dev-1", 1, func(string, []byte) {}) }()
			lost := r.next(device.EventLost)
			cancel() // paho leaves the SUBSCRIBE's token pending on a lost connection
			<-subscribed
			assert.ErrorIs(t, lost.Err, device.ErrProtocol)
			assert.ErrorContains(t, lost.Err, tc.want)
			r.advanceWait()
			r.next(device.EventConnected)
		})
	}
}

// A SUBACK 0x80 is the broker refusing the subscription: Subscribe says so.
func TestARefusedSubscriptionIsAnError(t *testing.T) {
	r := newHostileRig(t, func(n int, c net.Conn) { answerSubscribes(c, 0x80) }, nil)
	r.bootAndConnect()
	err := r.agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(string, []byte) {})
	assert.ErrorIs(t, err, device.ErrSubscriptionRefused)
	assert.True(t, r.agent.Connected(), "a refused subscription is no protocol error")
}
