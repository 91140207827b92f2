package reconnect_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/reconnect"
)

const s = time.Second

func TestShapeDelaysExact(t *testing.T) {
	iot := reconnect.DefaultIoTCore
	atCap := iot
	atCap.JitterAtCap = true
	cases := []struct {
		name  string
		shape reconnect.Shape
		n     int
		prev  time.Duration
		u     float64
		want  time.Duration
	}{
		{"iotcore n0 u0", iot, 0, 0, 0, 1 * s},
		{"iotcore n0 u.5", iot, 0, 0, 0.5, 1500 * time.Millisecond},
		{"iotcore n3 u.25", iot, 3, 0, 0.25, 8250 * time.Millisecond},
		{"iotcore n4 u.999", iot, 4, 0, 0.999, 16*s + 999*time.Millisecond},
		{"iotcore clamps jitter away at cap", iot, 5, 0, 0.7, 32 * s},
		{"iotcore near cap", iot, 4, 0, 0.5, 16500 * time.Millisecond},
		{"iotcore huge n", iot, 1000, 0, 0.9, 32 * s},
		{"iotcore jitter at cap", atCap, 5, 0, 0.7, 32*s + 700*time.Millisecond},
		{"iotcore jitter at cap huge n", atCap, 99, 0, 0.25, 32*s + 250*time.Millisecond},
		{"exponential n0", reconnect.Exponential{Base: s, Multiplier: 2, Max: 600 * s}, 0, 0, 0.9, 1 * s},
		{"exponential n9", reconnect.Exponential{Base: s, Multiplier: 2, Max: 600 * s}, 9, 0, 0.9, 512 * s},
		{"exponential n10 capped", reconnect.Exponential{Base: s, Multiplier: 2, Max: 600 * s}, 10, 0, 0.9, 600 * s},
		{"grpc-like x1.6", reconnect.Exponential{Base: s, Multiplier: 1.6, Max: 120 * s}, 2, 0, 0, 2560 * time.Millisecond},
		{"full n3 u.5", reconnect.FullJitter{Base: s, Max: 32 * s}, 3, 0, 0.5, 4 * s},
		{"full capped", reconnect.FullJitter{Base: s, Max: 32 * s}, 30, 0, 0.5, 16 * s},
		{"equal n3 u0", reconnect.EqualJitter{Base: s, Max: 32 * s}, 3, 0, 0, 4 * s},
		{"equal n3 u.5", reconnect.EqualJitter{Base: s, Max: 32 * s}, 3, 0, 0.5, 6 * s},
		{"decorrelated first", reconnect.Decorrelated{Base: s, Max: 32 * s}, 0, 0, 0.5, 2 * s},
		{"decorrelated from prev", reconnect.Decorrelated{Base: s, Max: 32 * s}, 5, 4 * s, 0.5, 6500 * time.Millisecond},
		{"decorrelated capped", reconnect.Decorrelated{Base: s, Max: 32 * s}, 5, 30 * s, 0.9, 32 * s},
		{"decorrelated draws before capping", reconnect.Decorrelated{Base: s, Max: 32 * s}, 5, 30 * s, 0.3, 27700 * time.Millisecond},
		{"fleet-safe first", reconnect.DefaultFleetSafe, 0, 0, 0, 1500 * time.Millisecond},
		{"fleet-safe first u.5", reconnect.DefaultFleetSafe, 0, 0, 0.5, 2250 * time.Millisecond},
		{"fleet-safe from prev", reconnect.DefaultFleetSafe, 5, 4 * s, 0.5, 9 * s},
		{"fleet-safe at the cap keeps its jitter", reconnect.DefaultFleetSafe, 5, 30 * s, 0.5, 24 * s},
		{"fleet-safe at the cap u0", reconnect.DefaultFleetSafe, 5, 30 * s, 0, 16 * s},
		{"linear n0", reconnect.Linear{Initial: s, Step: 2 * s, Max: 10 * s}, 0, 0, 0.5, 1 * s},
		{"linear n3", reconnect.Linear{Initial: s, Step: 2 * s, Max: 10 * s}, 3, 0, 0.5, 7 * s},
		{"linear capped", reconnect.Linear{Initial: s, Step: 2 * s, Max: 10 * s}, math.MaxInt32, 0, 0.5, 10 * s},
		{"constant", reconnect.Constant{Interval: 3 * s}, 7, 0, 0.5, 3 * s},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.shape.Validate())
			assert.Equal(t, c.want, c.shape.Delay(c.n, c.prev, c.u))
		})
	}
}

