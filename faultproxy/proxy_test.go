package faultproxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	packets5 "github.com/eclipse/paho.golang/packets"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/testbroker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const bound = 10 * time.Second // real-time bound on waiting for any event

func init() {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
}

// setup starts a TCP broker and a TCP proxy in front of it.
func setup(t *testing.T, cfg faultproxy.Config) (*testbroker.Broker, *faultproxy.Proxy) {
	t.Helper()
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TCP})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	u, err := url.Parse(b.URL())
	require.NoError(t, err)
	cfg.Upstream, cfg.Listen = faultproxy.Upstream(u.Host), "127.0.0.1:0"
	p, err := faultproxy.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return b, p
}

// client is a real paho client through the proxy, its losses on a channel.
type client struct {
	paho.Client
	lost chan error
}

func newClient(t *testing.T, p *faultproxy.Proxy, id string, tune func(*paho.ClientOptions)) *client {
	t.Helper()
	c := &client{lost: make(chan error, 4)}
	o := paho.NewClientOptions().AddBroker("tcp://" + p.Addr()).SetClientID(id).SetProtocolVersion(4).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second).SetKeepAlive(30 * time.Second).
		SetConnectionLostHandler(func(_ paho.Client, err error) { c.lost <- err })
	if tune != nil {
		tune(o)
	}
	c.Client = paho.NewClient(o)
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

func (c *client) connect(t *testing.T) error {
	t.Helper()
	tok := c.Connect()
	require.True(t, tok.WaitTimeout(bound), "connect did not complete")
	return tok.Error()
}

func (c *client) awaitLost(t *testing.T) {
	t.Helper()
	select {
	case <-c.lost:
	case <-time.After(bound):
		t.Fatal("connection was not lost")
	}
}

func await(t *testing.T, p *faultproxy.Proxy, cond func(fault.Counts) bool) {
	t.Helper()
	require.NoError(t, p.Recorder().Await(context.Background(), bound, cond))
}

func TestPassesMQTTThroughAndNamesTheClient(t *testing.T) {
	b, p := setup(t, faultproxy.Config{})
	c := newClient(t, p, "dev-1", nil)
	require.NoError(t, c.connect(t))
	tok := c.Publish("t", 1, false, "hello")
	require.True(t, tok.WaitTimeout(bound))
	require.NoError(t, tok.Error())
	await(t, p, func(k fault.Counts) bool { return k.Accepted == 1 })
	a := p.Recorder().Attempts()
	require.Len(t, a, 1)
	assert.Equal(t, "dev-1", a[0].ClientID)
	assert.Equal(t, fault.Accepted, a[0].Outcome)
	assert.Equal(t, 1, b.Recorder().Counts().Accepted)
	assert.Equal(t, 1, p.Connections())
}

func TestDropAllClosesEveryConnectionAndStaysUp(t *testing.T) {
	b, p := setup(t, faultproxy.Config{})
	var clients []*client
	for _, id := range []string{"a", "b", "c"} {
		c := newClient(t, p, id, nil)
		require.NoError(t, c.connect(t))
		clients = append(clients, c)
	}
	assert.Equal(t, 3, p.DropAll())
	for _, c := range clients {
		c.awaitLost(t)
	}
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(k testbroker.Counts) bool { return k.Connected == 0 }))
	require.NoError(t, clients[0].connect(t), "the path stays up")
}

func TestOutageRefusesEveryConnectionUntilItEnds(t *testing.T) {
	b, p := setup(t, faultproxy.Config{})
	up := newClient(t, p, "up", nil)
	require.NoError(t, up.connect(t))
	p.BeginOutage()
	up.awaitLost(t)
	late := newClient(t, p, "late", nil)
	require.Error(t, late.connect(t))
	await(t, p, func(k fault.Counts) bool { return k.Refused == 1 })
	assert.Equal(t, 1, b.Recorder().Counts().Attempts, "the refused one never reached the broker")
	require.NoError(t, p.EndOutage())
	// A new client: paho completes a failed connect's token before it marks
	// the client disconnected, so connecting the same one again can race.
	require.NoError(t, newClient(t, p, "late", nil).connect(t))
	k := p.Recorder().Counts()
	assert.Equal(t, fault.Counts{Attempts: 3, Accepted: 2, Refused: 1}, k)
}

