package device_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

const bound = 10 * time.Second

// rig is one agent against one test broker, on a fake clock.
type rig struct {
	t      *testing.T
	broker *testbroker.Broker
	clock  *fakeclock.Clock
	agent  *device.Agent
	events chan device.Event
}

// protocolsBuilt are the protocols this build speaks (v5_test.go adds
// MQTT 5 unless the nomqtt5 tag leaves it out).
var protocolsBuilt = []device.Protocol{device.MQTT311}

// bothProtocols runs f on MQTT 3.1.1 and on MQTT 5: what the agent
// promises holds on either.
func bothProtocols(t *testing.T, f func(t *testing.T, p device.Protocol)) {
	for _, p := range protocolsBuilt {
		t.Run("mqtt"+p.String(), func(t *testing.T) { f(t, p) })
	}
}

// newRigP is newRig speaking protocol p.
func newRigP(t *testing.T, p device.Protocol, bcfg testbroker.Config, mod func(*device.Config)) *rig {
	t.Helper()
	return newRig(t, bcfg, func(c *device.Config) {
		c.Protocol = p
		if mod != nil {
			mod(c)
		}
	})
}

func newRig(t *testing.T, bcfg testbroker.Config, mod func(*device.Config)) *rig {
	t.Helper()
	b, err := testbroker.New(bcfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	r := &rig{t: t, broker: b, clock: fakeclock.New(t0), events: make(chan device.Event, 1000)}
	tm := device.DefaultTiming()
	cfg := device.Config{
		Broker:   b.URL(),
		ClientID: "dev-1",
		Timing:   &tm,
		Clock:    r.clock,
		Source:   rand.NewPCG(1, 1),
		OnEvent:  func(e device.Event) { r.events <- e },
	}
	if b.Transport() == testbroker.Memory {
		cfg.Dial = b.DialContext
	}
	if b.Transport() == testbroker.TLS {
		cfg.TLS, err = b.ClientTLSConfig("dev-1")
		require.NoError(t, err)
	}
	if mod != nil {
		mod(&cfg)
	}
	r.start(cfg)
	return r
}

// start builds and starts the rig's agent, stopped when the test ends.
func (r *rig) start(cfg device.Config) {
	r.t.Helper()
	var err error
	r.agent, err = device.New(cfg)
	require.NoError(r.t, err)
	require.NoError(r.t, r.agent.Start(context.Background()))
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		require.NoError(r.t, r.agent.Stop(ctx))
	})
}

// next returns the next event of kind, skipping others.
func (r *rig) next(kind device.EventKind) device.Event {
	r.t.Helper()
	deadline := time.After(bound)
	var skipped []string
	for {
		select {
		case e := <-r.events:
			if e.Kind == kind {
				return e
			}
			skipped = append(skipped, fmt.Sprintf("%v(attempt %d, code %d, delay %v, err %v)", e.Kind, e.Attempt, e.Code, e.Delay, e.Err))
		case <-deadline:
			r.t.Fatalf("no %v event; saw %v; timers pending %v", kind, skipped, r.clock.Pending())
		}
	}
}

// advanceWait waits for the agent's next backoff and runs the clock through it.
func (r *rig) advanceWait() time.Duration {
	r.t.Helper()
	e := r.next(device.EventBackingOff)
	p, err := r.clock.WaitTimers(1, bound)
	require.NoError(r.t, err)
	require.Equal(r.t, e.Delay, p[0])
	r.clock.Advance(p[0])
	return e.Delay
}

func (r *rig) bootAndConnect() {
	r.t.Helper()
	r.advanceWait()
	r.next(device.EventConnected)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	require.NoError(r.t, r.agent.AwaitConnection(ctx))
}

