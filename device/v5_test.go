//go:build !nomqtt5

package device_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	packets5 "github.com/eclipse/paho.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/testbroker"
)

func init() {
	protocolsBuilt = append(protocolsBuilt, device.MQTT5)
	floodingBrokers[device.MQTT5] = floodingBroker5
	aheadOfInbox[device.MQTT5] = func(queue, bytes int) int {
		return max(1, min(queue, bytes/device.DefaultMaxIncomingPacket)) // Receive Maximum
	}
}

// floodingBroker5 is floodingBroker speaking MQTT 5.
func floodingBroker5(flood, size int, written *atomic.Int64) device.DialFunc {
	return v5Broker(func(_ int, c net.Conn, _ *packets5.Connect) {
		if connack5(c, 0, nil) != nil {
			return
		}
		p, err := packets5.ReadPacket(c)
		if err != nil {
			return
		}
		ack := packets5.NewControlPacket(packets5.SUBACK)
		sa := ack.Content.(*packets5.Suback)
		sa.PacketID, sa.Reasons = p.Content.(*packets5.Subscribe).PacketID, []byte{0}
		if _, err := ack.WriteTo(c); err != nil {
			return
		}
		go func() { // the device's PINGREQs and the like, read and dropped
			for {
				if _, err := packets5.ReadPacket(c); err != nil {
					return
				}
			}
		}()
		for k := range flood {
			pub := packets5.NewControlPacket(packets5.PUBLISH)
			pb := pub.Content.(*packets5.Publish)
			pb.Topic, pb.Payload = "cmd/dev-1", bytes.Repeat([]byte{byte(k)}, size)
			binaryIndex(pb.Payload, k)
			if _, err := pub.WriteTo(c); err != nil {
				return
			}
			written.Add(1)
		}
	})
}

func mqtt5(c *device.Config) { c.Protocol = device.MQTT5 }

// firstWait is the wait before the second attempt, after the first met
// the broker's refusal with code; ignore makes the agent deaf to server
// signals, with the same random draws.
func firstWait(t *testing.T, code testbroker.ConnackCode, ignore bool) (device.Event, time.Duration) {
	t.Helper()
	r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
		mqtt5(c)
		c.Timing.IgnoreServerSignals = ignore
	})
	require.NoError(t, r.broker.Faults().Refuse(code, "dev-1"))
	r.advanceWait()
	failed := r.next(device.EventAttemptFailed)
	if failed.Code == device.NoConnack {
		return failed, 0
	}
	return failed, r.next(device.EventBackingOff).Delay
}

// What each MQTT 5 CONNACK code does to the next wait, against the test
// broker: the policy's first retry waits 1 s + U[0, 1 s).
func TestMQTT5ConnackCodesShapeTheWaitNeverShortenIt(t *testing.T) {
	t.Run("back-pressure stretches the policy's wait", func(t *testing.T) {
		for _, code := range []testbroker.ConnackCode{0x89, 0x97, 0x9F} {
			failed, stretched := firstWait(t, code, false)
			_, plain := firstWait(t, code, true)
			assert.Equal(t, int(code), failed.Code)
			var ce *device.ConnackError
			require.ErrorAs(t, failed.Err, &ce)
			assert.Equal(t, int(code), ce.Code)
			assert.GreaterOrEqual(t, plain, time.Second)
			assert.Less(t, plain, 2*time.Second, "deaf to the code, the policy's wait")
			assert.Greater(t, stretched, plain, "%#x: the same draw, stretched", code)
			assert.Less(t, stretched, 2*plain, "%#x: by less than itself", code)
		}
	})
	t.Run("credentials are retried at the cap", func(t *testing.T) {
		for _, code := range []testbroker.ConnackCode{0x86, 0x87, 0x8A, 0x8C} {
			_, w := firstWait(t, code, false)
			assert.GreaterOrEqual(t, w, 32*time.Second, "%#x", code)
		}
	})
	t.Run("server unavailable and shutting down are plain failures", func(t *testing.T) {
		for _, code := range []testbroker.ConnackCode{0x80, 0x88} {
			_, w := firstWait(t, code, false)
			assert.GreaterOrEqual(t, w, time.Second, "%#x", code)
			assert.Less(t, w, 2*time.Second, "%#x", code)
		}
	})
	t.Run("an invalid client identifier stops for good", func(t *testing.T) {
		r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, mqtt5)
		require.NoError(t, r.broker.Faults().Refuse(0x85, "dev-1"))
		r.advanceWait()
		e := r.next(device.EventGaveUp)
		assert.ErrorIs(t, e.Err, device.ErrRefused)
		var ce *device.ConnackError
		require.ErrorAs(t, e.Err, &ce)
		assert.Equal(t, 0x85, ce.Code)
		assert.Contains(t, e.Err.Error(), "client identifier not valid")
	})
	t.Run("a code MQTT 5 does not define is a protocol error", func(t *testing.T) {
		failed, _ := firstWait(t, 0x92, false)
		var pe *device.ProtocolError
		require.ErrorAs(t, failed.Err, &pe)
		assert.Equal(t, device.MQTT5, pe.Protocol)
		assert.EqualError(t, failed.Err, "device: the broker broke MQTT 5 (packet type 2): CONNACK reason code 146 (0x92), unknown to MQTT 5")
	})
}

