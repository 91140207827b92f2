package stormstats

import (
	"math"
	"math/bits"
	"time"
)

// FinestResolution is a Histogram's bin width until its span outgrows
// MaxBins bins. It is fine enough that devices retrying in lock-step land
// in one bin. It is four times finer than the millisecond timestamps of a
// log.
const FinestResolution = 250 * time.Microsecond

// MaxBins bounds a Histogram's memory (4 bytes a bin, 32 MiB): beyond
// MaxBins x FinestResolution (35 minutes) the bins double in width as often
// as the span needs.
const MaxBins = 1 << 23

// Histogram counts arrival times in bins of equal width. A series of any
// length is thus judged in memory that does not grow with it. Arrivals are
// streamed in with Add, in any order. The zero value is an empty histogram
// at FinestResolution. A Histogram is not safe for concurrent use.
type Histogram struct {
	res    time.Duration
	lo     int64 // the first bin's index: it starts at lo x res
	counts []uint32
	n      int64
	// the time known to have been watched, beyond the first and last
	// arrival (see Cover)
	from, to time.Duration
	covered  bool
}

// Cover records that arrivals were watched for at t. A run knows there was
// none between the disruption and its first attempt. Judge can then see a
// burst that comes first. Without Cover, the watched time is taken to run
// from the first arrival to the last.
func (h *Histogram) Cover(t time.Duration) {
	if !h.covered {
		h.from, h.to, h.covered = t, t, true
	}
	h.from, h.to = min(h.from, t), max(h.to, t)
}

// Add counts one arrival at t (any duration, negative included).
func (h *Histogram) Add(t time.Duration) { h.AddN(t, 1) }

// AddN counts k arrivals at t.
func (h *Histogram) AddN(t time.Duration, k int) {
	if k <= 0 {
		return
	}
	if h.res == 0 {
		h.res = FinestResolution
	}
	i := floorDiv(int64(t), int64(h.res))
	if h.counts == nil {
		h.lo = i
		h.counts = make([]uint32, 1, 1024)
	}
	for i < h.lo || i >= h.lo+int64(len(h.counts)) {
		if !h.grow(i) {
			i = floorDiv(int64(t), int64(h.res))
		}
	}
	h.counts[i-h.lo] += uint32(k)
	h.n += int64(k)
}

// reserve makes room at once for arrivals from lo to hi, in an empty
// histogram: a caller that knows its arrivals' span spares the copies of
// growing to it.
func (h *Histogram) reserve(lo, hi time.Duration) {
	if h.counts != nil || hi < lo {
		return
	}
	if h.res == 0 {
		h.res = FinestResolution
	}
	first, last := floorDiv(int64(lo), int64(h.res)), floorDiv(int64(hi), int64(h.res))
	if last-first+1 > MaxBins {
		return // bins of twice the width, as grow makes them
	}
	h.lo, h.counts = first, make([]uint32, last-first+1)
}

// grow makes room for bin i: more bins while the span fits in MaxBins,
// otherwise bins of twice the width. It reports whether bin indexes kept
// their meaning (false: recompute them at the new width).
func (h *Histogram) grow(i int64) bool {
	if i >= h.lo && i-h.lo < int64(cap(h.counts)) {
		h.counts = h.counts[:i-h.lo+1]
		return true
	}
	first, last := h.occupied()
	lo, hi := i, i+1
	if first <= last {
		lo, hi = min(h.lo+int64(first), i), max(h.lo+int64(last)+1, i+1)
	}
	if hi-lo > MaxBins {
		h.coarsen()
		return false
	}
	// Leave room on both sides, most on the side that grew, so that a
	// series arriving in order, in reverse or at random costs amortised
	// O(1) per bin.
	size := min(max(2*(hi-lo), 1024), MaxBins)
	slack := size - (hi - lo)
	newLo := lo - slack/4
	if i < h.lo {
		newLo = lo - slack*3/4
	}
	grown := make([]uint32, size)
	if first <= last {
		copy(grown[h.lo+int64(first)-newLo:], h.counts[first:last+1])
	}
	h.counts, h.lo = grown[:hi-newLo], newLo
	return true
}

