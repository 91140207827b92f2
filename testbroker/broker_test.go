package testbroker_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

const bound = 10 * time.Second // real-time bound on waiting for any event

func init() {
	// paho logs nothing by default; keep it that way.
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
}

func newBroker(t *testing.T, cfg testbroker.Config) *testbroker.Broker {
	t.Helper()
	b, err := testbroker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// client is a real paho client with its connection-lost events on a channel.
type client struct {
	paho.Client
	lost chan error
}

func newClient(t *testing.T, b *testbroker.Broker, id string) *client {
	t.Helper()
	c := &client{lost: make(chan error, 4)}
	opts := b.ClientOptions(id).SetConnectionLostHandler(func(_ paho.Client, err error) { c.lost <- err })
	c.Client = paho.NewClient(opts)
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

// connect connects and returns the token's error and the raw CONNACK code.
func (c *client) connect(t *testing.T) (error, byte) {
	t.Helper()
	tok := c.Connect()
	require.True(t, tok.WaitTimeout(bound), "connect did not complete")
	return tok.Error(), tok.(*paho.ConnectToken).ReturnCode()
}

func (c *client) mustConnect(t *testing.T) {
	t.Helper()
	err, code := c.connect(t)
	require.NoError(t, err)
	require.Zero(t, code)
}

func (c *client) awaitLost(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.lost:
		return err
	case <-time.After(bound):
		t.Fatal("connection was not lost")
		return nil
	}
}

var transports = []struct {
	name string
	cfg  testbroker.Config
}{
	{"tcp", testbroker.Config{}},
	{"tls", testbroker.Config{Transport: testbroker.TLS}},
	{"mtls", testbroker.Config{Transport: testbroker.TLS, MutualTLS: true}},
	{"mem", testbroker.Config{Transport: testbroker.Memory}},
}

func TestEveryTransportConnectsPublishesAndRecords(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			b := newBroker(t, tr.cfg)
			c := newClient(t, b, "dev-1")
			c.mustConnect(t)
			tok := c.Publish("telemetry/dev-1", 1, false, "hello")
			require.True(t, tok.WaitTimeout(bound))
			require.NoError(t, tok.Error())

			require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 1 }))
			att := b.Recorder().Attempts()
			require.Len(t, att, 1)
			assert.Equal(t, "dev-1", att[0].ClientID)
			assert.Equal(t, fault.Accepted, att[0].Outcome)
			assert.False(t, att[0].Connect.Before(att[0].Accept))
			pub := b.Recorder().Publishes()[0]
			assert.Equal(t, "telemetry/dev-1", pub.Topic)
			assert.Equal(t, []byte("hello"), pub.Payload)
			assert.Equal(t, byte(1), pub.QoS)
			assert.Equal(t, 1, b.Connected())
		})
	}
}

// A withheld PUBLISH is neither acknowledged nor recorded; a client with a
// persistent session resends it on its next connection, and then it lands.
func TestDropPublishes(t *testing.T) {
	b := newBroker(t, testbroker.Config{})
	c := &client{lost: make(chan error, 4)}
	c.Client = paho.NewClient(b.ClientOptions("dev-p").SetCleanSession(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { c.lost <- err }))
	t.Cleanup(func() { c.Disconnect(0) })
	c.mustConnect(t)

	b.Faults().DropPublishes(true)
	first := c.Publish("t/dev-p", 1, false, "first")
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.DroppedPublishes == 1 }))
	b.Faults().DropPublishes(false)
	second := c.Publish("t/dev-p", 1, false, "second")
	require.True(t, second.WaitTimeout(bound))
	require.NoError(t, second.Error())
	select { // a PUBACK for first would have come before second's
	case <-first.Done():
		t.Fatal("a withheld publish was acknowledged")
	default:
	}
	require.Len(t, b.Recorder().Publishes(), 1)
	assert.Equal(t, []byte("second"), b.Recorder().Publishes()[0].Payload)

	require.Equal(t, 1, b.Faults().DropAll())
	<-c.lost
	c.mustConnect(t)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 2 }))
	assert.Equal(t, []byte("first"), b.Recorder().Publishes()[1].Payload, "resent on the resumed session")
}

