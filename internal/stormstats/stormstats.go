// Package stormstats judges how a fleet's connect attempts arrived: spread
// out, or in synchronised waves.
//
// Waves means devices retried in step: a material share of the attempts
// arrives in recurring bursts that are narrow against the gaps between
// them, bursts that independent attempts at a smoothly varying rate would
// not produce. Spread means the arrivals are consistent with independent
// attempts at a smoothly varying rate: one step up when a broker returns, a
// decay, a ramp, a slow oscillation, the constant pace of an admission
// limiter. Inconclusive means too few arrivals to call them spread.
//
// The test (Judge) looks for bursts at every width: a window that holds at
// least Method.Contrast times the arrivals of each of the three windows of
// its width on either side, beyond chance after correcting for every window
// tried. Two or more bursts that carry a material share of the arrivals are
// waves; one burst alone (everyone reconnecting at their first retry) is
// reported but is not a sequence of rounds. Arrivals are streamed into a
// Histogram, so ten million are judged in the memory of its bins.
package stormstats

import (
	"math"
	"slices"
	"time"
)

// Arrivals describes a series of arrivals: how many, over how long, and the
// busiest moments, as rates per second.
type Arrivals struct {
	Count int64   `json:"count"`
	SpanS float64 `json:"span_s"`
	// PeakPerS100ms and PeakPerS1s are the busiest 100 ms and 1 s bucket
	// (from the first arrival), as rates per second.
	PeakPerS100ms float64 `json:"peak_per_s_100ms"`
	PeakPerS1s    float64 `json:"peak_per_s_1s"`
}

// Summarize describes the arrivals in h.
func Summarize(h *Histogram) Arrivals {
	a := Arrivals{Count: h.Count(), SpanS: h.Span().Seconds()}
	if a.Count == 0 {
		return a
	}
	start := h.start()
	for _, b := range []struct {
		width time.Duration
		peak  *float64
	}{{100 * time.Millisecond, &a.PeakPerS100ms}, {time.Second, &a.PeakPerS1s}} {
		if h.Resolution() > b.width {
			continue // too coarse to say
		}
		*b.peak = float64(slices.Max(h.Counts(start, b.width))) / b.width.Seconds()
	}
	return a
}

// start is when the first occupied bin begins.
func (h *Histogram) start() time.Duration {
	first, _ := h.occupied()
	return time.Duration(h.lo+int64(first)) * h.res
}

// Percentile returns the p-th percentile (0-100) of xs by nearest rank, or
// NaN for an empty series. It sorts a copy; Percentiles sorts once for many.
func Percentile(xs []float64, p float64) float64 {
	return Percentiles(slices.Clone(xs), p)[0]
}

// Percentiles sorts xs in place and returns the p-th percentile (0-100) of
// it by nearest rank for each p (NaN for an empty series).
func Percentiles(xs []float64, ps ...float64) []float64 {
	slices.Sort(xs)
	out := make([]float64, len(ps))
	for i, p := range ps {
		if len(xs) == 0 {
			out[i] = math.NaN()
			continue
		}
		rank := int(math.Ceil(p / 100 * float64(len(xs))))
		out[i] = xs[min(max(rank, 1), len(xs))-1]
	}
	return out
}