// coarsen doubles the bin width, merging pairs of bins.
func (h *Histogram) coarsen() {
	lo, hi := floorDiv(h.lo, 2), floorDiv(h.lo+int64(len(h.counts))-1, 2)
	merged := make([]uint32, hi-lo+1)
	for j, c := range h.counts {
		merged[floorDiv(h.lo+int64(j), 2)-lo] += c
	}
	h.counts, h.lo, h.res = merged, lo, 2*h.res
}

// Count is the number of arrivals added.
func (h *Histogram) Count() int64 { return h.n }

// Resolution is the current bin width.
func (h *Histogram) Resolution() time.Duration {
	if h.res == 0 {
		return FinestResolution
	}
	return h.res
}

// Span is the time from the start of the first occupied bin to the end of
// the last one (0 when empty).
func (h *Histogram) Span() time.Duration {
	first, last := h.occupied()
	if first > last {
		return 0
	}
	return time.Duration(last-first+1) * h.res
}

// occupied returns the indexes (into counts) of the first and last
// non-empty bins; first > last when there are none.
func (h *Histogram) occupied() (first, last int) {
	first, last = 0, len(h.counts)-1
	for first <= last && h.counts[first] == 0 {
		first++
	}
	for last >= first && h.counts[last] == 0 {
		last--
	}
	return first, last
}

// Counts returns the arrivals in consecutive buckets of width bucket from
// start to the last arrival: out[i] counts [start + i*bucket, start +
// (i+1)*bucket). Each bin is counted in the bucket holding its start, so
// a bucket narrower than Resolution leaves gaps; arrivals before start are
// left out.
func (h *Histogram) Counts(start, bucket time.Duration) []int {
	_, last := h.occupied()
	if last < 0 || bucket <= 0 {
		return nil
	}
	end := time.Duration(h.lo+int64(last)) * h.res
	if end < start {
		return nil
	}
	out := make([]int, int((end-start)/bucket)+1)
	for j, c := range h.counts[:last+1] {
		t := time.Duration(h.lo+int64(j)) * h.res
		if c == 0 || t < start {
			continue
		}
		out[int((t-start)/bucket)] += int(c)
	}
	return out
}

// Merge adds every arrival counted in o, and the time o watched.
func (h *Histogram) Merge(o *Histogram) {
	if o.covered {
		h.Cover(o.from)
		h.Cover(o.to)
	}
	for j, c := range o.counts {
		if c > 0 {
			h.AddN(time.Duration(o.lo+int64(j))*o.res, int(c))
		}
	}
}

// rebinned returns the counts over the watched time at a width of factor
// bins (a power of two), and the time the first one starts.
func (h *Histogram) rebinned(factor int64) (counts []int32, start time.Duration) {
	lo, hi, ok := h.watched()
	if !ok {
		return nil, 0
	}
	shift := uint(bits.TrailingZeros64(uint64(factor)))
	lo, hi = lo>>shift, hi>>shift
	counts = make([]int32, hi-lo+1)
	for j, c := range h.counts {
		if c > 0 {
			counts[((h.lo+int64(j))>>shift)-lo] += int32(c)
		}
	}
	return counts, time.Duration(lo*factor) * h.res
}

// watched is the range of bins (absolute indexes, inclusive) from the first
// arrival or Cover, whichever is earlier, to the last.
func (h *Histogram) watched() (lo, hi int64, ok bool) {
	first, last := h.occupied()
	if first > last && !h.covered {
		return 0, 0, false
	}
	lo, hi = math.MaxInt64, math.MinInt64
	if first <= last {
		lo, hi = h.lo+int64(first), h.lo+int64(last)
	}
	if h.covered {
		res := int64(h.Resolution())
		lo, hi = min(lo, floorDiv(int64(h.from), res)), max(hi, floorDiv(int64(h.to), res))
	}
	return lo, hi, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
