package stormstats_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/stormstats"
)

const bucket = 100 * time.Millisecond

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// evenly: n arrivals at exactly equal spacing over span.
func evenly(n int, span time.Duration) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = span * time.Duration(i) / time.Duration(n)
	}
	return ts
}

// poisson: n arrivals of a Poisson process at rate per second.
func poisson(n int, rate float64, r *rand.Rand) []time.Duration {
	ts := make([]time.Duration, n)
	t := 0.0
	for i := range ts {
		t += r.ExpFloat64() / rate
		ts[i] = secs(t)
	}
	return ts
}

// waves: n arrivals in bursts of width w every period.
func waves(n, bursts int, period, w time.Duration, r *rand.Rand) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = time.Duration(i%bursts)*period + time.Duration(r.Float64()*float64(w))
	}
	return ts
}

func TestEvenlyPacedArrivals(t *testing.T) {
	a := stormstats.Summarize(evenly(1000, 100*time.Second), bucket) // 10 per second, exactly
	assert.Equal(t, 1000, a.Count)
	assert.InDelta(t, 0, a.Fano, 0.01, "no variance between buckets")
	assert.InDelta(t, 0, a.LocalFano, 0.01)
	assert.InDelta(t, 1, a.PeakToMean, 0.02)
	assert.InDelta(t, 10, a.PeakPerS1s, 0.5)
	assert.InDelta(t, 10, a.PeakPerS100ms, 0.5)
	assert.InDelta(t, 0.01, a.MaxShare1s, 0.001)
	v, _ := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Spread, v)
}

func TestPoissonArrivalsHaveFanoNearOne(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a := stormstats.Summarize(poisson(100_000, 200, r), bucket) // 20 per bucket on average
	assert.InDelta(t, 1, a.Fano, 0.05)
	assert.InDelta(t, 1, a.LocalFano, 0.1)
	assert.Less(t, a.LocalPeakRatio, 1.3)
	v, why := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Spread, v, why)
}

func TestPeriodicWavesAreWaves(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// 10,000 devices coming back in 5 bursts of 50 ms, 2 s apart: paho's
	// unjittered reconnect after a fleet-wide drop looks like this.
	a := stormstats.Summarize(waves(10_000, 5, 2*time.Second, 50*time.Millisecond, r), bucket)
	assert.Greater(t, a.Fano, 100.0)
	assert.Greater(t, a.LocalFano, 100.0)
	assert.Greater(t, a.LocalPeakRatio, 100.0, "silence between the rounds")
	assert.InDelta(t, 0.2, a.MaxShare1s, 0.01)
	assert.InDelta(t, 2000/0.1, a.PeakPerS100ms, 2000/0.1*0.05) // a whole burst inside one 100 ms bucket
	v, why := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Waves, v)
	assert.Contains(t, why, "local Fano")
}

// decaying: n independent arrivals whose rate decays exponentially with time
// constant tau, as a jittered fleet's retries do after an outage.
func decaying(n int, tau float64, r *rand.Rand) []time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		ts[i] = secs(r.ExpFloat64() * tau)
	}
	return ts
}

func TestDecayingIndependentArrivalsAreSpread(t *testing.T) {
	// 100,000 independent arrivals whose rate falls from 5,000/s: the
	// whole-span Fano factor is huge because the rate changes, but no
	// arrival is synchronised with another.
	r := rand.New(rand.NewPCG(5, 6))
	a := stormstats.Summarize(decaying(100_000, 20, r), bucket)
	assert.Greater(t, a.Fano, 50.0, "the whole-span measure mistakes a changing rate for waves")
	assert.InDelta(t, 1, a.LocalFano, 0.15)
	assert.Equal(t, 2000, a.LocalWindowMS)
	v, why := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Spread, v, why)
}