func TestAgentConnectsAfterBootSpreadOverEveryTransport(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		for name, cfg := range map[string]testbroker.Config{
			"mem":  {Transport: testbroker.Memory},
			"tcp":  {},
			"tls":  {Transport: testbroker.TLS},
			"mtls": {Transport: testbroker.TLS, MutualTLS: true},
		} {
			t.Run(name, func(t *testing.T) {
				r := newRigP(t, proto, cfg, nil)
				boot := r.next(device.EventBackingOff)
				assert.Positive(t, boot.Delay)
				assert.Less(t, boot.Delay, 10*time.Second)
				assert.Zero(t, r.broker.Recorder().Counts().Attempts, "no attempt before the boot wait ends")
				_, err := r.clock.AdvanceToNext(bound)
				require.NoError(t, err)
				r.next(device.EventConnected)
				assert.True(t, r.agent.Connected())
				assert.Equal(t, 1, r.broker.Connected())
				s := r.agent.Stats()
				assert.Equal(t, int64(1), s.Connects)
				assert.Equal(t, int64(1), s.Attempts)
				assert.Equal(t, boot.Delay, s.Waiting)
			})
		}
	})
}

func TestFirstReconnectAfterDropIsNotBeforeOneSecond(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, nil)
		r.bootAndConnect()
		r.clock.Advance(2 * time.Minute) // stable
		require.Equal(t, 1, r.broker.Faults().DropAll())
		r.next(device.EventLost)
		e := r.next(device.EventBackingOff)
		assert.GreaterOrEqual(t, e.Delay, time.Second)
		assert.Less(t, e.Delay, 2*time.Second)
		w, err := r.clock.WaitTimers(1, bound)
		require.NoError(t, err)
		r.clock.Advance(w[0] - time.Millisecond)
		assert.Equal(t, 1, r.broker.Recorder().Counts().Attempts, "nothing before the wait ends")
		r.clock.Advance(time.Millisecond)
		r.next(device.EventConnected)
		assert.Equal(t, 2, r.broker.Recorder().Counts().Attempts)
	})
}

func TestFlappingBrokerMeetsGrowingWaitsOverTCP(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		r := newRigP(t, proto, testbroker.Config{}, nil)
		r.bootAndConnect()
		require.NoError(t, r.broker.Faults().SetFlapping(20*time.Millisecond))
		require.Equal(t, 1, r.broker.Faults().DropAll())
		var waits []time.Duration
		for i := 0; i < 5; i++ {
			r.next(device.EventLost)
			waits = append(waits, r.advanceWait())
			r.next(device.EventConnected)
		}
		for i, w := range waits {
			low := time.Duration(1<<i) * time.Second
			assert.GreaterOrEqual(t, w, low, "wait %d", i)
			assert.Less(t, w, low+time.Second, "wait %d", i)
		}
	})
}

