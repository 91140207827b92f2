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
// CONNACK 0, and a SUBACK for each SUBSCRIBE.
func quiet(c net.Conn) {
	if connack(c) != nil {
		return
	}
	for {
		p, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		if sub, ok := p.(*packets.SubscribePacket); ok {
			ack := packets.NewControlPacket(packets.Suback).(*packets.SubackPacket)
			ack.MessageID, ack.ReturnCodes = sub.MessageID, make([]byte, len(sub.Topics))
			if ack.Write(c) != nil {
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
	}, func(c *device.Config) { c.MaxIncomingPacket = limit })
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
		_, err := device.New(device.Config{Broker: "tcp://127.0.0.1:1883", ClientID: "x", MaxIncomingPacket: n})
		assert.Error(t, err, n)
	}
}