// A broker that ends sessions with a DISCONNECT and a reason code: a
// back-pressure code stretches the wait, server shutting down is a loss
// like any other, and a code MQTT 5 does not define for it is a protocol
// error.
func TestMQTT5DisconnectCodesShapeTheWait(t *testing.T) {
	drained := func(code byte, ignore bool) (device.Event, time.Duration) {
		r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			mqtt5(c)
			c.Timing.IgnoreServerSignals = ignore
		})
		r.bootAndConnect()
		r.clock.Advance(2 * time.Minute) // stable: the next wait is wait_0
		require.Equal(t, 1, r.broker.Faults().Drain(code, ""))
		return r.next(device.EventLost), r.next(device.EventBackingOff).Delay
	}
	lost, stretched := drained(0x89, false)
	_, plain := drained(0x89, true)
	var de *device.DisconnectError
	require.ErrorAs(t, lost.Err, &de)
	assert.Equal(t, 0x89, de.Code)
	assert.Equal(t, "DISCONNECT 0x89 (server busy): drained", lost.Err.Error())
	assert.Greater(t, stretched, plain)
	assert.Less(t, stretched, 2*plain)

	lost, w := drained(0x8B, false)
	require.ErrorAs(t, lost.Err, &de)
	assert.Equal(t, 0x8B, de.Code)
	assert.GreaterOrEqual(t, w, time.Second)
	assert.Less(t, w, 2*time.Second, "server shutting down: the policy's spread")

	lost, _ = drained(0x92, false)
	var pe *device.ProtocolError
	require.ErrorAs(t, lost.Err, &pe)
	assert.Equal(t, byte(14), pe.Type)
}

// nodes routes each host to its own in-memory test broker.
type nodes map[string]*testbroker.Broker

func (n nodes) dial(ctx context.Context, u *url.URL) (net.Conn, error) {
	b, ok := n[u.Hostname()]
	if !ok {
		return nil, errors.New("no such host")
	}
	return b.DialContext(ctx, u)
}

// newNodes starts a test broker for each host.
func newNodes(t *testing.T, hosts ...string) nodes {
	n := nodes{}
	for _, h := range hosts {
		b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		n[h] = b
	}
	return n
}

