package reconnect_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/reconnect"
)

const bound = 5 * time.Second // real-time bound on any wait for an event

var errFlaky = errors.New("flaky")

// runRetry starts r.Do in a goroutine and returns a channel with its result.
func runRetry(ctx context.Context, r reconnect.Retry, op func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- r.Do(ctx, op) }()
	return done
}

func awaitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatal("retry loop did not return")
		return nil
	}
}

func TestRetryWaitsThePolicyAndStopsAtCap(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	p := mustPolicy(t, reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 3})
	var mu sync.Mutex
	var notices []reconnect.Notice
	calls := 0
	r := reconnect.Retry{
		Policy: p, Clock: clock, Source: rand.NewPCG(9, 9),
		Notify: func(n reconnect.Notice) { mu.Lock(); notices = append(notices, n); mu.Unlock() },
	}
	done := runRetry(context.Background(), r, func(context.Context) error { calls++; return errFlaky })

	seeds := rand.NewPCG(9, 9) // Do seeds its own generator with two draws
	ref := reconnect.NewBackoff(p, rand.NewPCG(seeds.Uint64(), seeds.Uint64()))
	for i := 0; i < 3; i++ {
		moved, err := clock.AdvanceToNext(bound)
		require.NoError(t, err)
		want, _ := ref.Next(time.Unix(0, 0))
		assert.Equal(t, want, moved, "wait %d", i)
	}
	err := awaitResult(t, done)
	assert.ErrorIs(t, err, reconnect.ErrExhausted)
	assert.ErrorIs(t, err, errFlaky)
	var re *reconnect.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 4, re.Attempts)
	assert.Equal(t, 4, calls)
	assert.Contains(t, err.Error(), "4 attempts")
	assert.Empty(t, clock.Pending(), "no wait after the final attempt")
	require.Len(t, notices, 3)
	for i, n := range notices {
		assert.Equal(t, i+1, n.Attempt)
		assert.ErrorIs(t, n.Cause, errFlaky)
	}
}

func TestRetrySucceedsAfterFailures(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	p := mustPolicy(t, reconnect.Constant{Interval: time.Second}, reconnect.Limits{MaxRetries: 10})
	calls := 0
	v := make(chan int, 1)
	go func() {
		n, err := reconnect.DoValue(context.Background(), reconnect.Retry{Policy: p, Clock: clock},
			func(context.Context) (int, error) {
				calls++
				if calls < 3 {
					return 0, errFlaky
				}
				return 42, nil
			})
		if err != nil {
			n = -1
		}
		v <- n
	}()
	for i := 0; i < 2; i++ {
		_, err := clock.AdvanceToNext(bound)
		require.NoError(t, err)
	}
	select {
	case n := <-v:
		assert.Equal(t, 42, n)
	case <-time.After(bound):
		t.Fatal("no result")
	}
}

func TestRetryStopsAtPermanentError(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Hour}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	base := errors.New("bad request")
	err := reconnect.Retry{Policy: p}.Do(context.Background(), func(context.Context) error {
		return reconnect.Permanent(base)
	})
	assert.ErrorIs(t, err, reconnect.ErrPermanent)
	assert.ErrorIs(t, err, base)
	var re *reconnect.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)
}

func TestRetryCustomPredicate(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Hour}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	err := reconnect.Retry{Policy: p, Retryable: func(err error) bool { return !errors.Is(err, errFlaky) }}.
		Do(context.Background(), func(context.Context) error { return errFlaky })
	assert.ErrorIs(t, err, reconnect.ErrPermanent)
}

func TestRetryHonoursRetryAfterClampedToCeiling(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Second}, reconnect.Limits{MaxRetries: 3})
	cases := []struct {
		name     string
		hint     time.Duration
		ceiling  time.Duration
		jitter   time.Duration
		min, max time.Duration // the wait is in [min, max)
	}{
		{"hint above policy, jitter up to the hint", 7 * time.Second, 0, 0, 7 * time.Second, 14 * time.Second},
		{"hint below policy", 100 * time.Millisecond, 0, 0, time.Second, time.Second + 1},
		{"hostile hint clamped to default, jitter to one minute", 1000 * time.Hour, 0, 0,
			reconnect.DefaultMaxRetryAfter, reconnect.DefaultMaxRetryAfter + reconnect.DefaultMaxRetryAfterJitter},
		{"hint clamped to configured ceiling", time.Hour, 30 * time.Second, 0, 30 * time.Second, 60 * time.Second},
		{"configured jitter", 7 * time.Second, 0, 2 * time.Second, 7 * time.Second, 9 * time.Second},
		{"jitter off", 7 * time.Second, 0, -1, 7 * time.Second, 7*time.Second + 1},
		{"hints ignored", time.Hour, -1, 0, time.Second, time.Second + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := fakeclock.New(time.Unix(0, 0))
			calls := 0
			done := runRetry(context.Background(), reconnect.Retry{Policy: p, Clock: clock, MaxRetryAfter: c.ceiling,
				RetryAfterJitter: c.jitter, Source: rand.NewPCG(3, 4)},
				func(context.Context) error {
					calls++
					if calls == 1 {
						return reconnect.WithRetryAfter(errFlaky, c.hint)
					}
					return nil
				})
			pending, err := clock.WaitTimers(1, bound)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, pending[0], c.min)
			assert.Less(t, pending[0], c.max)
			clock.Advance(pending[0])
			assert.NoError(t, awaitResult(t, done))
		})
	}
}

