// Package stormstats judges how a fleet's connect attempts arrived: spread
// out, or in synchronised waves.
//
// Waves means devices retried in step. A material share of the attempts
// arrives in recurring bursts that are narrow against the gaps between
// them. Independent attempts at a smoothly varying rate would not produce
// such bursts. Spread means the arrivals are consistent with independent
// attempts at a smoothly varying rate. That covers one step up when a
// broker returns, a decay, a ramp, a slow oscillation, and the constant
// pace of an admission limiter. Inconclusive means too few arrivals to call
// them spread.
//
// The test (Judge) looks for bursts at every width. A burst is a window
// that holds at least Method.Contrast times the arrivals of each of the
// three windows of its width on either side. It must hold them beyond
// chance after correcting for every window tried. Two or more bursts that
// carry a material share of the arrivals are waves. One burst alone
// (everyone reconnecting at their first retry) is reported but is not a
// sequence of rounds. Arrivals are streamed into a Histogram, so ten
// million are judged in the memory of its bins.
//
// Times stamped on a coarse tick, as logs write them, are made ready with
// Prepare. Reading the logs people have (mosquitto's, JSON lines, CSV,
// devicesim's events.csv) and finding the disruptions they show is
// internal/arrivallog's.
package stormstats

import (
	"cmp"
	"math"
	"math/bits"
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
// NaN for an empty series. It reorders a copy; Percentiles reorders xs
// itself, once for many.
func Percentile(xs []float64, p float64) float64 {
	return Percentiles(slices.Clone(xs), p)[0]
}

// Percentiles returns the p-th percentile (0-100) of xs by nearest rank for
// each p (NaN for an empty series). These are the values a sort of xs would
// put at those ranks, NaNs first as slices.Sort puts them. It reorders xs
// in place, selecting each rank rather than sorting. A hundred million
// recovery times take seconds to sort and a few passes to select from.
func Percentiles(xs []float64, ps ...float64) []float64 {
	out := make([]float64, len(ps))
	if len(xs) == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	ranks := make([]int, len(ps))
	for i, p := range ps {
		ranks[i] = min(max(int(math.Ceil(p/100*float64(len(xs)))), 1), len(xs)) - 1
	}
	order := make([]int, len(ps)) // the ranks, ascending: each selection narrows the next
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return ranks[a] - ranks[b] })
	lo := 0
	for _, i := range order {
		k := ranks[i]
		if k >= lo {
			selectRank(xs[lo:], k-lo)
			lo = k // xs[:k] <= xs[k] <= xs[k+1:]
		}
		out[i] = xs[k]
	}
	return out
}

// selectRank reorders xs so that xs[k] is the value a sort would put there.
// None greater comes before it and none less after (cmp.Less's order: NaNs
// least). It is a quickselect with a median-of-three pivot and a three-way
// partition. Many equal values (an unjittered fleet back at one instant)
// thus cost one pass. Past 2 log2 n rounds it sorts instead, which bounds
// the worst case as introsort does.
func selectRank(xs []float64, k int) {
	for depth := 2 * bits.Len(uint(len(xs))); len(xs) > 16; depth-- {
		if depth == 0 {
			slices.SortFunc(xs, cmp.Compare[float64])
			return
		}
		a, b, c := xs[0], xs[len(xs)/2], xs[len(xs)-1]
		pivot := medianOf3(a, b, c)
		// [0, lt) < pivot, [lt, i) == pivot, (gt, end) > pivot
		lt, i, gt := 0, 0, len(xs)-1
		for i <= gt {
			switch x := xs[i]; {
			case cmp.Less(x, pivot):
				xs[lt], xs[i] = xs[i], xs[lt]
				lt++
				i++
			case cmp.Less(pivot, x):
				xs[i], xs[gt] = xs[gt], xs[i]
				gt--
			default:
				i++
			}
		}
		switch {
		case k < lt:
			xs = xs[:lt]
		case k <= gt:
			return
		default:
			xs, k = xs[gt+1:], k-gt-1
		}
	}
	slices.SortFunc(xs, cmp.Compare[float64])
}

// medianOf3 is the median of a, b and c in cmp.Less's order.
func medianOf3(a, b, c float64) float64 {
	if cmp.Less(b, a) {
		a, b = b, a
	}
	if cmp.Less(c, b) {
		b = c
		if cmp.Less(b, a) {
			b = a
		}
	}
	return b
}