// A broker's Server Reference is followed only where the Config allows,
// keeping the endpoint's scheme, on the policy's wait, and only so many
// times in a row: a hostile broker cannot steer the device anywhere else
// or keep it hopping.
func TestMQTT5RedirectsGoOnlyWhereAllowed(t *testing.T) {
	rigFor := func(t *testing.T, n nodes) *rig {
		return newRig(t, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			mqtt5(c)
			c.Broker, c.Dial, c.Redirects.Domains = "tcp://a.fleet.test:1883", n.dial, []string{"fleet.test"}
		})
	}
	t.Run("to an allowed node, after the policy's wait", func(t *testing.T) {
		n := newNodes(t, "a.fleet.test", "b.fleet.test")
		require.NoError(t, n["a.fleet.test"].Faults().RefuseTo(device.CodeUseAnotherServer, "b.fleet.test:1883", "dev-1"))
		r := rigFor(t, n)
		r.advanceWait()
		assert.Equal(t, 0x9C, r.next(device.EventAttemptFailed).Code)
		assert.Equal(t, "tcp://b.fleet.test:1883", r.next(device.EventRedirected).Endpoint)
		assert.GreaterOrEqual(t, r.advanceWait(), time.Second, "never at once")
		assert.Equal(t, "tcp://b.fleet.test:1883", r.next(device.EventConnected).Endpoint)
		assert.Equal(t, 1, n["b.fleet.test"].Recorder().Counts().Accepted)
	})
	t.Run("nowhere else", func(t *testing.T) {
		for ref, why := range map[string]string{
			"evil.example:1883":       "not a host of Broker or Failover, nor under Redirects.Domains",
			"fleet.test.evil.example": "not a host of Broker or Failover, nor under Redirects.Domains",
			"10.0.0.1:1883":           "not a host name of letters, digits and hyphens, nor a host of Broker or Failover",
			// a zoned IPv6 literal whose zone ends in an allowed domain
			"[::ffff:127.0.0.1%25x.fleet.test]:1883": "not a host name of letters, digits and hyphens",
			"[::ffff:127.0.0.1%x.fleet.test]:1883":   "not a host name of letters, digits and hyphens",
			"[::1]:1883":                             "not a host name of letters, digits and hyphens",
			"b_x.fleet.test":                         "not a host name of letters, digits and hyphens",
			"-b.fleet.test":                          "not a host name of letters, digits and hyphens",
			"b.fleet.test%2f":                        "not a host name of letters, digits and hyphens",
			"b.fleet.test:22":                        "port 22 is not an endpoint's",
			"b.fleet.test:01883":                     "port 01883 is not an endpoint's",
			"b.fleet.test:":                          "not a host, host:port or URL",
			"b.fleet.test\\@evil.example":            "not a host, host:port or URL",
			"ssl://b.fleet.test:8883":                "a redirect must not change the transport's security",
			"u:pw@b.fleet.test:1883":                 "not a host, host:port or URL",
			"b.fleet.test:1883/x?y=z":                "not a host, host:port or URL",
			"":                                       "the broker named no server",
		} {
			n := newNodes(t, "a.fleet.test", "b.fleet.test")
			require.NoError(t, n["a.fleet.test"].Faults().RefuseTo(device.CodeServerMoved, ref, "dev-1"))
			r := rigFor(t, n)
			r.advanceWait()
			e := r.next(device.EventRedirectRefused)
			assert.ErrorContains(t, e.Err, why, ref)
			r.advanceWait()
			assert.Equal(t, "tcp://a.fleet.test:1883", r.next(device.EventConnecting).Endpoint, "%q: where it would have gone", ref)
			assert.Zero(t, n["b.fleet.test"].Recorder().Counts().Attempts)
		}
	})
	t.Run("what is dialled is what was checked", func(t *testing.T) {
		for ref, want := range map[string]string{
			"B.Fleet.Test.":                  "tcp://b.fleet.test:1883",
			"tcp://b.fleet.test:1883/":       "tcp://b.fleet.test:1883",
			"b.fleet.test:1883 evil.example": "tcp://b.fleet.test:1883",
		} {
			n := newNodes(t, "a.fleet.test", "b.fleet.test")
			require.NoError(t, n["a.fleet.test"].Faults().RefuseTo(device.CodeServerMoved, ref, "dev-1"))
			r := rigFor(t, n)
			r.advanceWait()
			assert.Equal(t, want, r.next(device.EventRedirected).Endpoint, ref)
			r.advanceWait()
			assert.Equal(t, want, r.next(device.EventConnected).Endpoint, ref)
		}
	})
	t.Run("at most Redirects.Max in a row", func(t *testing.T) {
		n := newNodes(t, "a.fleet.test", "b.fleet.test")
		require.NoError(t, n["a.fleet.test"].Faults().RefuseTo(device.CodeUseAnotherServer, "b.fleet.test", "dev-1"))
		require.NoError(t, n["b.fleet.test"].Faults().RefuseTo(device.CodeUseAnotherServer, "a.fleet.test", "dev-1"))
		r := rigFor(t, n)
		for range 3 {
			r.advanceWait()
			r.next(device.EventRedirected)
		}
		r.advanceWait()
		assert.ErrorContains(t, r.next(device.EventRedirectRefused).Err, "3 redirects in a row without a session")
	})
	t.Run("a node drains its sessions to another", func(t *testing.T) {
		n := newNodes(t, "a.fleet.test", "b.fleet.test")
		r := rigFor(t, n)
		r.bootAndConnect()
		require.Equal(t, 1, n["a.fleet.test"].Faults().Drain(device.CodeUseAnotherServer, "b.fleet.test"))
		var de *device.DisconnectError
		require.ErrorAs(t, r.next(device.EventLost).Err, &de)
		assert.Equal(t, "b.fleet.test", de.Reference)
		assert.Equal(t, "tcp://b.fleet.test:1883", r.next(device.EventRedirected).Endpoint, "the endpoint's port")
		assert.GreaterOrEqual(t, r.advanceWait(), time.Second)
		assert.Equal(t, "tcp://b.fleet.test:1883", r.next(device.EventConnected).Endpoint)
	})
}

