// Package stormstats measures how a fleet's reconnects arrived at a broker:
// spread out, or in synchronised waves. Arrival times are durations since the
// disruption, in unscaled (real-world) time; rates in the summary are per
// second.
package stormstats

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Arrivals summarises a series of arrival times.
type Arrivals struct {
	Count    int     `json:"count"`
	BucketMS int     `json:"bucket_ms"`
	SpanS    float64 `json:"span_s"` // first to last arrival
	// PeakPerS100ms and PeakPerS1s are the busiest 100 ms and 1 s buckets,
	// as rates per second.
	PeakPerS100ms float64 `json:"peak_per_s_100ms"`
	PeakPerS1s    float64 `json:"peak_per_s_1s"`
	// PeakToMean is the busiest bucket over the mean bucket across the span.
	PeakToMean float64 `json:"peak_to_mean"`
	// Fano is variance / mean of the per-bucket counts across the span: about
	// 1 for arrivals that are independent (Poisson), near 0 for arrivals
	// evenly paced, and far above 1 for waves.
	Fano float64 `json:"fano"`
	// LocalFano is the Fano factor against a moving average over
	// LocalWindow (each bucket's count against the mean of its neighbours):
	// about 1 for independent arrivals even while their rate rises or decays,
	// far above 1 for bursts shorter than the window. The whole-span Fano
	// grows with fleet size whenever the rate changes (a fleet's recovery
	// always decays), so the verdict uses this one.
	LocalFano     float64 `json:"local_fano"`
	LocalWindowMS int     `json:"local_window_ms"`
	// LocalPeakRatio is the busiest second over the larger of the medians
	// of the 5 s before and the 5 s after it (at least 1): how much a burst
	// stands out from its surroundings, whatever the fleet's size. The Fano factors say
	// whether a burst is beyond chance; this says whether it is big.
	LocalPeakRatio float64 `json:"local_peak_ratio"`
	// MaxShare1s is the largest fraction of all arrivals inside any 1 s window.
	MaxShare1s float64 `json:"max_share_1s"`
}

// LocalWindow is the moving average's width for LocalFano: wider than the
// 1 s jitter of the IoTCore policy, so one synchronised retry round stands
// out against it, and short enough that a fleet's decaying rate does not.
const LocalWindow = 2 * time.Second

// Summarize computes Arrivals over times (any order) with per-bucket counts of
// width bucket (the Fano factor and peak-to-mean use it).
func Summarize(times []time.Duration, bucket time.Duration) Arrivals {
	a := Arrivals{Count: len(times), BucketMS: int(bucket / time.Millisecond)}
	if len(times) == 0 || bucket <= 0 {
		return a
	}
	ts := slices.Clone(times)
	slices.Sort(ts)
	first, last := ts[0], ts[len(ts)-1]
	a.SpanS = (last - first).Seconds()
	a.PeakPerS100ms = float64(maxIn(Counts(ts, first, 100*time.Millisecond))) / 0.1
	a.PeakPerS1s = float64(maxIn(Counts(ts, first, time.Second)))
	counts := Counts(ts, first, bucket)
	mean, variance := meanVar(counts)
	if mean > 0 {
		a.PeakToMean = float64(maxIn(counts)) / mean
		a.Fano = variance / mean
	}
	a.LocalWindowMS = int(LocalWindow / time.Millisecond)
	a.LocalFano = localFano(counts, int(LocalWindow/bucket))
	a.LocalPeakRatio = localPeakRatio(Counts(ts, first, time.Second), 5)
	a.MaxShare1s = float64(maxWindow(ts, time.Second)) / float64(len(ts))
	return a
}

// Counts buckets sorted times from start: counts[i] holds the arrivals in
// [start + i*bucket, start + (i+1)*bucket).
func Counts(sorted []time.Duration, start, bucket time.Duration) []int {
	if len(sorted) == 0 || bucket <= 0 {
		return nil
	}
	counts := make([]int, int((sorted[len(sorted)-1]-start)/bucket)+1)
	for _, t := range sorted {
		if t < start {
			continue
		}
		counts[int((t-start)/bucket)]++
	}
	return counts
}