// A held PUBACK: the message is recorded at once, its acknowledgement
// waits for the release.
func TestDelayPubacks(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	c := newClient(t, b, "dev-h")
	c.mustConnect(t)
	b.Faults().DelayPubacks(true)
	tok := c.Publish("t/dev-h", 1, false, "held")
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 1 }))
	select {
	case <-tok.Done():
		t.Fatal("acknowledged while held")
	default:
	}
	b.Faults().DelayPubacks(false)
	require.True(t, tok.WaitTimeout(bound))
	require.NoError(t, tok.Error())
}

func TestMutualTLSRejectsClientWithoutCertificate(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.TLS, MutualTLS: true})
	cfg, err := b.ClientTLSConfig("dev-1")
	require.NoError(t, err)
	cfg.Certificates = nil
	c := paho.NewClient(b.ClientOptions("dev-1").SetTLSConfig(cfg))
	tok := c.Connect()
	require.True(t, tok.WaitTimeout(bound))
	assert.Error(t, tok.Error())
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Dropped == 1 }))
}

func TestDropAllDisconnectsEveryClient(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			b := newBroker(t, tr.cfg)
			var cs []*client
			for i := 0; i < 5; i++ {
				c := newClient(t, b, fmt.Sprintf("dev-%d", i))
				c.mustConnect(t)
				cs = append(cs, c)
			}
			assert.Equal(t, 5, b.Faults().DropAll())
			for _, c := range cs {
				assert.Error(t, c.awaitLost(t))
				assert.False(t, c.IsConnected())
			}
			require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Disconnects == 5 }))
			for _, d := range b.Recorder().Disconnects() {
				assert.Equal(t, testbroker.CauseDropAll, d.Cause)
			}
			assert.Equal(t, 0, b.Connected())
			// The broker stayed up: the same clients come straight back.
			for _, c := range cs {
				c.mustConnect(t)
			}
			assert.Equal(t, 5, b.Connected())
		})
	}
}

func TestDroppedTCPConnectionIsReallyGone(t *testing.T) {
	b := newBroker(t, testbroker.Config{})
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	connect := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	connect.ProtocolName, connect.ProtocolVersion, connect.ClientIdentifier = "MQTT", 4, "raw-1"
	connect.CleanSession, connect.Keepalive = true, 30
	require.NoError(t, connect.Write(conn))
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	ack, err := packets.ReadPacket(conn)
	require.NoError(t, err)
	require.Equal(t, byte(0), ack.(*packets.ConnackPacket).ReturnCode)

	require.Equal(t, 1, b.Faults().DropAll())
	// The broker closed its end: the next read sees EOF, not a timeout.
	_, err = packets.ReadPacket(conn)
	require.Error(t, err)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "read timed out instead of seeing the close: %v", err)
}

func TestOutageRefusesAndComesBackOnSameAddress(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			b := newBroker(t, tr.cfg)
			url := b.URL()
			c := newClient(t, b, "dev-1")
			c.mustConnect(t)

			assert.Equal(t, 1, b.Faults().BeginOutage())
			assert.True(t, b.Faults().Down())
			assert.Error(t, c.awaitLost(t))

			err, code := c.connect(t)
			require.Error(t, err, "connect during an outage must fail")
			assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "want connection refused, got %v", err)
			assert.Equal(t, byte(packets.ErrNetworkError), code)

			require.NoError(t, b.Faults().EndOutage())
			assert.False(t, b.Faults().Down())
			assert.Equal(t, url, b.URL())
			// A new client: paho completes a failed connect token before its
			// status is back to disconnected, so reusing c at once can fail.
			newClient(t, b, "dev-1").mustConnect(t)
			assert.Equal(t, 1, b.Connected())
			ds := b.Recorder().Disconnects()
			require.Len(t, ds, 1)
			assert.Equal(t, testbroker.CauseOutage, ds[0].Cause)
		})
	}
}

func TestOutageForEndsByItself(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, b.Faults().OutageFor(50*time.Millisecond))
	err, _ := newClient(t, b, "dev-1").connect(t)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	// Reconnect the way a device would, with the project's own retry loop:
	// every 10 ms, at most bound/10ms times.
	policy, err := reconnect.New(reconnect.Constant{Interval: 10 * time.Millisecond},
		reconnect.Limits{MaxRetries: int(bound / (10 * time.Millisecond))})
	require.NoError(t, err)
	err = reconnect.Retry{Policy: policy}.Do(context.Background(), func(context.Context) error {
		err, _ := newClient(t, b, "dev-1").connect(t)
		return err
	})
	require.NoError(t, err, "outage never ended")
	assert.False(t, b.Faults().Down())
}