// awaitEvent is the next event of kind, within a span of (virtual) time.
func awaitEvent(t *testing.T, events <-chan device.Event, kind device.EventKind, within time.Duration) device.Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within %s", kind, within)
		}
	}
}

// v5Broker answers each connection the agent dials with script, after
// reading its CONNECT.
func v5Broker(script func(n int, c net.Conn, connect *packets5.Connect)) device.DialFunc {
	n := 0
	return func(context.Context, *url.URL) (net.Conn, error) {
		n++
		dev, brk := net.Pipe()
		go func(n int) {
			defer brk.Close()
			p, err := packets5.ReadPacket(brk)
			if err != nil {
				return
			}
			script(n, brk, p.Content.(*packets5.Connect))
		}(n)
		return dev, nil
	}
}

// connack5 writes an MQTT 5 CONNACK.
func connack5(c net.Conn, code byte, props *packets5.Properties) error {
	p := packets5.NewControlPacket(packets5.CONNACK)
	ca := p.Content.(*packets5.Connack)
	ca.ReasonCode, ca.Properties = code, props
	_, err := p.WriteTo(c)
	return err
}

// The agent tells an MQTT 5 broker its limits: Maximum Packet Size (its
// incoming bound, fixed header included), Receive Maximum (its incoming
// queue), and a persistent session's expiry. It honours the broker's
// Server Keep Alive: pings at the broker's interval, not its own, and a
// PINGRESP that does not come within PingTimeout ends the session.
func TestMQTT5AgentSendsItsLimitsAndHonoursServerKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		connects := make(chan *packets5.Connect, 1)
		pings := make(chan time.Time, 10)
		var up time.Time
		dial := v5Broker(func(n int, c net.Conn, cp *packets5.Connect) {
			if n > 1 {
				_, _ = io.Copy(io.Discard, c)
				return
			}
			connects <- cp
			ka := uint16(4)
			up = time.Now()
			if connack5(c, 0, &packets5.Properties{ServerKeepAlive: &ka}) != nil {
				return
			}
			for {
				p, err := packets5.ReadPacket(c)
				if err != nil {
					return
				}
				if p.Type == packets5.PINGREQ {
					pings <- time.Now() // never answered
				}
			}
		})
		tm := device.DefaultTiming()
		tm.BootSpread = time.Millisecond
		events := make(chan device.Event, 100)
		agent, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "dev-1", Protocol: device.MQTT5, Dial: dial,
			Timing: &tm, Source: rand.NewPCG(1, 1), Incoming: device.IncomingLimits{MaxPacket: 4096, Queue: 7}, Session: device.Session{Persistent: true},
			KeepAlive: time.Minute, PingTimeout: 3 * time.Second, OnEvent: func(e device.Event) { events <- e }})
		require.NoError(t, err)
		require.NoError(t, agent.Start(context.Background()))
		cp := <-connects
		require.NotNil(t, cp.Properties)
		assert.Equal(t, uint32(4096+5), *cp.Properties.MaximumPacketSize)
		assert.Equal(t, uint16(7), *cp.Properties.ReceiveMaximum)
		assert.Equal(t, uint32(24*3600), *cp.Properties.SessionExpiryInterval)
		assert.Equal(t, uint16(60), cp.KeepAlive)
		assert.False(t, cp.CleanStart)

		ping := <-pings
		assert.Equal(t, 4*time.Second, ping.Sub(up), "the broker's keepalive, not the agent's minute")
		var lost device.Event
		for lost.Kind != device.EventLost {
			lost = <-events
		}
		assert.Equal(t, 3*time.Second, lost.Time.Sub(ping), "PingTimeout")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, agent.Stop(ctx))
	})
}

