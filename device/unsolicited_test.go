package device_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
)

// rawBroker is a broker that speaks the few packets these tests need,
// byte by byte, in MQTT 3.1.1 or 5 (the same frames, and a properties
// length where MQTT 5 has one). It answers the CONNECT with a CONNACK 0
// and each SUBSCRIBE with a SUBACK granting grant(requested QoS), then runs
// script once the first SUBACK is out. PUBACKs counts what the device
// acknowledged.
type rawBroker struct {
	v5      bool
	grant   func(topic string, qos byte) byte
	script  func(b *rawBroker, c net.Conn)
	pubacks atomic.Int64
	acked   chan struct{} // a PUBACK came (if made)
}

func (b *rawBroker) dial(context.Context, *url.URL) (net.Conn, error) {
	dev, brk := net.Pipe()
	go b.serve(brk)
	return dev, nil
}

func (b *rawBroker) serve(c net.Conn) {
	defer c.Close()
	if _, _, err := readFrame(c); err != nil { // CONNECT
		return
	}
	connack := []byte{0x20, 2, 0, 0}
	if b.v5 {
		connack = []byte{0x20, 3, 0, 0, 0}
	}
	if _, err := c.Write(connack); err != nil {
		return
	}
	subscribed, gone := make(chan struct{}), make(chan struct{})
	defer func() { <-gone }() // the connection stays until the device leaves
	go func() {               // the device's packets: SUBSCRIBEs answered, PUBACKs counted
		defer close(gone)
		first := true
		for {
			typ, body, err := readFrame(c)
			if err != nil {
				return
			}
			switch typ {
			case 4:
				b.pubacks.Add(1)
				if b.acked != nil {
					b.acked <- struct{}{}
				}
			case 12: // PINGREQ
				if _, err := c.Write([]byte{0xd0, 0}); err != nil {
					return
				}
			case 8:
				if _, err := c.Write(b.suback(body)); err != nil {
					return
				}
				if first {
					first = false
					close(subscribed)
				}
			}
		}
	}()
	select {
	case <-subscribed:
		b.script(b, c)
	case <-time.After(time.Minute):
	}
}

// suback answers a SUBSCRIBE of one topic.
func (b *rawBroker) suback(body []byte) []byte {
	id, rest := body[:2], body[2:]
	if b.v5 {
		n, size := uvarint(rest)
		rest = rest[size+n:]
	}
	tlen := int(binary.BigEndian.Uint16(rest))
	topic, qos := string(rest[2:2+tlen]), rest[2+tlen]&3
	code := b.grant(topic, qos)
	if b.v5 {
		return []byte{0x90, 4, id[0], id[1], 0, code}
	}
	return []byte{0x90, 3, id[0], id[1], code}
}

// publish is a PUBLISH frame with packet ID id (if qos > 0).
func (b *rawBroker) publish(topic string, qos byte, id uint16, payload []byte) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint16(body, uint16(len(topic)))
	body = append(body, topic...)
	if qos > 0 {
		body = binary.BigEndian.AppendUint16(body, id)
	}
	if b.v5 {
		body = append(body, 0)
	}
	return append(header(0x30|qos<<1, len(body)+len(payload)), append(body, payload...)...)
}

// readFrame reads one MQTT packet: its type and body.
func readFrame(r io.Reader) (typ byte, body []byte, err error) {
	var first, h [1]byte
	if _, err := io.ReadFull(r, first[:]); err != nil {
		return 0, nil, err
	}
	n, shift := 0, 0
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, nil, err
		}
		n |= int(h[0]&0x7f) << shift
		shift += 7
		if h[0]&0x80 == 0 {
			break
		}
	}
	body = make([]byte, n)
	_, err = io.ReadFull(r, body)
	return first[0] >> 4, body, err
}

func uvarint(b []byte) (n, size int) {
	for i, d := range b {
		n |= int(d&0x7f) << (7 * i)
		if d&0x80 == 0 {
			return n, i + 1
		}
	}
	return n, len(b)
}