func TestInMemoryDialIsRefusedDuringAnOutage(t *testing.T) {
	_, p := setup(t, faultproxy.Config{})
	p.BeginOutage()
	_, err := p.Dial(context.Background())
	require.ErrorIs(t, err, faultproxy.ErrRefused)
	p.EndOutage()
	c, err := p.Dial(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// frozen is a clock that moves only when told.
type frozen struct {
	mu sync.Mutex
	t  time.Time
}

func (f *frozen) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }

func TestAdmissionRefusesOverTheLimit(t *testing.T) {
	clock := &frozen{t: time.Unix(1_000_000, 0)}
	b, p := setup(t, faultproxy.Config{Now: clock.now})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 1, Burst: 2, Mode: fault.RefuseOverLimit}))
	var admitted, refused int
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if newClient(t, p, id, nil).connect(t) == nil {
			admitted++
		} else {
			refused++
		}
	}
	assert.Equal(t, 2, admitted, "the burst, with the clock frozen")
	assert.Equal(t, 3, refused)
	await(t, p, func(k fault.Counts) bool { return k.Refused == 3 && k.Accepted == 2 })
	assert.Equal(t, 2, b.Recorder().Counts().Accepted, "the counts match what reached the broker")
}

func TestAdmissionHoldsOverTheLimitAndReturnsAbandonedTurns(t *testing.T) {
	_, p := setup(t, faultproxy.Config{})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 5, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "first", nil).connect(t))
	// The next one waits its turn (200 ms) and then goes through.
	require.NoError(t, newClient(t, p, "held", nil).connect(t))
	// One that gives up first is dropped, never passed on.
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "takes the burst", nil).connect(t))
	quitter := newClient(t, p, "quitter", func(o *paho.ClientOptions) { o.SetConnectTimeout(200 * time.Millisecond) })
	require.Error(t, quitter.connect(t))
	await(t, p, func(k fault.Counts) bool { return k.Accepted == 3 && k.Dropped == 1 })
}

// connectPacket is an MQTT 3.1.1 CONNECT for id.
func connectPacket(t *testing.T, id string) []byte {
	t.Helper()
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, id, 30
	var buf bytes.Buffer
	require.NoError(t, cp.Write(&buf))
	return buf.Bytes()
}

// lockedBuffer is a log the proxy's goroutines write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A held connection's bytes are kept up to MaxHeldBytes and no further:
// the client that sends one byte more is cut off, recorded and logged, and
// never reaches the broker, while held clients that send a CONNECT still
// get through. An in-memory connection's writes return only once the
// proxy has read every byte, which makes the boundary exact.
func TestHeldConnectionIsCutOffPastMaxHeldBytes(t *testing.T) {
	var log lockedBuffer
	b, p := setup(t, faultproxy.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "takes the burst", nil).connect(t))

	flood, err := p.Dial(context.Background()) // held for its turn, 1000 s away
	require.NoError(t, err)
	defer flood.Close()
	// Set before the proxy may close it: a closed pipe takes no deadline.
	require.NoError(t, flood.SetDeadline(time.Now().Add(bound)))
	held := make([]byte, faultproxy.MaxHeldBytes)
	copy(held, connectPacket(t, "flood")) // then zeros, up to the limit
	_, err = flood.Write(held)
	require.NoError(t, err, "up to MaxHeldBytes is read and kept")
	_, err = flood.Write([]byte{0})
	require.NoError(t, err, "the byte over it is read too")
	_, err = flood.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "and the client is cut off")

	await(t, p, func(k fault.Counts) bool { return k.Overflowed == 1 })
	a := p.Recorder().Attempts()
	require.Len(t, a, 2)
	assert.Equal(t, fault.Overflowed, a[1].Outcome)
	assert.Equal(t, "overflowed", a[1].Outcome.String())
	assert.Equal(t, "flood", a[1].ClientID, "named by the CONNECT it sent first")
	assert.Contains(t, log.String(), "client=flood")
	assert.Contains(t, log.String(), "cut off")
	assert.Equal(t, 1, b.Recorder().Counts().Attempts, "none of its bytes reached the broker")

	// Held clients that behave are let through as before: the next one
	// after the burst waits its turn (200 ms), CONNECT and all.
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 5, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "second", nil).connect(t))
	require.NoError(t, newClient(t, p, "held", nil).connect(t))
	await(t, p, func(k fault.Counts) bool { return k.Accepted == 3 })
	a = p.Recorder().Attempts()
	require.Len(t, a, 4)
	assert.Equal(t, fault.Accepted, a[3].Outcome)
	assert.Equal(t, "held", a[3].ClientID)
	assert.Equal(t, fault.Counts{Attempts: 4, Accepted: 3, Overflowed: 1}, p.Recorder().Counts())
}