func TestNewRejectsInvalidParameters(t *testing.T) {
	forever := reconnect.Limits{MaxRetries: reconnect.RetryForever}
	cases := []struct {
		name   string
		shape  reconnect.Shape
		limits reconnect.Limits
	}{
		{"nil shape", nil, forever},
		{"zero base", reconnect.IoTCore{Jitter: s, MaxBackoff: s}, forever},
		{"negative jitter", reconnect.IoTCore{Base: s, Jitter: -1, MaxBackoff: s}, forever},
		{"max below base", reconnect.IoTCore{Base: 2 * s, MaxBackoff: s}, forever},
		{"overflowing jitter", reconnect.IoTCore{Base: s, Jitter: math.MaxInt64, MaxBackoff: s}, forever},
		{"multiplier below 1", reconnect.Exponential{Base: s, Multiplier: 0.5, Max: s}, forever},
		{"multiplier NaN", reconnect.Exponential{Base: s, Multiplier: math.NaN(), Max: s}, forever},
		{"multiplier Inf", reconnect.Exponential{Base: s, Multiplier: math.Inf(1), Max: s}, forever},
		{"zero value exponential", reconnect.Exponential{}, forever},
		{"full max below base", reconnect.FullJitter{Base: s, Max: 1}, forever},
		{"equal zero base", reconnect.EqualJitter{Max: s}, forever},
		{"decorrelated zero", reconnect.Decorrelated{}, forever},
		{"fleet-safe zero", reconnect.FleetSafe{}, forever},
		{"fleet-safe max below base", reconnect.FleetSafe{Base: s, Max: 1}, forever},
		{"linear zero step", reconnect.Linear{Initial: s, Max: 2 * s}, forever},
		{"constant zero", reconnect.Constant{}, forever},
		{"negative retries", reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: -2}},
		{"negative elapsed", reconnect.DefaultIoTCore, reconnect.Limits{MaxElapsed: -s}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := reconnect.New(c.shape, c.limits)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, reconnect.ErrInvalid)
		})
	}
}

func mustPolicy(t testing.TB, shape reconnect.Shape, limits reconnect.Limits) *reconnect.Policy {
	t.Helper()
	p, err := reconnect.New(shape, limits)
	require.NoError(t, err)
	return p
}

func TestBackoffFollowsPolicyWithSeededSource(t *testing.T) {
	p := mustPolicy(t, reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 7})
	b := reconnect.NewBackoff(p, rand.NewPCG(1, 2))
	ref := rand.NewPCG(1, 2) // the same draws, replayed by hand
	now := time.Unix(1000, 0)
	for n := 0; n < 7; n++ {
		d, ok := b.Next(now)
		require.True(t, ok, "retry %d", n)
		u := jitter.Float64(ref)
		want := min(time.Duration(1<<n)*s+time.Duration(u*float64(s)), 32*s)
		assert.Equal(t, want, d, "retry %d", n)
	}
	_, ok := b.Next(now)
	assert.False(t, ok, "the eighth retry is past MaxRetries 7")
	assert.Equal(t, 7, b.Retries())

	b.Reset()
	d, ok := b.Next(now)
	require.True(t, ok)
	assert.True(t, d >= s && d < 2*s, "after Reset the wait is wait_0 again, got %v", d)
}

func TestBackoffZeroRetriesMeansNone(t *testing.T) {
	p := mustPolicy(t, reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 0})
	_, ok := reconnect.NewBackoff(p, rand.NewPCG(1, 1)).Next(time.Now())
	assert.False(t, ok)
}

func TestBackoffRetryForeverNeverStops(t *testing.T) {
	p := mustPolicy(t, reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	b := reconnect.NewBackoff(p, rand.NewPCG(1, 1))
	for i := 0; i < 10000; i++ {
		d, ok := b.Next(time.Unix(0, 0))
		require.True(t, ok)
		require.LessOrEqual(t, d, 32*s)
	}
}

func TestBackoffMaxElapsedStopsBeforeOverrunning(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: 10 * s}, reconnect.Limits{MaxRetries: reconnect.RetryForever, MaxElapsed: 35 * s})
	b := reconnect.NewBackoff(p, rand.NewPCG(1, 1))
	start := time.Unix(0, 0)
	now := start
	var waits []time.Duration
	for {
		d, ok := b.Next(now)
		if !ok {
			break
		}
		waits = append(waits, d)
		now = now.Add(d + s) // each attempt itself takes a second
	}
	// 0+10, 11+10, 22+10 end within 35 s; 33+10 would end at 43 s.
	assert.Equal(t, []time.Duration{10 * s, 10 * s, 10 * s}, waits)
}

