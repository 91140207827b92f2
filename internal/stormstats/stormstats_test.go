package stormstats_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/stormstats"
)

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func histogramOf(ts []time.Duration) *stormstats.Histogram {
	var h stormstats.Histogram
	for _, t := range ts {
		h.Add(t)
	}
	return &h
}

func judge(t *testing.T, ts []time.Duration) stormstats.Judgement {
	t.Helper()
	j, err := stormstats.Judge(histogramOf(ts), stormstats.DefaultMethod)
	require.NoError(t, err)
	return j
}

// The cases the old detector got wrong, each over 20 consecutive seeds (3
// under the race detector).
func TestTextbookCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		want   stormstats.Verdict
		period float64 // the rounds' period, when waves
		gen    func(r *rand.Rand) []time.Duration
	}{
		{"2,000 devices in lock-step, a round every 1 s, 20 rounds", stormstats.Waves, 1,
			func(*rand.Rand) []time.Duration {
				var ts []time.Duration
				for k := range 20 {
					for range 2000 {
						ts = append(ts, secs(float64(k)))
					}
				}
				return ts
			}},
		{"5,000 devices in 6 s-wide rounds every 32 s, 10 rounds", stormstats.Waves, 32,
			rounds{count: 10, period: 32 * time.Second, widthShare: 6.0 / 32, shape: uniform, size: 5000, decay: 1}.arrivals},
		{"6 rounds of 800 every 45 s, sigma 1.5 s, over a background holding 40 %", stormstats.Waves, 45,
			rounds{count: 6, period: 45 * time.Second, widthShare: 6.0 / 45, shape: normal, size: 800, decay: 1, background: 0.4}.arrivals},
		{"5 rounds of 50,000 every 120 s, each 10 s wide", stormstats.Waves, 120,
			rounds{count: 5, period: 120 * time.Second, widthShare: 10.0 / 120, shape: uniform, size: 50_000, decay: 1}.arrivals},
		{"10 devices, independent, uniform over 10 s", stormstats.Inconclusive, 0,
			func(r *rand.Rand) []time.Duration {
				return smooth{n: 10, draw: func(r *rand.Rand) float64 { return 10 * r.Float64() }}.arrivals(r)
			}},
		{"60 devices, independent, uniform over 10 s", stormstats.Inconclusive, 0,
			func(r *rand.Rand) []time.Duration {
				return smooth{n: 60, draw: func(r *rand.Rand) float64 { return 10 * r.Float64() }}.arrivals(r)
			}},
		{"600 devices, independent, uniform over 10 s", stormstats.Spread, 0,
			func(r *rand.Rand) []time.Duration {
				return smooth{n: 600, draw: func(r *rand.Rand) float64 { return 10 * r.Float64() }}.arrivals(r)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(seeds()) {
				j := judge(t, tc.gen(rand.New(rand.NewPCG(seed, 1))))
				require.Equal(t, tc.want, j.Verdict, "seed %d: %s", seed, j.Reason)
				if tc.want == stormstats.Waves {
					assert.InDelta(t, tc.period, j.PeriodS, 0.05*tc.period, "seed %d", seed)
					assert.Greater(t, j.Synchrony, 0.5, "seed %d", seed)
				}
				if tc.want == stormstats.Inconclusive {
					assert.Equal(t, 100, j.Needed)
				}
			}
		})
	}
}

func TestOneBurstIsNotWaves(t *testing.T) {
	// A drop-all where every device reconnects at its first retry, 1 s
	// after the drop: one burst over silence, reported, not repeated.
	ts := make([]time.Duration, 2000)
	for i := range ts {
		ts[i] = time.Second + time.Duration(i%10)*time.Millisecond
	}
	assert.Empty(t, judge(t, ts).Bursts, "a burst is only seen against the quiet around it")
	h := histogramOf(ts)
	h.Cover(0) // watched from the drop on
	j, err := stormstats.Judge(h, stormstats.DefaultMethod)
	require.NoError(t, err)
	assert.Equal(t, stormstats.Spread, j.Verdict, j.Reason)
	require.Len(t, j.Bursts, 1)
	b := j.Bursts[0]
	assert.EqualValues(t, 2000, b.Count)
	assert.InDelta(t, 1.0, b.AtS, 0.01)
	assert.LessOrEqual(t, b.WidthS, 0.02)
	assert.Greater(t, b.PeakPerS, 100_000.0)
	assert.Zero(t, j.Synchrony, "one burst is not synchrony between retries")
	assert.InDelta(t, 2000, b.Excess, 1, "every arrival came in the burst")
	assert.Contains(t, j.Reason, "one burst, not repeated: 2000 arrivals within")
}

func TestLimiterPacedRecoveryIsSpread(t *testing.T) {
	// A broker admitting exactly 100/s for 200 s: no burst at any width.
	ts := make([]time.Duration, 20_000)
	for i := range ts {
		ts[i] = time.Duration(i) * 10 * time.Millisecond
	}
	j := judge(t, ts)
	assert.Equal(t, stormstats.Spread, j.Verdict, j.Reason)
	assert.Empty(t, j.Bursts)
	assert.Zero(t, j.Synchrony)
}