func TestWavesOnTopOfIndependentArrivalsAreWaves(t *testing.T) {
	// 10,000 devices coming back in 10 rounds of 100 ms, 5 s apart, over a
	// Poisson background of 300/s: no second holds 6 % of the arrivals,
	// but each round quadruples the broker's load for a moment.
	r := rand.New(rand.NewPCG(7, 8))
	ts := append(poisson(15_000, 300, r), waves(10_000, 10, 5*time.Second, 100*time.Millisecond, r)...)
	a := stormstats.Summarize(ts, bucket)
	assert.Less(t, a.MaxShare1s, 0.06)
	assert.Greater(t, a.LocalFano, 10.0)
	assert.Greater(t, a.LocalPeakRatio, 3.0)
	v, _ := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Waves, v)
}

func TestSmallBurstsAreNotWaves(t *testing.T) {
	// A 100,000-arrival Poisson stream at 2,000/s with a 10 % extra burst
	// each second: beyond chance at this size, but the broker's load never
	// rises by more than a fraction.
	r := rand.New(rand.NewPCG(11, 12))
	ts := append(poisson(100_000, 2000, r), waves(5_000, 50, time.Second, 100*time.Millisecond, r)...)
	a := stormstats.Summarize(ts, bucket)
	assert.Greater(t, a.LocalFano, 3.0, "significant")
	assert.Less(t, a.LocalPeakRatio, 1.5, "small")
	v, why := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Spread, v)
	assert.Contains(t, why, "small")
}

func TestAUniformRoundWithSharpEdgesIsSpread(t *testing.T) {
	// 100,000 devices' first full-jitter retries after the broker returns:
	// uniform over 32 s, so the rate jumps from 0 to 3,125/s and back.
	r := rand.New(rand.NewPCG(9, 10))
	ts := make([]time.Duration, 100_000)
	for i := range ts {
		ts[i] = secs(32 * r.Float64())
	}
	a := stormstats.Summarize(ts, bucket)
	assert.Less(t, a.LocalFano, 2.0, "the two edges are not waves")
	assert.Less(t, a.LocalPeakRatio, 1.2, "nor do they stand out on both sides")
	v, why := stormstats.Judge(a, stormstats.DefaultThresholds)
	assert.Equal(t, stormstats.Spread, v, why)
}

func TestOneSecondShare(t *testing.T) {
	// Half of all arrivals inside 0.9 s, the rest spread over 100 s.
	ts := append(evenly(500, 900*time.Millisecond), evenly(500, 100*time.Second)...)
	for i := 500; i < 1000; i++ {
		ts[i] += 10 * time.Second
	}
	a := stormstats.Summarize(ts, bucket)
	assert.InDelta(t, 0.5, a.MaxShare1s, 0.01)
	v, _ := stormstats.Judge(a, stormstats.Thresholds{MaxLocalFano: math.Inf(1), MaxLocalPeakRatio: math.Inf(1), MaxShare1s: 0.2})
	assert.Equal(t, stormstats.Waves, v)
}

func TestCounts(t *testing.T) {
	ms := time.Millisecond
	assert.Equal(t, []int{2, 0, 1, 1}, stormstats.Counts([]time.Duration{0, 50 * ms, 250 * ms, 399 * ms}, 0, bucket))
	assert.Nil(t, stormstats.Counts(nil, 0, bucket))
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	assert.Equal(t, 5.0, stormstats.Percentile(xs, 50))
	assert.Equal(t, 10.0, stormstats.Percentile(xs, 99))
	assert.Equal(t, 10.0, stormstats.Percentile(xs, 100))
	assert.Equal(t, 1.0, stormstats.Percentile(xs, 0))
	assert.True(t, math.IsNaN(stormstats.Percentile(nil, 50)))
}

func TestEmpty(t *testing.T) {
	a := stormstats.Summarize(nil, bucket)
	assert.Zero(t, a.Count)
	assert.Zero(t, a.Fano)
	assert.Zero(t, a.LocalPeakRatio)
}