func TestRefusalCodesAgainstBroker(t *testing.T) {
	t.Run("identifier rejected is permanent", func(t *testing.T) {
		r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, nil)
		require.NoError(t, r.broker.Faults().Refuse(testbroker.RefuseIdentifier, "dev-1"))
		r.advanceWait()
		f := r.next(device.EventAttemptFailed)
		var ce *device.ConnackError
		require.ErrorAs(t, f.Err, &ce, "the attempt's error names the code")
		assert.Equal(t, 2, ce.Code)
		e := r.next(device.EventGaveUp)
		assert.ErrorIs(t, e.Err, device.ErrRefused)
		<-r.agent.Done()
		assert.ErrorIs(t, r.agent.Err(), device.ErrRefused)
		require.ErrorAs(t, r.agent.Err(), &ce, "a caller can branch on the code that ended the session")
		assert.Equal(t, 2, ce.Code)
		assert.Contains(t, r.agent.Err().Error(), "CONNACK 2")
	})
	t.Run("server unavailable is retried", func(t *testing.T) {
		r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, nil)
		require.NoError(t, r.broker.Faults().Refuse(testbroker.RefuseServerUnavailable, "dev-1"))
		r.advanceWait()
		f := r.next(device.EventAttemptFailed)
		assert.Equal(t, 3, f.Code)
		r.broker.Faults().Unrefuse("dev-1")
		w := r.advanceWait()
		assert.GreaterOrEqual(t, w, time.Second)
		r.next(device.EventConnected)
	})
	t.Run("not authorised is retried at the cap", func(t *testing.T) {
		r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			c.Credentials = device.Credentials{Password: "s3cret-pw", AllowPlaintext: true}
		})
		require.NoError(t, r.broker.Faults().Refuse(testbroker.RefuseNotAuthorised, "dev-1"))
		r.advanceWait()
		assert.Equal(t, 5, r.next(device.EventAttemptFailed).Code)
		assert.GreaterOrEqual(t, r.advanceWait(), 32*time.Second)
	})
	t.Run("unmapped code 0x87 is not a session", func(t *testing.T) {
		r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, nil)
		require.NoError(t, r.broker.Faults().Refuse(0x87, "dev-1"))
		r.advanceWait()
		f := r.next(device.EventAttemptFailed)
		assert.Equal(t, device.NoConnack, f.Code, "no CONNACK MQTT 3.1.1 knows")
		var pe *device.ProtocolError
		require.ErrorAs(t, f.Err, &pe)
		assert.ErrorIs(t, f.Err, device.ErrProtocol)
		assert.EqualError(t, f.Err, "device: the broker broke MQTT 3.1.1 (packet type 2): CONNACK return code 135 (0x87), unknown to MQTT 3.1.1")
		assert.False(t, r.agent.Connected())
		r.broker.Faults().Unrefuse("dev-1")
		r.advanceWait()
		r.next(device.EventConnected)
		assert.Equal(t, int64(1), r.agent.Stats().Connects, "the zombie never counted as connected")
	})
}

func TestRetryCapEndsWithDocumentedError(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 2})
		require.NoError(t, err)
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			tm := device.DefaultTiming()
			tm.Policy = p
			c.Timing = &tm
		})
		r.broker.Faults().BeginOutage()
		for i := 0; i < 3; i++ {
			r.advanceWait()
			r.next(device.EventAttemptFailed)
		}
		e := r.next(device.EventGaveUp)
		assert.ErrorIs(t, e.Err, device.ErrGaveUp)
		select {
		case <-r.agent.Done():
		case <-time.After(bound):
			t.Fatal("agent did not stop")
		}
		assert.ErrorIs(t, r.agent.Err(), device.ErrGaveUp)
		assert.Equal(t, int64(3), r.agent.Stats().Attempts)
	})
}

func TestSubscriptionsComeBackAndPanicsAreContained(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, nil)
		got := make(chan string, 10)
		ctx := context.Background()
		require.NoError(t, r.agent.Subscribe(ctx, "cmd/dev-1", 1, func(_ string, p []byte) {
			if string(p) == "boom" {
				panic("bad command")
			}
			got <- string(p)
		}))
		r.bootAndConnect()

		var sender paho.Client
		connectSender := func() {
			sender = paho.NewClient(r.broker.ClientOptions("sender"))
			tok := sender.Connect()
			require.True(t, tok.WaitTimeout(bound))
			require.NoError(t, tok.Error())
			t.Cleanup(func() { sender.Disconnect(0) })
		}
		connectSender()
		send := func(msg string) {
			tok := sender.Publish("cmd/dev-1", 1, false, msg)
			require.True(t, tok.WaitTimeout(bound))
			require.NoError(t, tok.Error())
		}
		receive := func(want string) {
			select {
			case m := <-got:
				assert.Equal(t, want, m)
			case <-time.After(bound):
				t.Fatalf("did not receive %q", want)
			}
		}
		send("one") // AwaitConnection returned, so the subscription is in place
		receive("one")

		send("boom")
		assert.Contains(t, r.next(device.EventHandlerPanic).Err.Error(), "bad command")

		r.clock.Advance(2 * time.Minute)
		r.broker.Faults().DropAll()
		r.next(device.EventLost)
		r.advanceWait()
		r.next(device.EventConnected)
		connectSender() // DropAll dropped the sender too
		send("two")
		receive("two")
	})
}