// connectAll connects n fresh clients concurrently and returns their results.
func connectAll(t *testing.T, b *testbroker.Broker, n int) ([]*client, []error, []byte) {
	cs := make([]*client, n)
	errs := make([]error, n)
	codes := make([]byte, n)
	for i := range cs {
		cs[i] = newClient(t, b, fmt.Sprintf("dev-%d", i))
	}
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := c.Connect()
			if !tok.WaitTimeout(bound) {
				errs[i] = errors.New("connect timed out")
				return
			}
			errs[i], codes[i] = tok.Error(), tok.(*paho.ConnectToken).ReturnCode()
		}()
	}
	wg.Wait()
	return cs, errs, codes
}

func TestAdmissionRefuseAnswersServerUnavailable(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, b.Faults().SetAdmission(fault.Admission{Rate: 0.001, Burst: 3, Mode: fault.RefuseOverLimit}))
	_, errs, codes := connectAll(t, b, 10)
	accepted, refused := 0, 0
	for i := range errs {
		switch {
		case errs[i] == nil:
			accepted++
		case errors.Is(errs[i], packets.ErrorRefusedServerUnavailable):
			assert.Equal(t, byte(3), codes[i])
			refused++
		default:
			t.Errorf("unexpected error %v", errs[i])
		}
	}
	assert.Equal(t, 3, accepted, "the burst")
	assert.Equal(t, 7, refused)
	cnt := b.Recorder().Counts()
	assert.Equal(t, 3, cnt.Accepted)
	assert.Equal(t, 7, cnt.Refused)
	for _, a := range b.Recorder().Attempts() {
		if a.Outcome == fault.Refused {
			assert.Equal(t, byte(3), a.Code)
		}
	}
	require.NoError(t, b.Faults().SetAdmission(fault.Admission{}))
	c := newClient(t, b, "late")
	c.mustConnect(t)
}

func TestAdmissionPauseMakesSocketsWait(t *testing.T) {
	for _, tr := range []string{"tcp", "mem"} {
		t.Run(tr, func(t *testing.T) {
			cfg := testbroker.Config{}
			if tr == "mem" {
				cfg.Transport = testbroker.Memory
			}
			b := newBroker(t, cfg)
			const perSecond = 40
			require.NoError(t, b.Faults().SetAdmission(fault.Admission{Rate: perSecond, Burst: 1, Mode: fault.PauseOverLimit}))
			_, errs, _ := connectAll(t, b, 6)
			for _, err := range errs {
				assert.NoError(t, err, "paused sockets wait and are then served")
			}
			att := b.Recorder().Attempts()
			require.Len(t, att, 6)
			// The limiter spaces accepts by at least 1/rate: six need >= 5/40 s.
			spread := att[5].Accept.Sub(att[0].Accept)
			assert.GreaterOrEqual(t, spread, 5*time.Second/perSecond-5*time.Millisecond)
			assert.Equal(t, 6, b.Recorder().Counts().Accepted)
		})
	}
}

func TestAdmissionDisconnectAcceptsThenDrops(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, b.Faults().SetAdmission(fault.Admission{Rate: 0.001, Burst: 2, Mode: fault.DisconnectOverLimit}))
	cs, errs, codes := connectAll(t, b, 5)
	for i := range errs {
		// Every client sees CONNACK 0 (or, if the close races the CONNACK, a
		// lost connection); the over-limit ones then lose the session.
		if errs[i] == nil {
			assert.Zero(t, codes[i])
		}
	}
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Throttled == 3 && c.Disconnects == 3 }))
	assert.Equal(t, 2, b.Recorder().Counts().Accepted)
	lost := 0
	for _, c := range cs {
		select {
		case <-c.lost:
			lost++
		default:
		}
	}
	for _, d := range b.Recorder().Disconnects() {
		assert.Equal(t, testbroker.CauseThrottled, d.Cause)
	}
	assert.Equal(t, 2, b.Connected())
	assert.LessOrEqual(t, lost, 3)
}