// liveHeap keeps the largest live heap it measured: the bytes of heap
// objects just after a collection, which no host's speed moves.
type liveHeap struct{ peak uint64 }

func (h *liveHeap) measure() {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h.peak = max(h.peak, m.HeapAlloc)
}

// A broker sends QoS 1 messages of 250 kB on a topic the device never
// subscribed to, as fast as the device reads them. paho v1.5.1 keeps each
// one it has no route for, unacknowledged, for the session's life: 2.5 GB
// in three seconds of a flood of 8,000. paho.golang keeps each until its
// acknowledgement goes out on a 50 ms ticker. The agent acknowledges each
// and drops it, and counts it; the session stays up and the live heap,
// measured every 50 messages, stays under 16 MiB from the first message to
// the last: the queue and the few packets on their way. On MQTT 5 the broker
// must keep to the device's Receive Maximum (4 here): one that does not is
// a protocol error at the fifth message in flight.
func TestUnsolicitedMessagesAreAcknowledgedAndDropped(t *testing.T) {
	const size = 250_000
	flood := 1000 // 250 MB: what paho alone would keep
	if raceDetector || runtime.GOARCH == "arm" {
		flood = 300 // 75 MB, still over the bound
	}
	for _, tc := range []struct {
		proto  device.Protocol
		window int // the broker's messages in flight at most; 0 for no bound
		broken string
	}{
		{device.MQTT311, 0, ""},
		{device.MQTT5, 4, ""},
		{device.MQTT5, 0, "more than the Receive Maximum of 4 QoS 1 PUBLISHes unacknowledged"},
	} {
		if !slices.Contains(protocolsBuilt, tc.proto) {
			continue
		}
		t.Run(fmt.Sprintf("mqtt%s/window%d", tc.proto, tc.window), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var written atomic.Int64
				var live liveHeap
				sent := make(chan struct{})
				b := &rawBroker{v5: tc.proto == device.MQTT5, grant: func(_ string, q byte) byte { return q },
					acked: make(chan struct{}, flood),
					script: func(b *rawBroker, c net.Conn) {
						defer close(sent)
						payload := make([]byte, size)
						for k := range flood {
							for tc.window > 0 && written.Load()-b.pubacks.Load() >= int64(tc.window) {
								<-b.acked
							}
							if _, err := c.Write(b.publish("not/subscribed", 1, uint16(1+k%65535), payload)); err != nil {
								return
							}
							written.Add(1)
							if k%50 == 0 {
								live.measure()
							}
						}
					}}
				tm := device.DefaultTiming()
				tm.BootSpread = time.Millisecond
				lost := make(chan error, 1)
				agent, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "dev-1", Protocol: tc.proto, Dial: b.dial,
					Timing: &tm, Source: rand.NewPCG(1, 1), OnEvent: func(e device.Event) {
						if e.Kind == device.EventLost {
							select {
							case lost <- e.Err:
							default:
							}
						}
					}})
				require.NoError(t, err)
				got := make(chan string, 1)
				require.NoError(t, agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(topic string, _ []byte) { got <- topic }))
				runtime.GC()
				require.NoError(t, agent.Start(context.Background()))
				require.NoError(t, agent.AwaitConnection(context.Background()))
				if tc.broken != "" {
					err := <-lost
					assert.ErrorIs(t, err, device.ErrProtocol)
					assert.ErrorContains(t, err, tc.broken)
					assert.LessOrEqual(t, written.Load(), int64(tc.window+5), "the fifth in flight ended it")
				} else {
					<-sent
					// paho.golang sends its acknowledgements on a ticker
					time.Sleep(time.Second)
					synctest.Wait()
					assert.Equal(t, int64(flood), written.Load(), "the agent read every message")
					assert.Equal(t, int64(flood), b.pubacks.Load(), "and acknowledged each")
					st := agent.Stats()
					assert.Equal(t, int64(flood), st.Unsolicited, "and counted each")
					assert.Zero(t, st.Losses)
					assert.True(t, agent.Connected(), "the session is up")
				}
				assert.Empty(t, got, "no handler saw them")
				t.Logf("live heap at most %.1f MiB over %d messages of %d bytes", float64(live.peak)/(1<<20), written.Load(), size)
				assert.Less(t, live.peak, uint64(16<<20), "the live heap")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, agent.Stop(ctx))
			})
		})
	}
}