func TestPublishNeedsSession(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, nil)
		ctx := context.Background()
		assert.ErrorIs(t, r.agent.Publish(ctx, "t", 1, false, []byte("x")), device.ErrNotConnected)
		r.bootAndConnect()
		require.NoError(t, r.agent.Publish(ctx, "telemetry/dev-1", 1, false, []byte("x")))
		require.NoError(t, r.broker.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 1 }))
	})
}

func TestCredentialsNeverLoggedOrInErrors(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		var logs bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var cfgSeen device.Config
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			// AllowPlaintext: the in-memory transport
			c.Credentials = device.Credentials{Username: "device-user", Password: "s3cret-pw", AllowPlaintext: true}
			c.Logger = logger
			tm := device.DefaultTiming()
			tm.Credentials = device.CredentialsArePermanent
			c.Timing = &tm
			cfgSeen = *c
		})
		require.NoError(t, r.broker.Faults().Refuse(testbroker.RefuseNotAuthorised, "dev-1"))
		r.advanceWait()
		failed := r.next(device.EventAttemptFailed)
		gaveUp := r.next(device.EventGaveUp)
		<-r.agent.Done()
		logger.Info("agent config", "cfg", cfgSeen) // what a firmware author would log

		for _, err := range []error{failed.Err, gaveUp.Err, r.agent.Err()} {
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "s3cret-pw")
		}
		assert.ErrorIs(t, r.agent.Err(), device.ErrRefused)
		mu.Lock()
		defer mu.Unlock()
		assert.Contains(t, logs.String(), "connect failed", "the refusal was logged")
		assert.Contains(t, logs.String(), "password_set=true")
		assert.NotContains(t, logs.String(), "s3cret-pw")
	})
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestStopIsCleanAndBounded(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, nil)
		r.bootAndConnect()
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		require.NoError(t, r.agent.Stop(ctx))
		assert.ErrorIs(t, r.agent.Err(), device.ErrStopped)
		require.NoError(t, r.broker.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Connected == 0 }))
		assert.True(t, strings.Contains(r.agent.Err().Error(), "stopped"))
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]device.Config{
		"no broker":    {ClientID: "x"},
		"no client id": {Broker: "tcp://127.0.0.1:1883"},
		"bad scheme":   {Broker: "carrier://x", ClientID: "x"},
		"bad timeout":  {Broker: "tcp://127.0.0.1:1883", ClientID: "x", ConnectTimeout: -1},
		// sent as 0 s, which would turn keepalive off: a silent path never noticed
		"keepalive under a second": {Broker: "tcp://127.0.0.1:1883", ClientID: "x", KeepAlive: 500 * time.Millisecond},
		"bad ping timeout":         {Broker: "tcp://127.0.0.1:1883", ClientID: "x", PingTimeout: -1},
		// paho sends it in 16 bits: 65536 s would arrive as 0, 200000 h as 21,504 s
		"keepalive over 16 bits": {Broker: "tcp://127.0.0.1:1883", ClientID: "x", KeepAlive: device.MaxKeepAlive + time.Second},
		"keepalive of 200000h":   {Broker: "tcp://127.0.0.1:1883", ClientID: "x", KeepAlive: 200000 * time.Hour},
		// a redirect domain is a host name: no address, wildcard or port
		"an address as a redirect domain": {Broker: "tcp://127.0.0.1:1883", ClientID: "x", Redirects: device.Redirects{Domains: []string{"10.0.0.1"}}},
		"a wildcard redirect domain":      {Broker: "tcp://127.0.0.1:1883", ClientID: "x", Redirects: device.Redirects{Domains: []string{"*.fleet.test"}}},
		"a redirect domain with a port":   {Broker: "tcp://127.0.0.1:1883", ClientID: "x", Redirects: device.Redirects{Domains: []string{"fleet.test:1883"}}},
	} {
		_, err := device.New(c)
		assert.ErrorIs(t, err, device.ErrInvalid, name)
	}
}

