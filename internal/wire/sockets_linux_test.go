package wire_test

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/waitfor"
	"github.com/herdguard/herdguard/internal/wire"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// tally is a member.Log that counts what each device told it.
type tally struct {
	mu              sync.Mutex
	changed         waitfor.Broadcast
	begun, lost     map[int]int
	ended           map[int]map[fault.Outcome]int
	accepted, drops int
}

func newTally() *tally {
	return &tally{begun: map[int]int{}, lost: map[int]int{}, ended: map[int]map[fault.Outcome]int{}}
}

func (t *tally) Begin(_ time.Time, i int, _ time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.begun[i]++
	t.changed.Notify()
}

func (t *tally) End(_ time.Time, i int, o fault.Outcome, _, _ int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended[i] == nil {
		t.ended[i] = map[fault.Outcome]int{}
	}
	t.ended[i][o]++
	t.changed.Notify()
}

func (t *tally) Lost(_ time.Time, i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lost[i]++
	t.changed.Notify()
}

// await waits for cond, read under the tally's lock.
func (t *tally) await(tb testing.TB, cond func() bool) {
	tb.Helper()
	require.NoError(tb, waitfor.Until(&t.mu, &t.changed, time.Minute, cond))
}

// quick is a timing that retries within tens of milliseconds: a real-time
// test waits for states, never for a policy's seconds.
func quick(t *testing.T) *device.Timing {
	t.Helper()
	p, err := reconnect.New(reconnect.FullJitter{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond},
		reconnect.Limits{MaxRetries: reconnect.RetryForever})
	require.NoError(t, err)
	tm := device.DefaultTiming()
	tm.Policy, tm.BootSpread, tm.Guard = p, 200*time.Millisecond, nil
	return &tm
}

// fleetOf starts n wire devices, device i on endpointOf(i), on the
// engine's own sockets.
func fleetOf(t *testing.T, n int, endpointOf func(i int) string, log member.Log, v5 bool) *wire.Fleet {
	t.Helper()
	return telemetered(t, n, endpointOf, log, v5, 0)
}