// hintedWaits returns the first wait of n Do calls, each its own device
// (seed, i), all told to come back after hint at the same instant.
func hintedWaits(seed uint64, n int, hint time.Duration) []time.Duration {
	p, _ := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	waits := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		_ = reconnect.Retry{Policy: p, Source: rand.NewPCG(seed, uint64(i)),
			// no wait: cancelled
			Notify: func(no reconnect.Notice) { waits = append(waits, no.Delay); cancel() },
		}.Do(ctx, func(context.Context) error { return reconnect.WithRetryAfter(errFlaky, hint) })
		cancel()
	}
	return waits
}

// A fleet given the same Retry-After at the same instant comes back spread
// over [hint, 2 x hint): never before the hint, and no second holds more than
// an even share of the fleet plus chance. Checked for 20 seeds.
func TestRetryAfterHintSpreadsAFleet(t *testing.T) {
	const devices, hint = 1000, 10 * time.Second
	for seed := uint64(1); seed <= 20; seed++ {
		buckets := make([]int, 10)
		for _, w := range hintedWaits(seed, devices, hint) {
			require.GreaterOrEqual(t, w, hint, "seed %d: back before the hint", seed)
			require.Less(t, w, 2*hint, "seed %d", seed)
			buckets[(w-hint)/time.Second]++
		}
		for s, n := range buckets {
			// Even is 100 a second; 150 is over 5 standard deviations away.
			assert.Less(t, n, 150, "seed %d: %d of %d devices in second %d after the hint", seed, n, devices, s)
			assert.Greater(t, n, 50, "seed %d: second %d nearly empty", seed, s)
		}
	}
}

// One Retry with a Source serves concurrent Do calls (go test -race checks
// that they never draw from the shared source at the same time).
func TestRetrySharedSourceConcurrentDo(t *testing.T) {
	p := mustPolicy(t, reconnect.FullJitter{Base: time.Microsecond, Max: 10 * time.Microsecond}, reconnect.Limits{MaxRetries: 3})
	r := reconnect.Retry{Policy: p, Source: rand.NewPCG(7, 7)}
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				errs <- r.Do(context.Background(), func(context.Context) error { return errFlaky })
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		assert.ErrorIs(t, err, reconnect.ErrExhausted)
		n++
	}
	assert.Equal(t, 400, n)
}

// Sequential Do calls on a seeded Source are reproducible.
func TestRetrySeededSourceIsReproducible(t *testing.T) {
	a, b := hintedWaits(99, 50, 10*time.Second), hintedWaits(99, 50, 10*time.Second)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, hintedWaits(100, 50, 10*time.Second))
}

func TestRetryReturnsPromptlyOnCancel(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	p := mustPolicy(t, reconnect.Constant{Interval: time.Hour}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	ctx, cancel := context.WithCancel(context.Background())
	done := runRetry(ctx, reconnect.Retry{Policy: p, Clock: clock}, func(context.Context) error { return errFlaky })
	_, err := clock.WaitTimers(1, bound)
	require.NoError(t, err)
	start := time.Now()
	cancel()
	err = awaitResult(t, done)
	elapsed := time.Since(start)
	assert.ErrorIs(t, err, reconnect.ErrCancelled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, errFlaky, "the last operation error is kept")
	// Not a timing assertion on the machine's speed: the loop must not wait for
	// the hour-long fake timer, which never fires.
	assert.Less(t, elapsed, bound)
}

func TestRetryRealClockCancelWithinAMillisecond(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Hour}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan struct{})
	done := make(chan time.Time, 1)
	go func() {
		_ = reconnect.Retry{Policy: p, Notify: func(reconnect.Notice) { close(waiting) }}.
			Do(ctx, func(context.Context) error { return errFlaky })
		done <- time.Now()
	}()
	<-waiting
	cancelled := time.Now()
	cancel()
	select {
	case returned := <-done:
		// Generous against scheduler noise under -race and qemu; the loop
		// itself does nothing between cancel and return but a select.
		assert.Less(t, returned.Sub(cancelled), 100*time.Millisecond)
	case <-time.After(bound):
		t.Fatal("Do did not return after cancel")
	}
}

func TestRetryCancelledBeforeFirstAttempt(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Second}, reconnect.Limits{MaxRetries: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := reconnect.Retry{Policy: p}.Do(ctx, func(context.Context) error { called = true; return nil })
	assert.ErrorIs(t, err, reconnect.ErrCancelled)
	assert.False(t, called)
}

func TestRetryElapsedLimitCountsHint(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Second}, reconnect.Limits{MaxRetries: 10, MaxElapsed: 5 * time.Second})
	clock := fakeclock.New(time.Unix(0, 0))
	err := reconnect.Retry{Policy: p, Clock: clock}.Do(context.Background(), func(context.Context) error {
		return reconnect.WithRetryAfter(errFlaky, time.Minute)
	})
	assert.ErrorIs(t, err, reconnect.ErrExhausted, "a 60 s hint cannot fit a 5 s budget, so the loop stops without waiting")
	assert.Empty(t, clock.Pending())
}

func TestRetryNilPolicyIsAnError(t *testing.T) {
	err := reconnect.Retry{}.Do(context.Background(), func(context.Context) error { return nil })
	assert.ErrorIs(t, err, reconnect.ErrInvalid)
}

func TestIsRetryable(t *testing.T) {
	assert.True(t, reconnect.IsRetryable(errFlaky))
	assert.True(t, reconnect.IsRetryable(context.DeadlineExceeded))
	assert.False(t, reconnect.IsRetryable(reconnect.Permanent(errFlaky)))
	assert.False(t, reconnect.IsRetryable(&reconnect.HTTPError{StatusCode: 404}))
	assert.True(t, reconnect.IsRetryable(&reconnect.HTTPError{StatusCode: 503}))
	assert.Nil(t, reconnect.Permanent(nil))
	assert.Nil(t, reconnect.WithRetryAfter(nil, time.Second))
}