// Over TCP, a held client that sends without pause (1 MiB, far more than
// the proxy keeps) sees its connection end, and the proxy records why.
func TestHeldClientSendingWithoutEndIsCutOff(t *testing.T) {
	_, p := setup(t, faultproxy.Config{})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "takes the burst", nil).connect(t))

	flood, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer flood.Close()
	require.NoError(t, flood.SetDeadline(time.Now().Add(bound)))
	sent := make(chan error, 1)
	go func() {
		chunk := make([]byte, 32<<10)
		var err error
		for n := 0; n < 1<<20 && err == nil; n += len(chunk) {
			_, err = flood.Write(chunk)
		}
		sent <- err
	}()
	_, err = flood.Read(make([]byte, 1))
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "the client sees its connection end, not %v", err)
	await(t, p, func(k fault.Counts) bool { return k.Overflowed == 1 })
	assert.Equal(t, fault.Overflowed, p.Recorder().Attempts()[1].Outcome)
	select {
	case <-sent: // its writes failed, or went into socket buffers before the reset
	case <-time.After(bound):
		t.Fatal("the client's writes did not end")
	}
}

// What a black hole swallows is read and thrown away: a client that sends
// without pause into one, on a connection open when it began or opened
// into it, is not cut off, and the proxy keeps none of it.
func TestBlackholeKeepsNothingOfWhatItSwallows(t *testing.T) {
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(echo(t))})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	linked, err := p.Dial(context.Background())
	require.NoError(t, err)
	defer linked.Close()
	require.NoError(t, linked.SetDeadline(time.Now().Add(bound)))
	_, err = linked.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(linked, make([]byte, 1)) // echoed: the link runs
	require.NoError(t, err)
	p.BeginBlackhole()
	hanging, err := p.Dial(context.Background())
	require.NoError(t, err)
	defer hanging.Close()
	require.NoError(t, hanging.SetDeadline(time.Now().Add(bound)))

	// An in-memory write returns once the proxy has read all of it.
	const sent = 16 << 20
	chunk := make([]byte, 64<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, c := range []net.Conn{linked, hanging} {
		for n := 0; n < sent; n += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				t.Fatalf("cut off after %d bytes: %v", n, err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(sent/4), "allocated while swallowing 2 x %d bytes", sent)
	assert.Equal(t, fault.Counts{Attempts: 2, Accepted: 1, Pending: 1}, p.Recorder().Counts())
	p.EndBlackhole()
	await(t, p, func(k fault.Counts) bool { return k.Dropped == 1 })
}

func TestAdmissionDisconnectsOverTheLimit(t *testing.T) {
	clock := &frozen{t: time.Unix(1_000_000, 0)}
	b, p := setup(t, faultproxy.Config{Now: clock.now})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 1, Burst: 1, Mode: fault.DisconnectOverLimit}))
	require.NoError(t, newClient(t, p, "a", nil).connect(t))
	require.Error(t, newClient(t, p, "b", nil).connect(t))
	await(t, p, func(k fault.Counts) bool { return k.Throttled == 1 })
	assert.Equal(t, 1, b.Recorder().Counts().Attempts)
}

func TestFlappingDropsEachSessionAfterItOpens(t *testing.T) {
	_, p := setup(t, faultproxy.Config{})
	require.NoError(t, p.SetFlapping(50*time.Millisecond))
	c := newClient(t, p, "flap", nil)
	require.NoError(t, c.connect(t))
	c.awaitLost(t)
	require.NoError(t, p.SetFlapping(0))
	require.NoError(t, c.connect(t))
	assert.Equal(t, 1, p.Connections())
}