func TestDecorrelatedGrowsFromPreviousWait(t *testing.T) {
	p := mustPolicy(t, reconnect.Decorrelated{Base: s, Max: 60 * s}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	b := reconnect.NewBackoff(p, rand.NewPCG(3, 4))
	ref := rand.NewPCG(3, 4)
	prev := s
	for i := 0; i < 50; i++ {
		d, _ := b.Next(time.Unix(0, 0))
		want := min(s+time.Duration(jitter.Float64(ref)*float64(3*prev-s)), 60*s)
		require.Equal(t, want, d, "retry %d", i)
		prev = d
	}
}

// FleetSafe's waits grow from each draw and, once at the cap, stay in
// [Max/2, Max), averaging three quarters of it.
func TestFleetSafeKeepsJitterAtTheCap(t *testing.T) {
	p := mustPolicy(t, reconnect.DefaultFleetSafe, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	b := reconnect.NewBackoff(p, rand.NewPCG(5, 6))
	ref := rand.NewPCG(5, 6)
	prev, sum, atCap := s, time.Duration(0), 0
	for i := 0; i < 2000; i++ {
		d, _ := b.Next(time.Unix(0, 0))
		hi := min(3*prev, 32*s)
		require.InDelta(t, hi/2+time.Duration(jitter.Float64(ref)*float64(hi/2)), d, 2, "retry %d", i)
		require.GreaterOrEqual(t, d, hi/2)
		require.Less(t, d, hi)
		if hi == 32*s {
			sum += d
			atCap++
		}
		prev = d
	}
	assert.Greater(t, atCap, 1900, "the envelope reaches the cap within a few retries")
	assert.InDelta(t, 24*s, sum/time.Duration(atCap), float64(500*time.Millisecond), "three quarters of the cap")
}

func TestBackoffIsSmall(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(reconnect.Backoff{}), uintptr(64))
}

func TestNilSourcesDiffer(t *testing.T) {
	shape := reconnect.DefaultIoTCore
	shape.JitterAtCap = true // keep jitter in every wait, so equal waits mean equal draws
	p := mustPolicy(t, shape, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	a, b := reconnect.NewBackoff(p, nil), reconnect.NewBackoff(p, nil)
	same := 0
	for i := 0; i < 20; i++ {
		da, _ := a.Next(time.Unix(0, 0))
		db, _ := b.Next(time.Unix(0, 0))
		if da == db {
			same++
		}
	}
	assert.Zero(t, same, "two devices with nil sources drew the same jitter")
}

// TestIoTCoreDelaysAreUniform draws 100,000 delays per retry number and checks
// them against the formula: inside [min(2^n s, max), min(2^n s + 1 s, max)]
// and uniform there (one-sample Kolmogorov-Smirnov, alpha = 0.001).
func TestIoTCoreDelaysAreUniform(t *testing.T) {
	const draws = 100_000
	ksCritical := 1.949 / math.Sqrt(draws) // alpha = 0.001
	p := mustPolicy(t, reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	src := rand.NewPCG(20261121, 42)
	maxB := reconnect.DefaultIoTCore.MaxBackoff
	for n := 0; n <= 7; n++ {
		lo := min(time.Duration(1<<n)*s, maxB)
		hi := min(time.Duration(1<<n)*s+s, maxB)
		xs := make([]float64, draws)
		for i := range xs {
			d := p.Delay(n, 0, jitter.Float64(src))
			require.GreaterOrEqual(t, d, lo, "n=%d", n)
			require.LessOrEqual(t, d, hi, "n=%d", n)
			if hi > lo {
				xs[i] = float64(d-lo) / float64(hi-lo)
			}
		}
		if hi == lo {
			continue // clamped to the cap: every draw is exactly max, checked above
		}
		sort.Float64s(xs)
		var dmax float64
		for i, x := range xs {
			dmax = math.Max(dmax, math.Max(float64(i+1)/draws-x, x-float64(i)/draws))
		}
		assert.Less(t, dmax, ksCritical, "n=%d: KS distance %.5f", n, dmax)
	}
}

// TestSharedPolicyIsRaceFree: one policy, 100 goroutines, each with its own
// Backoff, under -race.
func TestSharedPolicyIsRaceFree(t *testing.T) {
	p := mustPolicy(t, reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 50})
	var wg sync.WaitGroup
	results := make([]time.Duration, 100)
	for g := 0; g < 100; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := reconnect.NewBackoff(p, rand.NewPCG(uint64(g), 7))
			var sum time.Duration
			for {
				d, ok := b.Next(time.Unix(0, 0))
				if !ok {
					break
				}
				sum += d + p.Delay(3, 0, 0.5)
				_ = p.String()
			}
			results[g] = sum
		}()
	}
	wg.Wait()
	for g, r := range results {
		assert.Positive(t, r, "goroutine %d", g)
	}
}

func TestErrInvalidNamesTheParameter(t *testing.T) {
	_, err := reconnect.New(reconnect.IoTCore{Base: s, Jitter: s, MaxBackoff: s / 2}, reconnect.Limits{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, reconnect.ErrInvalid))
	assert.Contains(t, err.Error(), "MaxBackoff")
}