// telemetered is fleetOf with a reading every so often.
func telemetered(t *testing.T, n int, endpointOf func(i int) string, log member.Log, v5 bool, every time.Duration) *wire.Fleet {
	t.Helper()
	timing := quick(t)
	protocol := device.MQTT311
	if v5 {
		protocol = device.MQTT5
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	f, err := wire.New(ids, func(i int) member.Config {
		return member.Config{Broker: endpointOf(i), Timing: timing, Protocol: protocol, KeepAlive: 2 * time.Second,
			PingTimeout: time.Second, ConnectTimeout: 500 * time.Millisecond, Seed: 7, Log: log,
			Telemetry: member.Telemetry{Every: every}}
	})
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	t.Cleanup(func() { _ = f.Stop(context.Background()) })
	return f
}

// Real sockets on the engine's epoll loops: a fleet connects to the
// in-process broker over loopback TCP, comes back after the broker drops
// every session, and leaves with a DISCONNECT each.
func TestOwnSocketsConnectReconnectAndLeave(t *testing.T) {
	for _, v5 := range []bool{false, true} {
		t.Run(map[bool]string{false: "3.1.1", true: "5"}[v5], func(t *testing.T) {
			b, err := testbroker.New(testbroker.Config{})
			require.NoError(t, err)
			defer b.Close()
			const n = 300
			log := newTally()
			f := fleetOf(t, n, func(int) string { return b.URL() }, log, v5)
			assert.Equal(t, n, f.Devices())
			up := func(c testbroker.Counts) bool { return c.Connected == n }
			require.NoError(t, b.Recorder().Await(context.Background(), time.Minute, up))

			assert.Equal(t, n, b.Faults().DropAll())
			log.await(t, func() bool { return len(log.lost) == n })
			require.NoError(t, b.Recorder().Await(context.Background(), time.Minute, func(c testbroker.Counts) bool {
				return c.Connected == n && c.Accepted == 2*n
			}))

			require.NoError(t, f.Stop(context.Background()))
			require.NoError(t, b.Recorder().Await(context.Background(), time.Minute, func(c testbroker.Counts) bool {
				return c.Connected == 0
			}))
			assert.Equal(t, n, b.Recorder().Counts().Disconnects-n, "the drop's, then one DISCONNECT a device at Stop")
		})
	}
}

// Readings over real sockets: each device's reach the broker QoS 1, in
// the publisher's envelope, in order, each once, across a drop of every
// session.
func TestOwnSocketsCarryTelemetryInOrder(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	const n = 50
	f := telemetered(t, n, func(int) string { return b.URL() }, nil, true, 20*time.Millisecond)
	require.NoError(t, b.Recorder().Await(context.Background(), time.Minute, func(c testbroker.Counts) bool { return c.Publishes >= 5*n }))
	b.Faults().DropAll()
	require.NoError(t, b.Recorder().Await(context.Background(), time.Minute, func(c testbroker.Counts) bool { return c.Publishes >= 20*n }))
	f.StopTelemetry()
	require.NoError(t, f.Stop(context.Background()))
	next := map[string]uint64{}
	for _, p := range b.Recorder().Publishes() {
		e, err := publisher.DecodeEnvelope(p.Payload)
		require.NoError(t, err)
		assert.Equal(t, byte(1), p.QoS)
		assert.Equal(t, "telemetry/"+p.ClientID, p.Topic)
		if e.Seq < next[p.ClientID]+1 {
			continue // sent again after the drop: the envelope's rule counts it once
		}
		assert.Equal(t, next[p.ClientID]+1, e.Seq, "%s: in order, none skipped", p.ClientID)
		next[p.ClientID] = e.Seq
	}
	assert.Len(t, next, n)
	s := f.Stats()
	assert.Positive(t, s.Delivered)
	assert.LessOrEqual(t, s.Delivered, s.Enqueued)
}

// hostile is a listener that answers every connection with answer, and
// counts the connections that reached it and that the device closed.
type hostile struct {
	ln             net.Listener
	mu             sync.Mutex
	changed        waitfor.Broadcast
	accepted, shut int
	wg             sync.WaitGroup
}

func listen(t *testing.T, answer func(c net.Conn)) *hostile {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hostile{ln: ln}
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.count(&h.accepted)
			h.wg.Go(func() {
				defer c.Close()
				answer(c)
				_, _ = io.Copy(io.Discard, c) // until the device closes it
				h.count(&h.shut)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		h.wg.Wait()
	})
	return h
}

func (h *hostile) count(n *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*n++
	h.changed.Notify()
}

func (h *hostile) url() string { return "tcp://" + h.ln.Addr().String() }

// A broker that sends garbage, a packet over the firmware's bound, or
// nothing at all costs its device that connection, never the loop: the
// device closes it and retries on its policy, and the rest of the fleet,
// on the same loops, connects.
func TestAHostileBrokerCostsOneConnection(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	// Attempts that fail: 0x20 with a remaining length in five bytes; a CONNACK declaring
	// 2 MiB; a PINGRESP where a CONNACK belongs; silence
	answers := []func(net.Conn){
		func(c net.Conn) { _, _ = c.Write([]byte{0x20, 0x80, 0x80, 0x80, 0x80, 0x01}) },
		func(c net.Conn) { _, _ = c.Write([]byte{0x20, 0x80, 0x80, 0x80, 0x01}) },
		func(c net.Conn) { _, _ = c.Write([]byte{0xD0, 0x00}) },
		func(net.Conn) {},
	}
	var hosts []*hostile
	for _, a := range answers {
		hosts = append(hosts, listen(t, a))
	}
	// a session, then a packet over the bound: the session is lost
	midway := listen(t, func(c net.Conn) {
		_, _ = c.Write([]byte{0x20, 0x02, 0, 0})
		_, _ = c.Write([]byte{0x30, 0x80, 0x80, 0x80, 0x01})
	})
	hosts = append(hosts, midway)
	const n = 100
	log := newTally()
	fleetOf(t, n, func(i int) string {
		if i < len(hosts) {
			return hosts[i].url()
		}
		return b.URL()
	}, log, false)
	require.NoError(t, b.Recorder().Await(context.Background(), time.Minute, func(c testbroker.Counts) bool {
		return c.Connected == n-len(hosts)
	}))
	log.await(t, func() bool { return log.lost[len(hosts)-1] >= 3 })
	hosts = hosts[:len(hosts)-1]
	for k, h := range hosts {
		// three attempts, each closed by the device: on the header, or at
		// the connect timeout
		require.NoError(t, waitfor.Until(&h.mu, &h.changed, time.Minute, func() bool { return h.shut >= 3 }), "host %d", k)
		log.await(t, func() bool { return log.ended[k][fault.Dropped] >= 3 })
		log.mu.Lock()
		assert.Zero(t, log.ended[k][fault.Accepted], "host %d", k)
		log.mu.Unlock()
	}
}

// Over mutual TLS the devices' connections are the TLS dialer's net.Conns
// (two goroutines each): a fleet connects to the in-process broker, every
// session dropped, every device back.
func TestTLSConnectionsComeBack(t *testing.T) {
	p := fleetsimtest.Plan(plan.DropAll, "full", 50)
	p.Engine, p.Transport, p.TimeScale = plan.Wire, plan.TLS, 20
	r, err := fleetsim.Run(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, "tls", r.Transport)
	assert.True(t, r.Recovery.AllRecovered)
	assert.GreaterOrEqual(t, r.Attempts.Total, int64(50))
}

// A fleet built and stopped without starting holds no descriptor after:
// its loops' epoll instances are released by Stop.
func TestAFleetNeverStartedLeavesNoDescriptor(t *testing.T) {
	open := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(entries)
	}
	before := open()
	f, err := wire.New([]int{0, 1, 2, 3}, func(int) member.Config {
		return member.Config{Broker: "tcp://127.0.0.1:1", Timing: quick(t), KeepAlive: 2 * time.Second, ConnectTimeout: time.Second}
	})
	require.NoError(t, err)
	require.NoError(t, f.Stop(context.Background()))
	require.NoError(t, f.Stop(context.Background()), "twice, as a fleet's cleanup may")
	assert.Equal(t, before, open())
}