// A black hole resets nothing: the device notices through its keepalive,
// a connection opened meanwhile hangs until the device gives up, and the
// path works again once it ends.
func TestBlackholeIsNoticedOnlyThroughKeepalive(t *testing.T) {
	b, p := setup(t, faultproxy.Config{})
	c := newClient(t, p, "nat", func(o *paho.ClientOptions) {
		o.SetKeepAlive(time.Second).SetPingTimeout(500 * time.Millisecond).SetConnectTimeout(300 * time.Millisecond)
	})
	require.NoError(t, c.connect(t))
	began := time.Now()
	p.BeginBlackhole()
	c.awaitLost(t)
	assert.GreaterOrEqual(t, time.Since(began), 500*time.Millisecond, "noticed by a missing PINGRESP, not a reset")
	require.Error(t, c.connect(t), "a new connection hangs until the connect timeout")
	await(t, p, func(k fault.Counts) bool { return k.Dropped == 1 })
	// The broker is told nothing; it notices the silence through its own
	// keepalive (1.5 x 1 s).
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(k testbroker.Counts) bool { return k.Connected == 0 }))
	assert.Equal(t, testbroker.CauseError, b.Recorder().Disconnects()[0].Cause)
	p.EndBlackhole()
	// A new client: paho completes a failed connect's token before it sets
	// the client disconnected, so the same client's next Connect can race it.
	require.NoError(t, newClient(t, p, "nat-again", nil).connect(t))
}

// serve accepts on a loopback port until the test ends, each connection
// handled in a goroutine of its own, and returns the address.
func serve(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); handle(c) }()
		}
	}()
	tb.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// echo is an upstream that sends back what it receives.
func echo(t *testing.T) string {
	return serve(t, func(c net.Conn) { _, _ = io.Copy(c, c); _ = c.Close() })
}

// rawUpstream is a TCP listener the test accepts from itself, behind a
// proxy listening on loopback.
func rawUpstream(t *testing.T) (*net.TCPListener, *faultproxy.Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(ln.Addr().String()), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	tl := ln.(*net.TCPListener)
	require.NoError(t, tl.SetDeadline(time.Now().Add(bound)))
	return tl, p
}

func TestLatencyKeepsTheBytesInOrder(t *testing.T) {
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(echo(t)), Seed: 7})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	require.NoError(t, p.SetLatency(2*time.Millisecond, 5*time.Millisecond))
	c, err := p.Dial(context.Background())
	require.NoError(t, err)
	defer c.Close()
	const n = 500
	var want bytes.Buffer
	go func() {
		for i := range n {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(i))
			if _, err := c.Write(b[:]); err != nil {
				return
			}
		}
	}()
	for i := range n {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		want.Write(b[:])
	}
	start := time.Now()
	got := make([]byte, want.Len())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(bound)))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, want.Bytes(), got, "every byte, in order, through jittered delays both ways")
	assert.GreaterOrEqual(t, time.Since(start), 4*time.Millisecond, "at least the latency, each way")
}

// A device's close reaches the broker as a close, and a reset as a reset,
// as they would without the proxy.
func TestClosesAndResetsPassOnAsTheyCame(t *testing.T) {
	ln, p := rawUpstream(t)
	for _, reset := range []bool{false, true} {
		d, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		_, err = d.Write([]byte("x")) // something for the proxy to pass, so that it dials through
		require.NoError(t, err)
		up, err := ln.Accept()
		require.NoError(t, err)
		require.NoError(t, up.SetReadDeadline(time.Now().Add(bound)))
		_, err = io.ReadFull(up, make([]byte, 1))
		require.NoError(t, err)
		if reset {
			require.NoError(t, d.(*net.TCPConn).SetLinger(0))
		}
		require.NoError(t, d.Close())
		_, err = up.Read(make([]byte, 1))
		if reset {
			assert.ErrorIs(t, err, syscall.ECONNRESET, "a reset arrives as a reset")
		} else {
			assert.ErrorIs(t, err, io.EOF, "a close arrives as a close")
		}
		_ = up.Close()
	}
}

// A session the proxy drops ends for the device as its broker's close and
// for the broker as a reset: the dialling host keeps no TIME_WAIT for it.
func TestDropAllClosesTheDeviceAndResetsTheBroker(t *testing.T) {
	ln, p := rawUpstream(t)
	d, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer d.Close()
	up, err := ln.Accept()
	require.NoError(t, err)
	defer up.Close()
	await(t, p, func(c fault.Counts) bool { return c.Accepted == 1 })
	require.Equal(t, 1, p.DropAll())
	require.NoError(t, up.SetReadDeadline(time.Now().Add(bound)))
	_, err = up.Read(make([]byte, 1))
	assert.ErrorIs(t, err, syscall.ECONNRESET, "the broker is reset")
	require.NoError(t, d.SetReadDeadline(time.Now().Add(bound)))
	_, err = d.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the device sees a close")
}