// New's refusals name Config fields, and say which one is at fault;
// Rename gives a command the same message naming its own flags.
func TestConfigErrorsNameTheirFields(t *testing.T) {
	for name, c := range map[string]struct {
		cfg   device.Config
		field string
		says  string
	}{
		"no client id": {device.Config{Broker: "tcp://b:1883"}, "ClientID", "Config.ClientID is required"},
		"credentials in plaintext": {device.Config{Broker: "tcp://b:1883", ClientID: "x", Credentials: device.Credentials{Username: "u"}},
			"Credentials.AllowPlaintext", "use TLS, or set Config.Credentials.AllowPlaintext"},
		"a failover's credentials": {device.Config{Broker: "ssl://b:8883", Failover: []string{"ssl://c:8883", "ssl://u:p@d:8883"},
			ClientID: "x"}, "Failover[1]", "Config.Failover[1] carries credentials: set Config.Credentials.Username and Config.Credentials.Password"},
		"a broker without a host": {device.Config{Broker: "tcp:///x", ClientID: "x"}, "Broker", "Config.Broker has no host"},
		"a bad redirect domain": {device.Config{Broker: "tcp://b:1883", ClientID: "x", Redirects: device.Redirects{Domains: []string{"10.0.0.1"}}},
			"Redirects.Domains", `Config.Redirects.Domains entry "10.0.0.1" is not a domain name`},
		"a tiny packet bound": {device.Config{Broker: "tcp://b:1883", ClientID: "x", Incoming: device.IncomingLimits{MaxPacket: 10}}, "Incoming.MaxPacket",
			"Config.Incoming.MaxPacket 10 is outside [64, 268435455]"},
	} {
		_, err := device.New(c.cfg)
		require.ErrorIs(t, err, device.ErrInvalid, name)
		var ce *device.ConfigError
		require.ErrorAs(t, err, &ce, name)
		assert.Equal(t, c.field, ce.Field, name)
		assert.Contains(t, err.Error(), c.says, name)
		renamed := ce.Rename(func(f string) string { return "<" + f + ">" })
		assert.NotContains(t, renamed, "Config.", name)
		assert.Contains(t, renamed, "<"+c.field+">", name)
	}
}

// silentBroker accepts TCP connections and never answers: the CONNECT waits
// for a CONNACK that never comes. accepted hears of each connection.
type silentBroker struct {
	ln       net.Listener
	accepted chan net.Conn
}

func newSilentBroker(t *testing.T) *silentBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silentBroker{ln: ln, accepted: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(s.accepted)
		for c := range s.accepted {
			c.Close()
		}
	})
	return s
}

// TestStopMidConnectToSilentBroker: Stop cuts a connect attempt short
// rather than waiting out its 30 s timeout; goleak (TestMain) checks that
// nothing of the abandoned attempt is left running.
func TestStopMidConnectToSilentBroker(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		sb := newSilentBroker(t)
		clock := fakeclock.New(t0)
		events := make(chan device.Event, 100)
		tm := device.DefaultTiming()
		a, err := device.New(device.Config{Broker: "tcp://" + sb.ln.Addr().String(), ClientID: "dev-s", Timing: &tm,
			Clock: clock, Source: rand.NewPCG(1, 1), ConnectTimeout: 30 * time.Second,
			OnEvent: func(e device.Event) { events <- e }})
		require.NoError(t, err)
		require.NoError(t, a.Start(context.Background()))
		_, err = clock.AdvanceToNext(bound) // the boot spread
		require.NoError(t, err)
		select {
		case c := <-sb.accepted:
			sb.accepted <- c // closed at cleanup
		case <-time.After(bound):
			t.Fatal("the agent never reached the broker")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, a.Stop(ctx), "Stop must not wait out the connect timeout")
		t.Logf("Stop mid-connect returned after %v", time.Since(start))
		assert.ErrorIs(t, a.Err(), device.ErrStopped)
		assert.Equal(t, int64(0), a.Stats().Connects)
	})
}