func TestFlappingDropsEachSessionAfterInterval(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, b.Faults().SetFlapping(30*time.Millisecond))
	c := newClient(t, b, "dev-1")
	for i := 0; i < 3; i++ {
		c.mustConnect(t)
		assert.Error(t, c.awaitLost(t))
	}
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Disconnects == 3 }))
	for _, d := range b.Recorder().Disconnects() {
		assert.Equal(t, testbroker.CauseFlap, d.Cause)
	}
	require.NoError(t, b.Faults().SetFlapping(0))
	c.mustConnect(t)
}

func TestRefuseChosenClientIDs(t *testing.T) {
	b := newBroker(t, testbroker.Config{})
	require.NoError(t, b.Faults().Refuse(testbroker.RefuseNotAuthorised, "bad-creds"))
	require.NoError(t, b.Faults().Refuse(testbroker.RefuseIdentifier, "bad-id"))
	require.NoError(t, b.Faults().Refuse(0x87, "v5-code")) // a non-conforming broker

	err, code := newClient(t, b, "bad-creds").connect(t)
	assert.ErrorIs(t, err, packets.ErrorRefusedNotAuthorised)
	assert.Equal(t, byte(5), code)

	err, code = newClient(t, b, "bad-id").connect(t)
	assert.ErrorIs(t, err, packets.ErrorRefusedIDRejected)
	assert.Equal(t, byte(2), code)

	// paho v1.5.1 maps no error for 0x87 and so takes its success path: the
	// token reports no error and ReturnCode 0 (it stores the code only on its
	// error path), paho closes the socket itself, and IsConnected stays true
	// with no connection-lost event. A zombie session: a device must read the
	// CONNACK code off the wire to catch it. This pins that behaviour.
	zombie := newClient(t, b, "v5-code")
	err, code = zombie.connect(t)
	assert.NoError(t, err)
	assert.Equal(t, byte(0), code)
	assert.True(t, zombie.IsConnected(), "paho believes it is connected")
	assert.Equal(t, 0, b.Connected(), "the broker refused it")

	newClient(t, b, "good").mustConnect(t)
	b.Faults().Unrefuse("bad-creds")
	newClient(t, b, "bad-creds").mustConnect(t)

	want := map[string]byte{"bad-creds": 5, "bad-id": 2, "v5-code": 0x87}
	for _, a := range b.Recorder().Attempts() {
		if code, ok := want[a.ClientID]; ok && a.Outcome == fault.Refused {
			assert.Equal(t, code, a.Code, a.ClientID)
			delete(want, a.ClientID)
		}
	}
	assert.Empty(t, want, "every refusal recorded with its code")
}

func TestConnackLatency(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	const latency = 100 * time.Millisecond
	require.NoError(t, b.Faults().SetConnackLatency(latency))
	c := newClient(t, b, "dev-1")
	start := time.Now()
	c.mustConnect(t)
	assert.GreaterOrEqual(t, time.Since(start), latency)
}