func TestInvalidSettingsAreErrors(t *testing.T) {
	_, err := faultproxy.New(faultproxy.Config{})
	require.ErrorIs(t, err, faultproxy.ErrInvalid)
	_, p := setup(t, faultproxy.Config{})
	require.ErrorIs(t, p.SetAdmission(fault.Admission{Rate: -1}), faultproxy.ErrInvalid)
	require.ErrorIs(t, p.SetAdmission(fault.Admission{Rate: 1, Mode: 9}), faultproxy.ErrInvalid)
	require.ErrorIs(t, p.SetAdmission(fault.Admission{Rate: 1, Mode: 9}), fault.ErrInvalid, "the Admission's own verdict too")
	require.ErrorIs(t, p.SetFlapping(-time.Second), faultproxy.ErrInvalid)
	require.ErrorIs(t, p.SetLatency(-1, 0), faultproxy.ErrInvalid)
}

func TestConnectClientID(t *testing.T) {
	for _, id := range []string{"dev-1", "", string(bytes.Repeat([]byte("x"), 300))} {
		cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
		cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, id, 30
		var buf bytes.Buffer
		require.NoError(t, cp.Write(&buf))
		got, ok := faultproxy.ConnectClientID(buf.Bytes())
		require.True(t, ok)
		assert.Equal(t, id, got)
		_, ok = faultproxy.ConnectClientID(buf.Bytes()[:buf.Len()-1])
		assert.False(t, ok, "cut short")
	}
	_, ok := faultproxy.ConnectClientID([]byte{0x16, 0x03, 0x01, 0x00, 0x10}) // a TLS ClientHello
	assert.False(t, ok)

	// MQTT 5: properties stand between the keepalive and the client ID.
	expiry, receive := uint32(86400), uint16(32)
	cp5 := packets5.NewControlPacket(packets5.CONNECT)
	c5 := cp5.Content.(*packets5.Connect)
	c5.ProtocolName, c5.ProtocolVersion, c5.ClientID, c5.KeepAlive = "MQTT", 5, "dev-5", 30
	c5.Properties = &packets5.Properties{SessionExpiryInterval: &expiry, ReceiveMaximum: &receive, AuthMethod: "x"}
	var buf bytes.Buffer
	_, err := cp5.WriteTo(&buf)
	require.NoError(t, err)
	id, level, ok := faultproxy.ParseConnect(buf.Bytes())
	require.True(t, ok)
	assert.Equal(t, "dev-5", id)
	assert.Equal(t, byte(5), level)
	_, _, ok = faultproxy.ParseConnect(buf.Bytes()[:buf.Len()-1])
	assert.False(t, ok, "cut short")
}

func FuzzConnectClientID(f *testing.F) {
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier = "MQTT", 4, "dev-1"
	var buf bytes.Buffer
	if err := cp.Write(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{0x10, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ok := faultproxy.ConnectClientID(b) // must not panic
		if !ok && id != "" {
			t.Fatalf("id %q without ok", id)
		}
	})
}

// TLS passes through untouched, mutual TLS included: the proxy sees bytes
// it cannot read (no client ID), and still counts and breaks the path.
func TestMutualTLSPassesThroughEndToEnd(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TLS, MutualTLS: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	u, err := url.Parse(b.URL())
	require.NoError(t, err)
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(u.Host), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	tlsConfig, err := b.ClientTLSConfig("dev-tls")
	require.NoError(t, err)
	c := newClient(t, p, "dev-tls", func(o *paho.ClientOptions) {
		o.Servers = nil
		o.AddBroker("ssl://" + p.Addr()).SetTLSConfig(tlsConfig)
	})
	require.NoError(t, c.connect(t))
	await(t, p, func(k fault.Counts) bool { return k.Accepted == 1 })
	assert.Empty(t, p.Recorder().Attempts()[0].ClientID, "the CONNECT travels encrypted")
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(k testbroker.Counts) bool { return k.Accepted == 1 }))
	assert.Equal(t, "dev-tls", b.Recorder().Attempts()[0].ClientID, "the broker authenticated the device itself")
	p.DropAll()
	c.awaitLost(t)
}