// localFano is sum((c_i - m_i)^2) / sum(m_i), where m_i is the mean count
// of the w buckets around bucket i, itself excluded (so independent
// arrivals give about 1 whatever their rate does slowly).
func localFano(counts []int, w int) float64 {
	half := max(w/2, 1)
	prefix := make([]int, len(counts)+1)
	for i, c := range counts {
		prefix[i+1] = prefix[i] + c
	}
	var num, den float64
	for i, c := range counts {
		lo, hi := max(i-half, 0), min(i+half+1, len(counts))
		if hi-lo < 2 {
			continue
		}
		m := float64(prefix[hi]-prefix[lo]-c) / float64(hi-lo-1)
		d := float64(c) - m
		num += d * d
		den += m
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// localPeakRatio is the largest c_i / max(median of the w counts before,
// median of the w counts after, 1): a burst must stand out on both sides,
// so the step up when a broker returns (silence before, a steady rate
// after) is not one.
func localPeakRatio(counts []int, w int) float64 {
	best := 0.0
	side := make([]int, 0, w)
	median := func(xs []int) float64 {
		side = append(side[:0], xs...)
		if len(side) == 0 {
			return 0
		}
		slices.Sort(side)
		if n := len(side); n%2 == 1 {
			return float64(side[n/2])
		}
		return float64(side[len(side)/2-1]+side[len(side)/2]) / 2
	}
	for i, c := range counts {
		around := max(median(counts[max(i-w, 0):i]), median(counts[i+1:min(i+w+1, len(counts))]), 1)
		best = max(best, float64(c)/around)
	}
	return best
}

func maxIn(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func meanVar(xs []int) (mean, variance float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := float64(x) - mean
		variance += d * d
	}
	return mean, variance / float64(len(xs))
}

// maxWindow is the most sorted times inside any window [t, t+w).
func maxWindow(sorted []time.Duration, w time.Duration) int {
	best, lo := 0, 0
	for hi, t := range sorted {
		for lo < hi && sorted[lo] <= t-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// Percentile returns the p-th percentile (0-100) of xs by nearest rank, or
// NaN for an empty series.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Thresholds decide the verdict; they are written beside it in a report.
type Thresholds struct {
	// MaxLocalFano and MaxLocalPeakRatio: above both, a burst is beyond
	// chance and big, and the arrivals are waves.
	MaxLocalFano      float64 `json:"max_local_fano"`
	MaxLocalPeakRatio float64 `json:"max_local_peak_ratio"`
	// MaxShare1s: a larger share of all arrivals in one second is a wave.
	MaxShare1s float64 `json:"max_share_1s"`
}

// DefaultThresholds: a burst is a wave when it is more than 3 times as
// dispersed as independent arrivals against their local mean and its
// second holds more than 3 times the seconds on either side of it, or when
// one second holds more than a fifth of all arrivals.
var DefaultThresholds = Thresholds{MaxLocalFano: 3, MaxLocalPeakRatio: 3, MaxShare1s: 0.2}

// Verdict is "spread" or "waves".
type Verdict string

const (
	Spread Verdict = "spread"
	Waves  Verdict = "waves"
)

// Judge applies th to a.
func Judge(a Arrivals, th Thresholds) (Verdict, string) {
	switch {
	case a.LocalFano > th.MaxLocalFano && a.LocalPeakRatio > th.MaxLocalPeakRatio:
		return Waves, fmt.Sprintf("local Fano factor %.1f > %.1f and the busiest second %.1fx its surroundings > %.1fx",
			a.LocalFano, th.MaxLocalFano, a.LocalPeakRatio, th.MaxLocalPeakRatio)
	case a.MaxShare1s > th.MaxShare1s:
		return Waves, fmt.Sprintf("%.0f%% of arrivals in one second > %.0f%%", 100*a.MaxShare1s, 100*th.MaxShare1s)
	}
	if a.LocalFano > th.MaxLocalFano {
		return Spread, fmt.Sprintf("bursts beyond chance (local Fano factor %.1f) but small: the busiest second is %.1fx its surroundings <= %.1fx; at most %.0f%% of arrivals in any second",
			a.LocalFano, a.LocalPeakRatio, th.MaxLocalPeakRatio, 100*a.MaxShare1s)
	}
	return Spread, fmt.Sprintf("local Fano factor %.1f <= %.1f and at most %.0f%% of arrivals in any second",
		a.LocalFano, th.MaxLocalFano, 100*a.MaxShare1s)
}