func TestSocketWithoutConnectIsClosedAndRecorded(t *testing.T) {
	b := newBroker(t, testbroker.Config{ConnectTimeout: 50 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL(), "tcp://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Dropped == 1 }))
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	_, err = conn.Read(make([]byte, 1))
	assert.Error(t, err, "the broker closed the idle socket")
}

// Every invalid input is an error wrapping testbroker.ErrInvalid; an
// Admission wraps fault.ErrInvalid too.
func TestInvalidOptionsAreErrors(t *testing.T) {
	for _, c := range []testbroker.Config{{Transport: "carrier-pigeon"}, {MutualTLS: true}, {ConnectTimeout: -time.Second}} {
		_, err := testbroker.New(c)
		assert.ErrorIs(t, err, testbroker.ErrInvalid, "%+v", c)
	}

	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	for _, a := range []fault.Admission{{Rate: 0, Burst: 5}, {Rate: -1}, {Rate: 10, Burst: -1}, {Rate: 10, Mode: 7}, {Rate: 10, Code: 3}} {
		err := b.Faults().SetAdmission(a)
		assert.ErrorIs(t, err, testbroker.ErrInvalid, "%+v", a)
		assert.ErrorIs(t, err, fault.ErrInvalid, "%+v", a)
	}
	for name, err := range map[string]error{
		"flapping":    b.Faults().SetFlapping(-time.Second),
		"latency":     b.Faults().SetConnackLatency(-time.Second),
		"outage":      b.Faults().OutageFor(0),
		"refuse 0":    b.Faults().Refuse(0, "x"),
		"refuse 9":    b.Faults().Refuse(9, "x"),
		"busy code 3": b.Faults().BeginBusy(3),
	} {
		assert.ErrorIs(t, err, testbroker.ErrInvalid, name)
	}
	_, err := fault.ParseAdmissionMode("sometimes")
	assert.Error(t, err)
}

func TestCloseIsBlockingAndIdempotent(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	c := newClient(t, b, "dev-1")
	c.mustConnect(t)
	assert.Equal(t, 1, b.Connected())
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	assert.Equal(t, 0, b.Connected())
	assert.Error(t, c.awaitLost(t))
	ds := b.Recorder().Disconnects()
	require.Len(t, ds, 1, "Close waited for the session's end to be recorded")
	assert.Equal(t, testbroker.CauseShutdown, ds[0].Cause)
}

// A broker closed while connections are arriving (on a shared machine,
// another process can dial a port this broker has just taken): Close must
// finish every establishment cleanly, with nothing for -race to find.
func TestCloseWhileConnectionsArrive(t *testing.T) {
	for _, tr := range []testbroker.Transport{testbroker.TCP, testbroker.TLS} {
		for range 20 {
			b, err := testbroker.New(testbroker.Config{Transport: tr})
			require.NoError(t, err)
			addr := strings.TrimPrefix(strings.TrimPrefix(b.URL(), "tcp://"), "ssl://")
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 20 {
						c, err := net.DialTimeout("tcp", addr, bound)
						if err != nil {
							return
						}
						if tr == testbroker.TLS {
							//nolint:gosec // a stray client
							c = tls.Client(c, &tls.Config{InsecureSkipVerify: true})
						}
						cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
						cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.CleanSession = "MQTT", 4, "stray", true
						_ = cp.Write(c)
						_ = c.Close()
					}
				}()
			}
			require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Attempts >= 3 }))
			require.NoError(t, b.Close())
			wg.Wait()
		}
	}
}

func TestRecorderDigestArrivalsAndCSV(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory,
		PayloadDigest: func(p []byte) []byte { return bytes.ToUpper(p) }})
	start := time.Now()
	_, errs, _ := connectAll(t, b, 4)
	for _, err := range errs {
		require.NoError(t, err)
	}
	arr := b.Recorder().Arrivals(start, time.Hour, testbroker.AtConnect)
	assert.Equal(t, []int{4}, arr)
	var buf bytes.Buffer
	require.NoError(t, b.Recorder().WriteCSV(&buf, start))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Equal(t, "seq,accept_s,connect_s,client_id,outcome,code", lines[0])
	assert.Len(t, lines, 5)
	assert.Contains(t, lines[1], ",accepted,0")

	c := newClient(t, b, "pub")
	c.mustConnect(t)
	tok := c.Publish("t", 0, false, "abc")
	require.True(t, tok.WaitTimeout(bound))
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 1 }))
	assert.Equal(t, []byte("ABC"), b.Recorder().Publishes()[0].Payload)

	b.Recorder().ResetConnections()
	assert.Equal(t, testbroker.Counts{Connected: 5, Publishes: 1}, b.Recorder().Counts())
	assert.Empty(t, b.Recorder().Attempts())
	assert.Len(t, b.Recorder().Publishes(), 1, "ResetConnections keeps the messages")

	taken := b.Recorder().TakePublishes()
	require.Len(t, taken, 1)
	assert.Equal(t, "pub", taken[0].ClientID)
	assert.Empty(t, b.Recorder().TakePublishes(), "taken once")
	assert.Equal(t, 1, b.Recorder().Counts().Publishes, "still counted")
	c.Publish("t", 0, false, "def")
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 2 }))
	assert.Len(t, b.Recorder().TakePublishes(), 1, "only what came since")

	b.Recorder().Reset()
	assert.Equal(t, testbroker.Counts{Connected: 5}, b.Recorder().Counts(), "Reset forgets events, not the sessions still open")
	assert.Empty(t, b.Recorder().Publishes())
}