// holdOne dials the proxy in memory, to be held for its turn, with a
// deadline set before the proxy may close it (a closed pipe takes none).
func holdOne(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	c, err := p.Dial(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(bound)))
	return c
}

// The hold keeps at most MaxHeld connections: the next is refused, once
// logged, and a place comes free when a held client leaves.
func TestHoldIsCappedInConnections(t *testing.T) {
	var log lockedBuffer
	_, p := setup(t, faultproxy.Config{MaxHeld: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "takes the burst", nil).connect(t))

	first := holdOne(t, p)
	holdOne(t, p)
	for range 3 {
		_, err := p.Dial(context.Background())
		require.ErrorIs(t, err, faultproxy.ErrRefused, "a third held at once")
	}
	assert.Equal(t, 1, strings.Count(log.String(), "hold full"), "logged once, not per refusal")

	require.NoError(t, first.Close())
	await(t, p, func(k fault.Counts) bool { return k.Dropped == 1 })
	holdOne(t, p) // its place
	_, err := p.Dial(context.Background())
	require.ErrorIs(t, err, faultproxy.ErrRefused)
	assert.Equal(t, fault.Counts{Attempts: 8, Pending: 2, Accepted: 1, Refused: 4, Dropped: 1}, p.Recorder().Counts())
	assert.Equal(t, 2, strings.Count(log.String(), "hold full"), "full again after a place came free")
}

// All held connections together keep at most MaxHeldTotal bytes: the
// client whose bytes would go over is cut off, though it is under
// MaxHeldBytes itself, and what a client that leaves had sent is given
// back. An in-memory write returns once the proxy has read it, and one
// connection's bytes are counted before its next read: a's second write
// returning means its first is counted, whatever the scheduler does.
func TestHoldIsCappedInBytes(t *testing.T) {
	_, p := setup(t, faultproxy.Config{MaxHeldTotal: 32 << 10})
	require.NoError(t, p.SetAdmission(fault.Admission{Rate: 0.001, Burst: 1, Mode: fault.PauseOverLimit}))
	require.NoError(t, newClient(t, p, "takes the burst", nil).connect(t))

	a, b := holdOne(t, p), holdOne(t, p)
	for _, n := range []int{16 << 10, 1} { // 16 KiB counted, the last byte perhaps not yet
		_, err := a.Write(make([]byte, n))
		require.NoError(t, err)
	}
	_, err := b.Write(make([]byte, 16<<10-1))
	require.NoError(t, err, "at most 32 KiB together")
	_, err = b.Write([]byte{0, 0})
	require.NoError(t, err, "the bytes over it are read")
	_, err = b.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "and the client that took the total over is cut off")
	await(t, p, func(k fault.Counts) bool { return k.Overflowed == 1 })

	require.NoError(t, a.Close())
	await(t, p, func(k fault.Counts) bool { return k.Dropped == 1 })
	c := holdOne(t, p)
	for _, n := range []int{32<<10 - 1, 1} { // a cut off on the first would fail the second
		_, err = c.Write(make([]byte, n))
		require.NoError(t, err, "what the two had kept was given back")
	}
	assert.Equal(t, fault.Counts{Attempts: 4, Pending: 1, Accepted: 1, Overflowed: 1, Dropped: 1}, p.Recorder().Counts())
}

func TestHoldCapsMustNotBeNegative(t *testing.T) {
	for _, cfg := range []faultproxy.Config{{MaxHeld: -1}, {MaxHeldTotal: -1}} {
		cfg.Upstream = faultproxy.Upstream("127.0.0.1:1")
		_, err := faultproxy.New(cfg)
		require.ErrorIs(t, err, faultproxy.ErrInvalid)
	}
}