// TestPersistentSessionPublishNeedsItsPUBACK: a QoS 1 publish the broker
// never acknowledged is in flight when the broker restarts; the agent comes
// back on the resumed session, paho resends the message and completes the
// original publish before any PUBACK for it. Publish must not report that as
// a success. On MQTT 5 paho.golang waits for the resend's PUBACK, and
// Publish succeeds with it.
func TestPersistentSessionPublishNeedsItsPUBACK(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		r := newRigP(t, proto, testbroker.Config{}, func(c *device.Config) { c.Session.Persistent = true })
		r.advanceWait()
		first := r.next(device.EventConnected)
		assert.False(t, first.SessionPresent)

		r.broker.Faults().DropPublishes(true)
		published := make(chan error, 1)
		go func() {
			published <- r.agent.Publish(context.Background(), "telemetry/dev-1", 1, false, []byte("unacknowledged"))
		}()
		require.NoError(t, r.broker.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.DroppedPublishes == 1 }))
		r.broker.Faults().BeginOutage() // the broker restarts
		r.next(device.EventLost)
		r.broker.Faults().DropPublishes(false)
		require.NoError(t, r.broker.Faults().EndOutage())
		r.advanceWait()
		again := r.next(device.EventConnected)
		assert.True(t, again.SessionPresent, "the broker resumed the session")

		select {
		case err := <-published:
			if proto == device.MQTT5 {
				// paho.golang completes the publish with the PUBACK of its
				// resend: a real acknowledgement.
				assert.NoError(t, err)
				break
			}
			assert.ErrorIs(t, err, device.ErrUnconfirmed)
		case <-time.After(bound):
			t.Fatal("paho never completed the resent publish")
		}
		// paho's resend did reach the broker on the resumed session.
		require.NoError(t, r.broker.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 1 }))
		// A publish on a live connection still succeeds.
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		require.NoError(t, r.agent.Publish(ctx, "telemetry/dev-1", 1, false, []byte("acknowledged")))
	})
}

// A path that goes silent without a reset (a NAT that forgot the
// connection) is noticed through the keepalive alone; the attempts made
// into the silence time out, and the agent is back once it ends.
func TestSilentPathIsNoticedThroughKeepalive(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		var proxy *faultproxy.Proxy
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			dial := c.Dial
			var err error
			proxy, err = faultproxy.New(faultproxy.Config{Upstream: func(ctx context.Context) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, bound)
				defer cancel()
				return dial(ctx, nil)
			}})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, proxy.Close()) })
			c.Dial = func(ctx context.Context, _ *url.URL) (net.Conn, error) { return proxy.Dial(ctx) }
			c.KeepAlive, c.PingTimeout, c.ConnectTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
		})
		r.bootAndConnect()
		proxy.BeginBlackhole()
		lost := r.next(device.EventLost)
		assert.Error(t, lost.Err, "noticed by the missing PINGRESP")
		r.advanceWait()
		r.next(device.EventAttemptFailed) // into the silence: the connect times out
		proxy.EndBlackhole()
		r.advanceWait()
		r.next(device.EventConnected)
		assert.Equal(t, 1, r.broker.Connected())
	})
}

