package publisher_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

const bound = 30 * time.Second

// seqDigest records only the envelope's sequence number.
func seqDigest(payload []byte) []byte {
	e, err := publisher.DecodeEnvelope(payload)
	if err != nil {
		return nil
	}
	return binary.BigEndian.AppendUint64(nil, e.Seq)
}

// fastAgent is an agent whose waits are milliseconds, on the real clock.
func fastAgent(t *testing.T, b *testbroker.Broker, events chan device.Event) *device.Agent {
	p, err := reconnect.New(reconnect.Constant{Interval: 5 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	require.NoError(t, err)
	tm := device.DefaultTiming()
	tm.Policy, tm.BootSpread, tm.Guard = p, time.Millisecond, nil
	a, err := device.New(device.Config{Broker: b.URL(), ClientID: "dev-1", Dial: b.DialContext, Timing: &tm,
		Source: rand.NewPCG(1, 2), ConnectTimeout: 2 * time.Second,
		OnEvent: func(e device.Event) {
			select {
			case events <- e:
			default:
			}
		}})
	require.NoError(t, err)
	return a
}

// seen returns how often each sequence number reached the broker.
func seen(b *testbroker.Broker) map[uint64]int {
	out := map[uint64]int{}
	for _, p := range b.Recorder().Publishes() {
		if len(p.Payload) == 8 {
			out[binary.BigEndian.Uint64(p.Payload)]++
		}
	}
	return out
}

// awaitAllSeen waits until the broker has recorded every sequence number
// 1..total. (An empty queue is not enough: mochi sends the PUBACK before its
// OnPublished hook records the message.)
func awaitAllSeen(t *testing.T, b *testbroker.Broker, total int) map[uint64]int {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got := seen(b)
		if len(got) >= total {
			return got
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d sequence numbers arrived", len(got), total)
		n := b.Recorder().Counts().Publishes
		_ = b.Recorder().Await(context.Background(), time.Second, func(c testbroker.Counts) bool { return c.Publishes > n })
	}
}

// TestNothingLostAcrossRestartsAndDrops publishes 1,000 numbered messages
// while the broker goes down and comes back 10 times and drops everyone 5
// times; the broker must see every sequence number, duplicates allowed and
// counted, gaps never.
func TestNothingLostAcrossRestartsAndDrops(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory, PayloadDigest: seqDigest})
	require.NoError(t, err)
	defer b.Close()
	events := make(chan device.Event, 4096)
	agent := fastAgent(t, b, events)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, agent.Start(ctx))
	retry, _ := reconnect.New(reconnect.Constant{Interval: 5 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	pub, err := publisher.New(publisher.Config{Session: agent, DrainRate: 5000, DrainBurst: 50, Retry: retry,
		PublishTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer pub.Close()
	runDone := make(chan error, 1)
	go func() { runDone <- pub.Run(ctx) }()

	awaitEvent := func(kind device.EventKind) {
		t.Helper()
		deadline := time.After(bound)
		for {
			select {
			case e := <-events:
				if e.Kind == kind {
					return
				}
			case <-deadline:
				t.Fatalf("no %v event", kind)
			}
		}
	}
	const total, faults = 1000, 15
	outages, drops := 0, 0
	for i := 1; i <= total; i++ {
		_, err := pub.Publish("telemetry/dev-1", []byte(fmt.Sprintf("reading %d", i)))
		require.NoError(t, err)
		if i%(total/faults) != 0 || outages+drops == faults {
			continue
		}
		// Let some of this batch reach the broker, then knock it over.
		n := len(seen(b))
		require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes > n }))
		for len(events) > 0 {
			<-events
		}
		if outages < 10 && (drops == 5 || (outages+drops)%3 != 2) {
			b.Faults().BeginOutage()
			awaitEvent(device.EventAttemptFailed) // the agent met the closed door
			require.NoError(t, b.Faults().EndOutage())
			outages++
		} else {
			b.Faults().DropAll()
			drops++
		}
		awaitEvent(device.EventConnected)
	}
	require.Equal(t, 10, outages)
	require.Equal(t, 5, drops)
	got := awaitAllSeen(t, b, total)
	dups := 0
	for seq := uint64(1); seq <= total; seq++ {
		require.Positive(t, got[seq], "sequence %d never reached the broker", seq)
		dups += got[seq] - 1
	}
	require.Len(t, got, total, "no sequence number outside 1..%d", total)
	st := pub.Stats()
	require.Equal(t, uint64(total), st.Enqueued)
	require.Zero(t, st.DroppedOldest)
	t.Logf("1,000 messages through 10 outages and 5 drops: %d delivered, %d duplicates at the broker, %d failed publishes retried, %d reconnects",
		st.Delivered, dups, st.Failures, agent.Stats().Connects-1)

	cancel()
	require.ErrorIs(t, <-runDone, context.Canceled)
	stopCtx, stop := context.WithTimeout(context.Background(), bound)
	defer stop()
	require.NoError(t, agent.Stop(stopCtx))
}