// A client may write its CONNECT in pieces (paho.golang writes the fixed
// header, then the rest), and a read may get the first alone: the proxy
// still names the connection by its client ID and protocol.
func TestACONNECTInPiecesIsNamed(t *testing.T) {
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(echo(t))})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	c, err := p.Dial(context.Background())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(bound)))
	body := append([]byte{0, 4, 'M', 'Q', 'T', 'T', 5, 2, 0, 60, 0}, 0, 7)
	body = append(body, "split-1"...)
	connect := append([]byte{0x10, byte(len(body))}, body...)
	// an in-memory write returns once read
	for _, piece := range [][]byte{connect[:2], connect[2:9], connect[9:]} {
		_, err = c.Write(piece)
		require.NoError(t, err)
	}
	_, err = io.ReadFull(c, make([]byte, len(connect))) // echoed: every piece went through
	require.NoError(t, err)
	a := p.Recorder().Attempts()
	require.Len(t, a, 1)
	assert.Equal(t, "split-1", a[0].ClientID)
	assert.Equal(t, byte(5), a[0].Protocol)
}

// With Identify, an outage reads each connection's CONNECT before its
// reset, so that the refused attempts carry their client IDs; without it
// they carry none (a down broker reads nothing). The refusal is the same
// to the client either way, over TCP and in memory (Dial).
func TestIdentifyNamesTheRefusedAttempts(t *testing.T) {
	for _, c := range []struct{ identify, inMemory bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("identify=%v/memory=%v", c.identify, c.inMemory), func(t *testing.T) {
			identify := c.identify
			b, p := setup(t, faultproxy.Config{Identify: identify})
			p.BeginOutage()
			var tune func(*paho.ClientOptions)
			if c.inMemory {
				tune = func(o *paho.ClientOptions) {
					o.SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) { return p.Dial(context.Background()) })
				}
			}
			require.Error(t, newClient(t, p, "dev-7", tune).connect(t))
			await(t, p, func(k fault.Counts) bool { return k.Refused == 1 })
			a := p.Recorder().Attempts()
			require.Len(t, a, 1)
			assert.Equal(t, fault.Refused, a[0].Outcome)
			if identify {
				assert.Equal(t, "dev-7", a[0].ClientID)
				assert.Equal(t, byte(4), a[0].Protocol)
			} else {
				assert.Empty(t, a[0].ClientID)
			}
			assert.Zero(t, b.Recorder().Counts().Attempts, "the broker saw none")
		})
	}
}

// A connection that sends nothing while identified is reset once
// IdentifyTimeout passes, and costs nothing after.
func TestIdentifyGivesUpOnASilentConnection(t *testing.T) {
	_, p := setup(t, faultproxy.Config{Identify: true, IdentifyTimeout: 50 * time.Millisecond})
	p.BeginOutage()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	await(t, p, func(k fault.Counts) bool { return k.Refused == 1 })
	_ = c.SetReadDeadline(time.Now().Add(bound))
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "reset")
	assert.Empty(t, p.Recorder().Attempts()[0].ClientID)
}

// Sessions counts the connections the broker answered that are still
// open; each attempt says when it was answered and when it ended.
func TestSessionsAreTheAnsweredConnectionsStillOpen(t *testing.T) {
	_, p := setup(t, faultproxy.Config{})
	for _, id := range []string{"a", "b"} {
		require.NoError(t, newClient(t, p, id, nil).connect(t))
	}
	awaitSessions(t, p, 2)
	p.DropAll()
	awaitSessions(t, p, 0)
	for _, a := range p.Recorder().Attempts() {
		assert.False(t, a.Answered.IsZero())
		assert.False(t, a.Ended.Before(a.Answered), "ended after it was answered")
	}
}

// MaxConns bounds the connections held at once: one more is refused and
// logged, and once one ends the next is let through.
func TestMaxConnsRefusesOneMore(t *testing.T) {
	var log lockedBuffer
	_, p := setup(t, faultproxy.Config{MaxConns: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	a, b := newClient(t, p, "a", nil), newClient(t, p, "b", nil)
	require.NoError(t, a.connect(t))
	require.NoError(t, b.connect(t))
	require.Error(t, newClient(t, p, "c", nil).connect(t))
	assert.Contains(t, log.String(), "connection limit reached")
	assert.Contains(t, log.String(), "descriptors=4")
	a.Disconnect(0)
	awaitSessions(t, p, 1)
	require.NoError(t, newClient(t, p, "d", nil).connect(t))
}

func awaitSessions(t *testing.T, p *faultproxy.Proxy, n int) {
	t.Helper()
	require.NoError(t, p.Recorder().AwaitSessions(context.Background(), bound, func(s int) bool { return s == n }))
}