// A broker cannot switch the device's keepalive off: a Server Keep Alive
// of 0 (none), or of 65,535 s, leaves the device pinging at its own
// keepalive, so a silent path is noticed within keepalive + PingTimeout
// whatever the CONNACK said. Virtual time: the instants are exact.
func TestMQTT5ServerKeepAliveCannotTurnPingsOff(t *testing.T) {
	for _, ka := range []uint16{0, 65535} {
		t.Run(fmt.Sprint(ka), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pings := make(chan time.Time, 10)
				var up time.Time
				dial := v5Broker(func(n int, c net.Conn, _ *packets5.Connect) {
					if n > 1 {
						_, _ = io.Copy(io.Discard, c)
						return
					}
					up = time.Now()
					if connack5(c, 0, &packets5.Properties{ServerKeepAlive: &ka}) != nil {
						return
					}
					for { // silent: no PINGRESP
						p, err := packets5.ReadPacket(c)
						if err != nil {
							return
						}
						if p.Type == packets5.PINGREQ {
							pings <- time.Now()
						}
					}
				})
				tm := device.DefaultTiming()
				tm.BootSpread = time.Millisecond
				events := make(chan device.Event, 100)
				agent, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "dev-1", Protocol: device.MQTT5, Dial: dial,
					Timing: &tm, Source: rand.NewPCG(1, 1), KeepAlive: 2 * time.Second, PingTimeout: time.Second,
					OnEvent: func(e device.Event) { events <- e }})
				require.NoError(t, err)
				require.NoError(t, agent.Start(context.Background()))
				lost := awaitEvent(t, events, device.EventLost, time.Minute)
				require.Len(t, pings, 1)
				assert.Equal(t, 2*time.Second, (<-pings).Sub(up), "a ping at the device's keepalive")
				assert.Equal(t, 3*time.Second, lost.Time.Sub(up), "the silent path noticed at keepalive + PingTimeout")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, agent.Stop(ctx))
			})
		})
	}
}

// A CONNACK that MQTT 5 forbids, or with which no session could work, is a
// protocol error, never a session: a property length in five bytes
// (hiding a Server Keep Alive of 0 from a reader that stops at four), a
// Receive Maximum of 0, a Maximum Packet Size of 1. The attempt counts as
// a protocol error and the next waits the policy's delay.
func TestMQTT5ForbiddenCONNACKValuesAreProtocolErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		connack []byte
		want    string
	}{
		"a property length in five bytes": {[]byte{0x20, 10, 0, 0, 0x83, 0x80, 0x80, 0x80, 0x00, 0x13, 0, 0},
			"property length is malformed"},
		"Receive Maximum 0":     {[]byte{0x20, 6, 0, 0, 3, 0x21, 0, 0}, "Receive Maximum of 0"},
		"Maximum Packet Size 1": {[]byte{0x20, 8, 0, 0, 5, 0x27, 0, 0, 0, 1}, "Maximum Packet Size of 1"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dial := v5Broker(func(_ int, c net.Conn, _ *packets5.Connect) {
					if _, err := c.Write(tc.connack); err == nil {
						_, _ = io.Copy(io.Discard, c)
					}
				})
				tm := device.DefaultTiming()
				tm.BootSpread = time.Millisecond
				events := make(chan device.Event, 100)
				m := &counts{outcomes: map[device.AttemptOutcome]int{}}
				agent, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "dev-1", Protocol: device.MQTT5, Dial: dial,
					Timing: &tm, Source: rand.NewPCG(1, 1), Metrics: m, OnEvent: func(e device.Event) { events <- e }})
				require.NoError(t, err)
				require.NoError(t, agent.Start(context.Background()))
				for range 2 {
					f := awaitEvent(t, events, device.EventAttemptFailed, time.Minute)
					assert.ErrorIs(t, f.Err, device.ErrProtocol)
					assert.ErrorContains(t, f.Err, tc.want)
					assert.GreaterOrEqual(t, awaitEvent(t, events, device.EventBackingOff, time.Minute).Delay, time.Second,
						"the policy's wait")
				}
				assert.Zero(t, agent.Stats().Connects, "never a session")
				m.mu.Lock()
				assert.Equal(t, 2, m.outcomes[device.AttemptProtocolError])
				m.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, agent.Stop(ctx))
			})
		})
	}
}