// TestPersistentSessionKeepsUnacknowledgedMessage: with Session.Persistent a
// message the broker never acknowledged is in flight across a broker
// restart; the session resumes and paho resends it, completing the original
// publish before any PUBACK. The publisher must keep the message until a
// PUBACK really comes, then deliver it.
func TestPersistentSessionKeepsUnacknowledgedMessage(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory, PayloadDigest: seqDigest})
	require.NoError(t, err)
	defer b.Close()
	p, err := reconnect.New(reconnect.Constant{Interval: 5 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	require.NoError(t, err)
	tm := device.DefaultTiming()
	tm.Policy, tm.BootSpread, tm.Guard = p, time.Millisecond, nil
	events := make(chan device.Event, 100)
	agent, err := device.New(device.Config{Broker: b.URL(), ClientID: "dev-p", Dial: b.DialContext, Timing: &tm,
		Source: rand.NewPCG(1, 2), Session: device.Session{Persistent: true},
		OnEvent: func(e device.Event) {
			select {
			case events <- e:
			default:
			}
		}})
	require.NoError(t, err)
	require.NoError(t, agent.Start(context.Background()))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		require.NoError(t, agent.Stop(ctx))
	}()
	awaitConnected := func(resumed bool) {
		t.Helper()
		deadline := time.After(bound)
		for {
			select {
			case e := <-events:
				if e.Kind == device.EventConnected {
					require.Equal(t, resumed, e.SessionPresent)
					return
				}
			case <-deadline:
				t.Fatal("no connection")
			}
		}
	}
	awaitConnected(false)
	pub, err := publisher.New(publisher.Config{Session: agent, Retry: p, PublishTimeout: bound, DrainRate: 1000, DrainBurst: 10})
	require.NoError(t, err)
	defer pub.Close()
	stop := startRun(pub)

	b.Faults().DropPublishes(true)
	seq, err := pub.Publish("telemetry/dev-p", []byte("precious"))
	require.NoError(t, err)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.DroppedPublishes == 1 }))
	b.Faults().BeginOutage() // the broker restarts with the message unacknowledged
	require.NoError(t, b.Faults().EndOutage())
	awaitConnected(true)
	// paho's resend on the resumed session, then the publisher's own.
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.DroppedPublishes == 3 }))
	s := pub.Stats()
	require.Zero(t, s.Delivered, "no PUBACK yet: %+v", s)
	require.Equal(t, 1, s.Queued)

	b.Faults().DropPublishes(false)
	b.Faults().DropAll() // the next resumed session acknowledges
	flush(t, pub)
	require.Equal(t, uint64(1), pub.Stats().Delivered)
	require.Positive(t, seen(b)[seq], "the message reached the broker")
	require.ErrorIs(t, stop(), context.Canceled)
}