// TestAcknowledgedPublishIsAlreadyRecorded: a client holding a PUBACK must
// find its message in the record at once (a count of messages received
// that lags the acknowledgements reports acknowledged messages as lost).
func TestAcknowledgedPublishIsAlreadyRecorded(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	c := newClient(t, b, "pub")
	c.mustConnect(t)
	for i := range 300 {
		tok := c.Publish("t", 1, false, fmt.Sprint(i))
		require.True(t, tok.WaitTimeout(bound))
		require.NoError(t, tok.Error())
		ps := b.Recorder().Publishes()
		require.Len(t, ps, i+1, "message %d acknowledged but not recorded", i)
		assert.Equal(t, fmt.Sprint(i), string(ps[i].Payload))
	}
}

// TestReconnectDuringCleanupKeepsSession: a client dropped and reconnecting
// at once, with the same ID, while mochi still cleans up its old session,
// must keep its new subscription (mochi's cleanup is keyed by client ID).
func TestReconnectDuringCleanupKeepsSession(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	got := make(chan string, 1)
	c := newClient(t, b, "dev-1")
	sender := newClient(t, b, "sender")
	for i := 0; i < 200; i++ {
		c.mustConnect(t)
		tok := c.Subscribe("cmd/dev-1", 1, func(_ paho.Client, m paho.Message) {
			select {
			case got <- string(m.Payload()):
			default:
			}
		})
		require.True(t, tok.WaitTimeout(bound))
		require.NoError(t, tok.Error())
		if !sender.IsConnected() {
			sender.mustConnect(t)
		}
		msg := fmt.Sprint("round ", i)
		ptok := sender.Publish("cmd/dev-1", 1, false, msg)
		require.True(t, ptok.WaitTimeout(bound))
		require.NoError(t, ptok.Error())
		select {
		case m := <-got:
			require.Equal(t, msg, m)
		case <-time.After(bound):
			t.Fatalf("round %d: the reconnected client's subscription was lost", i)
		}
		b.Faults().DropAll() // both; the loop reconnects at once
		c.awaitLost(t)
		sender.awaitLost(t)
	}
}

// TestClientGoneBeforeConnackIsNotLeftConnected: a client that gives up
// while the broker is slow to answer. mochi establishes the session, fails
// to write the CONNACK and returns without OnDisconnect; the recorder must
// still see the session end.
func TestClientGoneBeforeConnackIsNotLeftConnected(t *testing.T) {
	b := newBroker(t, testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, b.Faults().SetConnackLatency(50*time.Millisecond))
	conn, err := b.Dial(nil, paho.ClientOptions{ConnectTimeout: bound})
	require.NoError(t, err)
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.CleanSession, cp.Keepalive = "MQTT", 4, "impatient", true, 30
	require.NoError(t, cp.Write(conn))
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Attempts == 1 }))
	require.NoError(t, conn.Close()) // gives up during the broker's latency
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Disconnects == 1 }),
		"the session's end was never recorded")
	assert.Equal(t, 0, b.Connected())
}

// The broker's half of a mutual-TLS handshake costs real CPU (ECDSA P-256:
// a signature, and a verification of the device's certificate), and less
// without the device's certificate to verify.
func TestHandshakeCPUIsMeasured(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("per-thread CPU time is read on Linux")
	}
	mutual := newBroker(t, testbroker.Config{Transport: testbroker.TLS, MutualTLS: true})
	d, err := mutual.HandshakeCPU(20)
	require.NoError(t, err)
	t.Logf("the broker's half of a mutual-TLS handshake: %v CPU", d)
	assert.Greater(t, d, 50*time.Microsecond, "a P-256 signature alone costs more")
	assert.Less(t, d, 50*time.Millisecond)
	_, err = newBroker(t, testbroker.Config{Transport: testbroker.TCP}).HandshakeCPU(1)
	assert.Error(t, err, "no TLS, no handshake")
}

// A broker closed at once after it starts: mochi runs the accept loop in a
// goroutine of its own, which may start after Close. Under -race this found
// the loop joining Close's wait after Close had waited (one CI run in ten).
func TestCloseRightAfterStart(t *testing.T) {
	for range 500 {
		b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
		require.NoError(t, err)
		require.NoError(t, b.Close())
	}
}