// What MQTT 5 does not define is a protocol error, never a session or a
// subscription: a SUBACK code, a DISCONNECT code. The session ends, and the
// agent reconnects on the policy's schedule.
func TestMQTT5UnknownCodesAreProtocolErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		answer func(c net.Conn, id uint16) error
		want   string
	}{
		"a SUBACK code": {func(c net.Conn, id uint16) error {
			p := packets5.NewControlPacket(packets5.SUBACK)
			sa := p.Content.(*packets5.Suback)
			sa.PacketID, sa.Reasons = id, []byte{0x05}
			_, err := p.WriteTo(c)
			return err
		}, "SUBACK reason code 5 (0x5), unknown to MQTT 5"},
		"a DISCONNECT code": {func(c net.Conn, _ uint16) error {
			p := packets5.NewControlPacket(packets5.DISCONNECT)
			// a CONNACK's code, not a DISCONNECT's
			p.Content.(*packets5.Disconnect).ReasonCode = 0x84
			_, err := p.WriteTo(c)
			return err
		}, "DISCONNECT reason code 132 (0x84), unknown to MQTT 5"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dial := v5Broker(func(n int, c net.Conn, _ *packets5.Connect) {
					if connack5(c, 0, nil) != nil {
						return
					}
					for {
						p, err := packets5.ReadPacket(c)
						if err != nil {
							return
						}
						if s, ok := p.Content.(*packets5.Subscribe); ok && n == 1 {
							if tc.answer(c, s.PacketID) != nil {
								return
							}
						}
					}
				})
				tm := device.DefaultTiming()
				tm.BootSpread = time.Millisecond
				events := make(chan device.Event, 100)
				agent, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "dev-1", Protocol: device.MQTT5, Dial: dial,
					Timing: &tm, Source: rand.NewPCG(1, 1), OnEvent: func(e device.Event) { events <- e }})
				require.NoError(t, err)
				require.NoError(t, agent.Start(context.Background()))
				require.NoError(t, agent.AwaitConnection(context.Background()))
				err = agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(string, []byte) {})
				if name == "a SUBACK code" {
					assert.ErrorIs(t, err, device.ErrProtocol)
				}
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
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, agent.Stop(ctx))
			})
		})
	}
}

// On MQTT 5 the broker is told the device's Maximum Packet Size, and keeps
// to it: a message over it is not sent (the broker drops it), where on
// 3.1.1 the device would have to close the connection. The session stays,
// and the next message that fits arrives.
func TestMQTT5BrokerKeepsToTheDevicesMaximumPacketSize(t *testing.T) {
	r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
		mqtt5(c)
		c.Incoming.MaxPacket = 1024
	})
	r.bootAndConnect()
	got := make(chan []byte, 4)
	require.NoError(t, r.agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(_ string, p []byte) { got <- p }))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	require.NoError(t, r.agent.Publish(ctx, "cmd/dev-1", 1, false, make([]byte, 2048)))
	require.NoError(t, r.agent.Publish(ctx, "cmd/dev-1", 1, false, []byte("fits")))
	select {
	case p := <-got:
		assert.Equal(t, "fits", string(p), "the one over the limit was never sent")
	case <-time.After(bound):
		t.Fatal("the message that fits never arrived")
	}
	assert.True(t, r.agent.Connected())
	assert.Zero(t, r.broker.Recorder().Counts().Disconnects)
}

// The test broker's limits answer each protocol in its own words: over its
// admission limit, or busy, an MQTT 5 device reads the reason code (0x9F by
// default) and a 3.1.1 device CONNACK 3.
func TestTheTestBrokersLimitsAnswerInEachProtocolsWords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto device.Protocol
		limit func(b *testbroker.Broker) error
		want  int
	}{
		{"admission, v5", device.MQTT5, func(b *testbroker.Broker) error {
			return b.Faults().SetAdmission(fault.Admission{Rate: 0.001, Burst: 1})
		}, 0x9F},
		{"admission with quota exceeded, v5", device.MQTT5, func(b *testbroker.Broker) error {
			return b.Faults().SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Code: fault.CodeQuotaExceeded})
		}, 0x97},
		{"admission, 3.1.1", device.MQTT311, func(b *testbroker.Broker) error {
			return b.Faults().SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Code: fault.CodeQuotaExceeded})
		}, 3},
		{"busy, v5", device.MQTT5, func(b *testbroker.Broker) error { return b.Faults().BeginBusy(fault.CodeServerBusy) }, 0x89},
		{"busy, 3.1.1", device.MQTT311, func(b *testbroker.Broker) error { return b.Faults().BeginBusy(fault.CodeServerBusy) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigP(t, tc.proto, testbroker.Config{Transport: testbroker.Memory}, nil)
			r.bootAndConnect()
			require.NoError(t, tc.limit(r.broker))
			require.Equal(t, 1, r.broker.Faults().DropAll())
			r.next(device.EventLost)
			r.advanceWait()
			// a new limit's bucket is full: its burst first
			if strings.HasPrefix(tc.name, "admission") {
				r.next(device.EventConnected)
				require.Equal(t, 1, r.broker.Faults().DropAll())
				r.next(device.EventLost)
				r.advanceWait()
			}
			assert.Equal(t, tc.want, r.next(device.EventAttemptFailed).Code)
		})
	}
}
