package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// balanced reports whether s accounts for every message the queue held.
func balanced(s publisher.Stats) bool {
	return s.Restored+s.Enqueued == s.Delivered+s.DroppedOldest+uint64(s.Queued)
}

// connected starts an agent on b and waits for its session.
func connected(t *testing.T, b *testbroker.Broker) (*device.Agent, func()) {
	t.Helper()
	agent := fastAgent(t, b, make(chan device.Event, 1))
	require.NoError(t, agent.Start(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	require.NoError(t, agent.AwaitConnection(ctx))
	return agent, func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		require.NoError(t, agent.Stop(ctx))
	}
}

// startRun runs p.Run until the returned stop is called.
func startRun(p *publisher.Publisher) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return func() error { cancel(); return <-done }
}

// TestDroppedInFlightIsNotDelivered: DropOldest removes the message Run has
// in flight; its PUBACK arrives later. It is counted once, as dropped.
func TestDroppedInFlightIsNotDelivered(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, err)
	defer b.Close()
	agent, stopAgent := connected(t, b)
	defer stopAgent()
	p, err := publisher.New(publisher.Config{Session: agent, MaxMessages: 2, DrainRate: 1000, DrainBurst: 100})
	require.NoError(t, err)
	defer p.Close()
	stop := startRun(p)

	b.Faults().DelayPubacks(true)
	_, err = p.Publish("t", []byte("1"))
	require.NoError(t, err)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes == 1 }), "1 is in flight")
	for _, m := range []string{"2", "3"} {
		_, err = p.Publish("t", []byte(m))
		require.NoError(t, err)
	}
	s := p.Stats()
	assert.Equal(t, uint64(1), s.DroppedOldest, "1 dropped while in flight")
	assert.True(t, balanced(s), "%+v", s)
	b.Faults().DelayPubacks(false) // 1's PUBACK, then 2 and 3
	flush(t, p)
	s = p.Stats()
	assert.Equal(t, publisher.Stats{Enqueued: 3, Delivered: 2, DroppedOldest: 1}, s)
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestStatsBalanceAtEveryInstant is the property: whatever the interleaving
// of concurrent Publish calls, drops and deliveries (and sessions dropped
// under them), every snapshot of Stats balances, and Enqueued + Rejected is
// exactly what Publish accepted and refused. 12 seeds, each its own bounds
// and overflow policy.
func TestStatsBalanceAtEveryInstant(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, err)
	defer b.Close()
	agent, stopAgent := connected(t, b)
	defer stopAgent()
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			retry, err := reconnect.New(reconnect.Constant{Interval: 5 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
			require.NoError(t, err)
			cfg := publisher.Config{Session: agent, MaxMessages: 3 + r.IntN(20), DrainRate: 20_000, DrainBurst: 50,
				PublishTimeout: 2 * time.Second, Retry: retry}
			if seed%2 == 0 {
				cfg.Overflow = publisher.RejectNew
			}
			if seed%3 == 0 {
				cfg.MaxBytes = int64(200 + r.IntN(400))
			}
			p, err := publisher.New(cfg)
			require.NoError(t, err)
			defer p.Close()
			stop := startRun(p)

			var accepted, refused atomic.Uint64
			var producers sync.WaitGroup
			for g := 0; g < 4; g++ {
				producers.Add(1)
				go func(src *rand.Rand) {
					defer producers.Done()
					for i := 0; i < 400; i++ {
						_, err := p.Publish("t", make([]byte, src.IntN(60)))
						switch {
						case err == nil:
							accepted.Add(1)
						case errors.Is(err, publisher.ErrQueueFull):
							refused.Add(1)
						default:
							t.Error(err)
							return
						}
						if i%10 == 9 {
							runtime.Gosched()
						}
					}
				}(rand.New(rand.NewPCG(seed, uint64(g))))
			}
			if seed%4 == 1 {
				b.Faults().DropAll() // failures in flight, a reconnect under the producers
			}
			checks := 0
			producing := make(chan struct{})
			go func() { producers.Wait(); close(producing) }()
			for done := false; !done; checks++ {
				select {
				case <-producing:
					done = true
				default:
				}
				s := p.Stats()
				require.True(t, balanced(s), "snapshot %d: %+v", checks, s)
			}
			flush(t, p)
			s := p.Stats()
			require.True(t, balanced(s), "%+v", s)
			require.Equal(t, accepted.Load(), s.Enqueued)
			require.Equal(t, refused.Load(), s.Rejected)
			require.Zero(t, s.Queued)
			t.Logf("%d snapshots; %+v", checks, s)
			require.ErrorIs(t, stop(), context.Canceled)
		})
	}
}

// TestExhaustedRetryPolicyDoesNotSpin: with a cap of 2 retries, a message
// the broker never acknowledges is attempted exactly 3 times, with the
// policy's waits between, and then Run returns ErrExhausted with the message
// still queued; the next Run delivers it.
func TestExhaustedRetryPolicyDoesNotSpin(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, err)
	defer b.Close()
	agent, stopAgent := connected(t, b)
	defer stopAgent()
	clock := fakeclock.New(time.Unix(0, 0))
	retry, err := reconnect.New(reconnect.Constant{Interval: time.Minute}, reconnect.Limits{MaxRetries: 2})
	require.NoError(t, err)
	p, err := publisher.New(publisher.Config{Session: agent, Retry: retry, Clock: clock, PublishTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	b.Faults().DropPublishes(true)
	_, err = p.Publish("t", []byte("never acknowledged"))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	for attempt := 1; attempt <= 2; attempt++ {
		pending, err := clock.WaitTimers(1, bound) // the minute after each failure
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{time.Minute}, pending)
		require.Equal(t, attempt, b.Recorder().Counts().DroppedPublishes, "one attempt per wait")
		clock.Advance(time.Minute)
	}
	select {
	case err := <-done:
		require.ErrorIs(t, err, reconnect.ErrExhausted)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the last publish's own error")
	case <-time.After(bound):
		t.Fatalf("Run did not give up; %d attempts so far", b.Recorder().Counts().DroppedPublishes)
	}
	assert.Equal(t, 3, b.Recorder().Counts().DroppedPublishes)
	s := p.Stats()
	assert.Equal(t, uint64(3), s.Failures)
	assert.Equal(t, 1, s.Queued, "the message stays queued")

	b.Faults().DropPublishes(false)
	stop := startRun(p)
	flush(t, p)
	require.ErrorIs(t, stop(), context.Canceled)
	assert.Equal(t, uint64(1), p.Stats().Delivered)
}