func TestInvalidMethodIsAnError(t *testing.T) {
	for _, m := range []stormstats.Method{
		{Contrast: 0.5, Alpha: 0.001},
		{Contrast: 3, Alpha: 0},
		{Contrast: 3, Alpha: 1},
		{Contrast: 3, Alpha: 0.001, MinRecurringShare: 2},
		{Contrast: 3, Alpha: 0.001, MinArrivals: -1},
		{Contrast: math.NaN(), Alpha: 0.001},
	} {
		_, err := stormstats.Judge(histogramOf(nil), m)
		assert.Error(t, err, "%+v", m)
	}
}

func TestNoArrivalsAreInconclusive(t *testing.T) {
	j := judge(t, nil)
	assert.Equal(t, stormstats.Inconclusive, j.Verdict)
	assert.Equal(t, 100, j.Needed)
	assert.NotNil(t, j.Bursts, "an empty list in JSON, not null")
}

func TestHistogramCountsInAnyOrder(t *testing.T) {
	var h stormstats.Histogram
	for _, t := range []time.Duration{5 * time.Second, -time.Second, 0, 1500 * time.Millisecond, 5 * time.Second} {
		h.Add(t)
	}
	assert.EqualValues(t, 5, h.Count())
	assert.Equal(t, stormstats.FinestResolution, h.Resolution())
	assert.Equal(t, []int{1, 1, 1, 0, 0, 0, 2}, h.Counts(-time.Second, time.Second))
	assert.Equal(t, []int{1, 1, 0, 0, 0, 2}, h.Counts(0, time.Second), "arrivals before the start are left out")
	assert.Equal(t, 6*time.Second+stormstats.FinestResolution, h.Span())
}

func TestHistogramCoarsensBeyondMaxBins(t *testing.T) {
	var h stormstats.Histogram
	h.Add(0)
	h.Add(time.Hour) // 14.4 million bins at the finest resolution
	assert.EqualValues(t, 2, h.Count())
	assert.Equal(t, 2*stormstats.FinestResolution, h.Resolution())
	h.Add(-3 * time.Hour)
	assert.Equal(t, 8*stormstats.FinestResolution, h.Resolution())
	assert.Equal(t, []int{1, 0, 0, 1, 1}, h.Counts(-3*time.Hour, time.Hour))

	var o stormstats.Histogram
	o.Add(30 * time.Minute)
	o.Merge(&h)
	assert.EqualValues(t, 4, o.Count())
	assert.Equal(t, []int{1, 0, 0, 2, 1}, o.Counts(-3*time.Hour, time.Hour))
}

func TestSummarize(t *testing.T) {
	// 10 per second for 100 s, then 50 in one 100 ms bucket.
	var ts []time.Duration
	for i := range 1000 {
		ts = append(ts, time.Duration(i)*100*time.Millisecond)
	}
	for range 50 {
		ts = append(ts, 200*time.Second+50*time.Millisecond)
	}
	a := stormstats.Summarize(histogramOf(ts))
	assert.EqualValues(t, 1050, a.Count)
	assert.InDelta(t, 200.05, a.SpanS, 0.001)
	assert.Equal(t, 500.0, a.PeakPerS100ms)
	assert.Equal(t, 50.0, a.PeakPerS1s)
	assert.Zero(t, stormstats.Summarize(histogramOf(nil)).Count)
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	assert.Equal(t, 5.0, stormstats.Percentile(xs, 50))
	assert.Equal(t, 10.0, stormstats.Percentile(xs, 99))
	assert.Equal(t, 10.0, stormstats.Percentile(xs, 100))
	assert.Equal(t, 1.0, stormstats.Percentile(xs, 0))
	assert.True(t, math.IsNaN(stormstats.Percentile(nil, 50)))
}

// Percentiles selects, rather than sorts, and gives exactly what a sort
// gives: over random series of every size up to 5,000, many equal values
// (a fleet back at one instant), NaNs and infinities among them.
func TestPercentilesSelectWhatASortWouldGive(t *testing.T) {
	ps := []float64{100, 50, 0, 99, 95, 99, 0.1, 99.9}
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 5))
		xs := make([]float64, r.IntN(5000)+1)
		distinct := 1 + r.IntN(len(xs))
		for i := range xs {
			switch k := r.IntN(100); {
			case k == 0:
				xs[i] = math.NaN()
			case k == 1:
				xs[i] = math.Inf(2*r.IntN(2) - 1)
			default:
				xs[i] = float64(r.IntN(distinct)) * 0.25
			}
		}
		sorted := slices.Clone(xs)
		slices.Sort(sorted)
		got := stormstats.Percentiles(xs, ps...)
		for i, p := range ps {
			want := sorted[min(max(int(math.Ceil(p/100*float64(len(xs)))), 1), len(xs))-1]
			if !(got[i] == want || math.IsNaN(got[i]) && math.IsNaN(want)) {
				t.Fatalf("seed %d, %d values: p%g is %v, a sort says %v", seed, len(xs), p, got[i], want)
			}
		}
	}
}