// A broker sends at most the QoS it granted, and the device never
// subscribes at QoS 2. A PUBLISH above what its subscriptions were granted
// is a protocol error, refused before the client keeps it (paho v1.5.1
// would hold a QoS 2 one until a PUBREL that never comes): the session
// ends, the handler never sees it, and the next attempt waits the
// policy's delay. The bound is each topic's: a QoS 1 subscription
// elsewhere does not let a QoS 1 message through on a QoS 0 one.
func TestAPublishAboveTheGrantedQoSIsAProtocolError(t *testing.T) {
	for name, tc := range map[string]struct {
		subs  map[string]byte // topic: QoS asked
		grant byte            // the SUBACK's code for "low" (the others get what they asked)
		topic string
		qos   byte
		want  string
	}{
		"QoS 2 to a QoS 1 subscription": {map[string]byte{"cmd/dev-1": 1}, 1, "cmd/dev-1", 2,
			"a PUBLISH at QoS 2, above the QoS 1 the device's subscriptions were granted"},
		"QoS 2 where nothing was subscribed": {map[string]byte{"cmd/dev-1": 1}, 1, "not/subscribed", 2,
			"a PUBLISH at QoS 2, above the QoS 1 the device's subscriptions were granted"},
		"QoS 1 to a QoS 0 subscription": {map[string]byte{"cmd/dev-1": 1, "low": 0}, 0, "low", 1,
			`a PUBLISH at QoS 1 on "low", whose subscription was granted QoS 0`},
		"QoS 1 where the broker granted 0": {map[string]byte{"cmd/dev-1": 1, "low": 1}, 0, "low", 1,
			`a PUBLISH at QoS 1 on "low", whose subscription was granted QoS 0`},
	} {
		t.Run(name, func(t *testing.T) {
			bothProtocols(t, func(t *testing.T, proto device.Protocol) {
				synctest.Test(t, func(t *testing.T) {
					subscribed := make(chan struct{}, 4)
					b := &rawBroker{v5: proto == device.MQTT5,
						grant: func(topic string, q byte) byte {
							subscribed <- struct{}{}
							if topic == "low" {
								return tc.grant
							}
							return q
						},
						script: func(b *rawBroker, c net.Conn) {
							for range tc.subs {
								<-subscribed
							}
							synctest.Wait() // the SUBACKs read
							_, _ = c.Write(b.publish(tc.topic, tc.qos, 7, []byte("x")))
							_, _ = io.Copy(io.Discard, c)
						}}
					tm := device.DefaultTiming()
					tm.BootSpread = time.Millisecond
					events := make(chan device.Event, 100)
					agent, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "dev-1", Protocol: proto, Dial: b.dial,
						Timing: &tm, Source: rand.NewPCG(1, 1), OnEvent: func(e device.Event) { events <- e }})
					require.NoError(t, err)
					var handled atomic.Int64
					for topic, q := range tc.subs {
						require.NoError(t, agent.Subscribe(context.Background(), topic, q, func(string, []byte) { handled.Add(1) }))
					}
					require.NoError(t, agent.Start(context.Background()))
					var lost device.Event
					for lost.Kind != device.EventLost {
						lost = <-events
					}
					assert.ErrorIs(t, lost.Err, device.ErrProtocol)
					assert.ErrorContains(t, lost.Err, tc.want)
					var backoff device.Event
					for backoff.Kind != device.EventBackingOff {
						backoff = <-events
					}
					assert.GreaterOrEqual(t, backoff.Delay, time.Second, "the policy's wait")
					assert.Zero(t, handled.Load(), "no handler saw it")
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					require.NoError(t, agent.Stop(ctx))
				})
			})
		})
	}
}