// After a loss the next attempt goes to the next endpoint, after the
// policy's wait: the device moves to the survivor on its usual schedule.
func TestFailoverMovesToTheNextEndpointAfterTheWait(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		standby, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory, Addr: "standby"})
		require.NoError(t, err)
		t.Cleanup(func() { standby.Close() })
		var primary *testbroker.Broker
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
			c.Failover = []string{standby.URL()}
			c.Dial = func(ctx context.Context, u *url.URL) (net.Conn, error) {
				if u.String() == standby.URL() {
					return standby.DialContext(ctx, u)
				}
				return primary.DialContext(ctx, u)
			}
		})
		primary = r.broker
		r.bootAndConnect()
		assert.Equal(t, 1, primary.Connected())
		r.clock.Advance(2 * time.Minute) // stable
		primary.Faults().BeginOutage()   // and it never comes back
		r.next(device.EventLost)
		wait := r.advanceWait()
		assert.GreaterOrEqual(t, wait, time.Second, "the policy's wait, failover or not")
		e := r.next(device.EventConnected)
		assert.Equal(t, standby.URL(), e.Endpoint)
		assert.Equal(t, 1, standby.Connected())
		assert.Zero(t, primary.Recorder().Counts().Attempts-1, "no attempt went back to the dead primary")
	})
}

func TestFailoverURLsAreValidated(t *testing.T) {
	_, err := device.New(device.Config{Broker: "tcp://127.0.0.1:1883", ClientID: "x", Failover: []string{"::nonsense"}})
	assert.ErrorIs(t, err, device.ErrInvalid)
	_, err = device.New(device.Config{Broker: "tcp://127.0.0.1:1883", ClientID: "x", Failover: []string{"carrier://pigeon:1"}})
	assert.ErrorIs(t, err, device.ErrInvalid)
}

// counts is a Metrics that counts, as firmware exporting them would.
type counts struct {
	mu       sync.Mutex
	outcomes map[device.AttemptOutcome]int
	up, lost int
	tooLarge int
}

func (c *counts) PacketTooLarge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tooLarge++
}

func (c *counts) Attempt(o device.AttemptOutcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[o]++
}

func (c *counts) SessionUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up++
}

func (c *counts) SessionDown(lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up--
	if lost {
		c.lost++
	}
}

func (c *counts) get() (map[device.AttemptOutcome]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.outcomes), c.up
}

func TestMetricsCountAttemptsAndSessions(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		m := &counts{outcomes: map[device.AttemptOutcome]int{}}
		r := newRigP(t, proto, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) { c.Metrics = m })
		r.bootAndConnect()
		got, up := m.get()
		assert.Equal(t, map[device.AttemptOutcome]int{device.AttemptAccepted: 1}, got)
		assert.Equal(t, 1, up)
		require.NoError(t, r.broker.Faults().Refuse(testbroker.RefuseServerUnavailable, "dev-1"))
		r.broker.Faults().DropAll()
		r.next(device.EventLost)
		r.advanceWait()
		r.next(device.EventAttemptFailed)
		r.broker.Faults().BeginOutage()
		r.advanceWait()
		r.next(device.EventAttemptFailed)
		got, up = m.get()
		assert.Equal(t, map[device.AttemptOutcome]int{device.AttemptAccepted: 1, device.AttemptRefused: 1, device.AttemptFailed: 1}, got)
		assert.Zero(t, up, "the session ended")
		assert.Equal(t, 1, m.lost)
	})
}

// Credentials go only over TLS unless the firmware says otherwise, a
// failover never downgrades the transport, and no error quotes a secret.
func TestTransportRulesKeepCredentialsOffTheWire(t *testing.T) {
	const secret = "s3cret-pw"
	for name, c := range map[string]device.Config{
		"password over tcp":              {Broker: "tcp://b:1883", Credentials: device.Credentials{Password: secret}},
		"username over tcp":              {Broker: "tcp://b:1883", Credentials: device.Credentials{Username: "token-" + secret}},
		"password in a tcp URL":          {Broker: "tcp://u:" + secret + "@b:1883"},
		"TLS broker, plaintext failover": {Broker: "ssl://b:8883", Failover: []string{"tcp://c:1883"}},
		"plaintext broker, TLS failover": {Broker: "tcp://b:1883", Failover: []string{"mqtts://c:8883"}},
		"credentials in a failover URL":  {Broker: "ssl://b:8883", Failover: []string{"ssl://u:" + secret + "@c:8883"}},
		"credentials twice":              {Broker: "ssl://u:" + secret + "@b:8883", Credentials: device.Credentials{Password: "other"}},
		"unparsable URL with a password": {Broker: "tcp://u:" + secret + "@b :1883"},
		"bad port after a password":      {Broker: "ssl://u:" + secret + "@b:88x3"},
		"a password before a slash":      {Broker: "ssl://u:1234/" + secret + "@b:8883"},
		"a password in a failover path":  {Broker: "ssl://b:8883", Failover: []string{"ssl://c:8883/" + secret + "@d"}},
		"no scheme":                      {Broker: "u:" + secret + "@b"},
		"no scheme, no user":             {Broker: secret + "@b:8883"},
		"mixed even when allowed":        {Broker: "ssl://b:8883", Failover: []string{"tcp://c:1883"}, Credentials: device.Credentials{Password: secret, AllowPlaintext: true}},
	} {
		c.ClientID = "x"
		_, err := device.New(c)
		require.ErrorIs(t, err, device.ErrInvalid, name)
		assert.NotContains(t, err.Error(), secret, name)
		t.Logf("%s: %v", name, err)
	}
	for name, c := range map[string]device.Config{
		"password over TLS":         {Broker: "ssl://b:8883", Failover: []string{"mqtts://c:8883"}, Credentials: device.Credentials{Password: secret}},
		"password in a TLS URL":     {Broker: "mqtts://u:" + secret + "@b:8883"},
		"plaintext, allowed":        {Broker: "tcp://b:1883", Failover: []string{"tcp://c:1883"}, Credentials: device.Credentials{Password: secret, AllowPlaintext: true}},
		"plaintext, no credentials": {Broker: "tcp://b:1883", Failover: []string{"mqtt://c:1883"}},
		"device certificate, no pw": {Broker: "ssl://b:8883"},
	} {
		c.ClientID = "x"
		_, err := device.New(c)
		assert.NoError(t, err, name)
	}
}

// What a firmware author logs of a Config says which endpoints are TLS and
// holds no secret, even one in a URL.
func TestConfigLogsEveryEndpointsTLSAndNoSecret(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	log.Info("starting", "config", device.Config{Broker: "ssl://u:s3cret-pw@b:8883", Failover: []string{"mqtts://c:8883"},
		Credentials: device.Credentials{Password: "other-s3cret"}, ClientID: "x"})
	assert.NotContains(t, logs.String(), "s3cret")
	assert.Contains(t, logs.String(), "config.broker=ssl://u:xxxxx@b:8883 config.broker_tls=true")
	assert.Contains(t, logs.String(), `config.failover="mqtts://c:8883 (tls)"`)

	for cfg, want := range map[string]string{
		"ssl://u:s3cret-pw@b:8883":      "config.username_set=true config.password_set=true config.credentials_from=broker_url",
		"ssl://b:8883":                  "config.username_set=false config.password_set=false config.credentials_from=none",
		"ssl://u:1234/s3cret-pw@b:8883": "config.broker=\"(URL with a stray '@')\"",
	} {
		logs.Reset()
		log.Info("starting", "config", device.Config{Broker: cfg, ClientID: "x"})
		assert.NotContains(t, logs.String(), "s3cret")
		assert.Contains(t, logs.String(), want)
	}
	logs.Reset()
	log.Info("starting", "config", device.Config{Broker: "ssl://b:8883", Credentials: device.Credentials{Username: "u", Password: "s3cret-pw"}, ClientID: "x"})
	assert.Contains(t, logs.String(), "config.username_set=true config.password_set=true config.credentials_from=config")
}
