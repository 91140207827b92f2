package stormstats

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Verdict is what Judge decides about a series of arrivals.
type Verdict string

const (
	// Spread: consistent with independent attempts at a smoothly varying
	// rate (a step up, a decay, a ramp, a slow oscillation, a limiter's
	// constant pace), with at most one burst.
	Spread Verdict = "spread"
	// Waves: devices retried in step. At least two bursts, each narrow
	// against the silence around it, and the bursts besides the largest
	// carry a material share of the arrivals.
	Waves Verdict = "waves"
	// Inconclusive: too few arrivals to call them spread, and no waves
	// found among them.
	Inconclusive Verdict = "inconclusive"
)

// Method is how Judge decides; a report writes it beside the verdict.
type Method struct {
	// Contrast: a burst's window holds at least this many times the
	// arrivals of each of the six windows of its width around it, three on
	// each side. A smooth rate never reaches 2 (a full sinusoid's peak
	// reaches 1.9), a round of retries with no background is infinite.
	Contrast float64 `json:"contrast"`
	// Alpha bounds the chance of finding even one burst in arrivals that
	// hold none. Every window of every width is a test. The significance
	// bar is raised for all the windows that could pass it.
	Alpha float64 `json:"alpha"`
	// MinRecurringShare: the bursts other than the largest must hold at
	// least this share of all arrivals (in excess of the local rate) for the
	// arrivals to be waves. One burst is not a sequence of rounds.
	MinRecurringShare float64 `json:"min_recurring_share"`
	// MinArrivals: with fewer arrivals and no waves found, the verdict is
	// Inconclusive rather than Spread.
	MinArrivals int `json:"min_arrivals"`
	// MinWidth: no narrower window is tried, because the arrival times are
	// not known more finely (real agents on a loaded host start attempts
	// late, in batches). 0: the Histogram's resolution.
	MinWidth time.Duration `json:"min_width_ns,omitempty"`
}

// DefaultMethod is the method every devicesim report uses; docs/verdict.md gives
// its measured error rates.
var DefaultMethod = Method{Contrast: 3, Alpha: 0.001, MinRecurringShare: 0.05, MinArrivals: 100}

func (m Method) validate() error {
	switch {
	case !(m.Contrast >= 1):
		return fmt.Errorf("stormstats: contrast must be >= 1, got %g", m.Contrast)
	case !(m.Alpha > 0 && m.Alpha < 1):
		return fmt.Errorf("stormstats: alpha must be in (0, 1), got %g", m.Alpha)
	case !(m.MinRecurringShare >= 0 && m.MinRecurringShare <= 1):
		return fmt.Errorf("stormstats: min recurring share must be in [0, 1], got %g", m.MinRecurringShare)
	case m.MinArrivals < 0:
		return fmt.Errorf("stormstats: min arrivals must be >= 0, got %d", m.MinArrivals)
	case m.MinWidth < 0:
		return fmt.Errorf("stormstats: min width must be >= 0, got %v", m.MinWidth)
	}
	return nil
}

// Burst is a window that holds at least Method.Contrast times the arrivals
// of each window of its width around it, beyond chance.
type Burst struct {
	AtS    float64 `json:"at_s"`    // the window's start
	WidthS float64 `json:"width_s"` // its width: the arrivals lie within it
	Count  int64   `json:"count"`
	// Around is the mean count of the six windows of the same width
	// around it: what the local rate explains.
	Around float64 `json:"around"`
	Excess float64 `json:"excess"` // Count - Around
	// Contrast is Count over the busiest of the six (taken as at least 1).
	Contrast float64 `json:"contrast"`
	// Z is the evidence that the window exceeds its busiest neighbour, in
	// standard deviations (a signed-root likelihood ratio).
	Z        float64 `json:"z"`
	PeakPerS float64 `json:"peak_per_s"` // Count / WidthS
}

// Judgement is Judge's answer, with what it rests on.
type Judgement struct {
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	Count   int64   `json:"count"`
	// Synchrony is the share of arrivals in excess of what independent
	// arrivals at the local rate explain. It is summed over the bursts when
	// there are two or more. It is 0 when none recurs, and 1 when every
	// arrival came in rounds over silence. A single burst is not synchrony
	// between retries. It is listed in Bursts and described in Reason.
	Synchrony float64 `json:"synchrony"`
	// PeriodS is the median time between consecutive bursts. GapMinS and
	// GapMaxS are the shortest and longest. All three are set for waves
	// only. IoTCore at its cap gives 32 s. Its rounds while the broker is
	// down give 2 to 16 s.
	PeriodS float64 `json:"period_s,omitempty"`
	GapMinS float64 `json:"gap_min_s,omitempty"`
	GapMaxS float64 `json:"gap_max_s,omitempty"`
	// Bursts, in time order.
	Bursts []Burst `json:"bursts"`
	// Needed is how many arrivals an Inconclusive verdict would need.
	Needed int `json:"needed,omitempty"`
	// ResolutionS and WidestS are the narrowest and widest windows tried
	// (ResolutionS is at least Method.MinWidth);
	// WindowsTested is how many could have passed the significance bar,
	// ZCritical that bar.
	ResolutionS   float64 `json:"resolution_s"`
	WidestS       float64 `json:"widest_s"`
	WindowsTested int64   `json:"windows_tested"`
	ZCritical     float64 `json:"z_critical"`
	Method        Method  `json:"method"`
}

// neighbours is how many windows of a burst's width on each side must hold
// at most 1/Contrast of its arrivals. A round narrow against the gaps
// around it (three widths of quiet each side) passes. The peak of a smooth
// oscillation does not, as its shoulders are as wide as its peak. The
// neighbour windows start a quarter width away from the window, the step
// between windows. The quarter widths between may be no denser than the
// window itself.
const neighbours = 3

// scan reads the three each side's edges one by one: it fails to build
// otherwise
var _ = [1]int{}[neighbours-3]

// zFloor is the least evidence a candidate burst is kept for, before the
// significance bar is known.
const zFloor = 3.0

// Judge decides whether the arrivals in h came spread or in waves. It tries
// windows of every width from h's resolution to a quarter of the span. Each
// width is tried at steps of a quarter of itself. Its answer thus does not
// depend on the timescale of the policy or on the size of the fleet. It
// returns an error only for an invalid Method.
func Judge(h *Histogram, m Method) (Judgement, error) {
	if err := m.validate(); err != nil {
		return Judgement{}, err
	}
	j := Judgement{Count: h.Count(), Method: m, Bursts: []Burst{}}
	if j.Count == 0 {
		j.Verdict, j.Needed = Inconclusive, max(m.MinArrivals, 1)
		j.Reason = fmt.Sprintf("no arrivals: at least %d are needed", j.Needed)
		return j, nil
	}
	counts, start, res := binsFor(h)
	s := scan(counts, max(1, int((m.MinWidth+res-1)/res)), m)
	j.ResolutionS, j.WidestS = float64(s.narrowest)*res.Seconds(), float64(s.widest)*res.Seconds()
	j.WindowsTested, j.ZCritical = s.testable, s.zCritical
	for _, c := range s.select_() {
		at := start + time.Duration(c.t)*res
		width := time.Duration(c.h) * res
		j.Bursts = append(j.Bursts, Burst{AtS: at.Seconds(), WidthS: width.Seconds(), Count: c.count,
			Around: c.around, Excess: float64(c.count) - c.around, Contrast: float64(c.count) / max(float64(c.busiest), 1),
			Z: c.z, PeakPerS: float64(c.count) / width.Seconds()})
	}
	slices.SortFunc(j.Bursts, func(a, b Burst) int { return cmp.Compare(a.AtS, b.AtS) })
	decide(&j)
	return j, nil
}

// binsFor returns h's counts at a resolution fine enough for any burst the
// arrivals could show. That is 16 bins an arrival: a round of 100 is
// resolved to a sixteenth of the mean gap. The resolution is also coarse
// enough that sparse series are cheap to scan.
func binsFor(h *Histogram) ([]int32, time.Duration, time.Duration) {
	lo, hi, _ := h.watched()
	target := min(max(4096, 16*h.n), MaxBins)
	factor := int64(1)
	for (hi-lo+1)/factor > target {
		factor *= 2
	}
	counts, start := h.rebinned(factor)
	return counts, start, h.Resolution() * time.Duration(factor)
}

// candidate is a window that passed the contrast test.
type candidate struct {
	t, h    int   // start and width in bins
	count   int64 // arrivals in it
	busiest int64 // in the busiest of its neighbours
	around  float64
	z       float64
}

type scanResult struct {
	cands     []candidate
	narrowest int
	widest    int
	testable  int64
	zCritical float64
}

// tallyCap bounds the tally of window sizes: a window of more arrivals
// than this can reach any bar.
const tallyCap = 1 << 12

// scan tries every window. For the multiple-test correction it tallies each
// window by n, its arrivals plus its busiest neighbour's. Given n, the most
// evidence the window could show is all n in it. Only windows with n large
// enough to reach the bar therefore count as tests. This is Tarone's
// correction. It keeps the bar low for sparse series without giving up its
// guarantee.
func scan(counts []int32, narrowest int, m Method) scanResult {
	n := len(counts)
	prefix := make([]int64, n+1)
	for i, c := range counts {
		prefix[i+1] = prefix[i] + int64(c)
	}
	at := func(i int) int64 { return prefix[min(max(i, 0), n)] }
	var tally [tallyCap + 1]int64
	res := scanResult{narrowest: narrowest}
	minN := nMin(zFloor)
	for h := narrowest; h <= max(narrowest, n/4); h = nextWidth(h) {
		res.widest = h
		step := max(1, h/4)
		for t := 0; t < n; t += step {
			// The neighbours start a step away, so that a round the
			// window straddles by up to a step does not spill into them.
			before, after := t-step, t+h+step
			b3, a3 := at(before-neighbours*h), at(after+neighbours*h)
			if a3-b3 < minN {
				continue // too few around to be a test at any bar worth having
			}
			// the prefix sums at the neighbours' other edges, each read
			// once: the neighbours are their differences
			b0, b1, b2 := at(before), at(before-h), at(before-2*h)
			a0, a1, a2 := at(after), at(after+h), at(after+2*h)
			c := at(t+h) - at(t)
			busiest, sum := max(b0-b1, b1-b2, b2-b3, a1-a0, a2-a1, a3-a2), b0-b3+a3-a0
			tally[min(c+busiest, tallyCap)]++
			if float64(c) < m.Contrast*float64(busiest) || c+busiest < minN {
				continue
			}
			// A burst is a local peak: the quarter widths beside it, which
			// the neighbours skip, are no denser than it is. A round it
			// straddles spills into them at its own density. A wide window
			// beside a denser one is the tail of something else.
			if g := max(at(t)-at(before), at(after)-at(t+h)); g*int64(h) > c*int64(step) {
				continue
			}
			if z := zScore(c, busiest); z >= zFloor {
				res.cands = append(res.cands, candidate{t: t, h: h, count: c, busiest: busiest,
					around: float64(sum) / (2 * neighbours), z: z})
			}
		}
	}
	res.zCritical, res.testable = bar(tally[:], m.Alpha)
	return res
}

// nextWidth steps widths by about the square root of two.
func nextWidth(h int) int { return max(h+1, int(math.Round(float64(h)*math.Sqrt2))) }

// zScore is the signed root of the likelihood ratio for c arrivals in a
// window against b in a neighbour of the same width. The null is that both
// have the same rate: each of the c+b arrivals falls in the window with
// probability 1/2. It is 0 when c <= b.
func zScore(c, b int64) float64 {
	if c <= b {
		return 0
	}
	n := float64(c + b)
	f := float64(c) / n
	kl := f * math.Log(2*f)
	if f < 1 {
		kl += (1 - f) * math.Log(2*(1-f))
	}
	return math.Sqrt(2 * n * kl)
}

// nMin is the fewest arrivals (window and neighbour together) whose
// zScore can reach z: all of them in the window.
func nMin(z float64) int64 { return int64(math.Ceil(z * z / (2 * math.Ln2))) }

// bar returns the least z, in steps of 0.01, for which the windows able to
// reach it times the normal tail beyond it is at most alpha. tally[n]
// windows have n arrivals. bar also returns how many windows that is.
func bar(tally []int64, alpha float64) (z float64, windows int64) {
	above := make([]int64, len(tally)+1) // above[n]: windows with at least n
	for n := len(tally) - 1; n >= 0; n-- {
		above[n] = above[n+1] + tally[n]
	}
	for z = zFloor; ; z += 0.01 {
		windows = above[min(nMin(z), int64(len(tally)-1))]
		if float64(windows)*normalTail(z) <= alpha {
			return math.Round(z*100) / 100, windows
		}
	}
}

func normalTail(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// select_ keeps the candidates above the bar and picks bursts among them,
// narrowest first. A wider window centred on a burst takes its place when
// it shows it more strongly (all of a wide round, not its middle). It never
// joins two bursts. Rounds a growing gap apart are thus not taken for one,
// nor a burst and the smooth arrivals beside it.
func (s scanResult) select_() []candidate {
	var strong []candidate
	for _, c := range s.cands {
		if c.z >= s.zCritical {
			strong = append(strong, c)
		}
	}
	slices.SortFunc(strong, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.h, b.h), cmp.Compare(b.z, a.z), cmp.Compare(a.t, b.t))
	})
	var picked []candidate
	for _, c := range strong {
		overlap := -1
		for i, p := range picked {
			if c.t < p.t+p.h && p.t < c.t+c.h {
				if overlap >= 0 {
					overlap = -2 // two or more
					break
				}
				overlap = i
			}
		}
		switch {
		case overlap == -1:
			picked = append(picked, c)
		case overlap >= 0 && c.z > picked[overlap].z && centredOn(c, picked[overlap]):
			picked[overlap] = c
		}
	}
	return picked
}

// centredOn reports whether wide's middle lies inside narrow.
func centredOn(wide, narrow candidate) bool {
	mid := 2*wide.t + wide.h // twice the middle, in bins
	return mid >= 2*narrow.t && mid < 2*(narrow.t+narrow.h)
}

// decide sets the verdict, synchrony, period and reason from the bursts.
func decide(j *Judgement) {
	m := j.Method
	total, largest := 0.0, 0.0
	for _, b := range j.Bursts {
		total += b.Excess
		largest = max(largest, b.Excess)
	}
	n := float64(j.Count)
	recurring := (total - largest) / n
	if len(j.Bursts) >= 2 { // one burst is not synchrony between retries
		j.Synchrony = min(1, max(0, total/n))
	}
	switch {
	case len(j.Bursts) >= 2 && recurring >= m.MinRecurringShare:
		j.Verdict = Waves
		var gaps []float64
		for i := 1; i < len(j.Bursts); i++ {
			a, b := j.Bursts[i-1], j.Bursts[i]
			gaps = append(gaps, (b.AtS+b.WidthS/2)-(a.AtS+a.WidthS/2))
		}
		j.PeriodS = median(gaps)
		j.GapMinS, j.GapMaxS = slices.Min(gaps), slices.Max(gaps)
		every := "a burst every " + seconds(j.PeriodS)
		if j.GapMaxS > 1.5*j.GapMinS {
			every = fmt.Sprintf("bursts %s to %s apart (median %s)", seconds(j.GapMinS), seconds(j.GapMaxS), seconds(j.PeriodS))
		}
		j.Reason = fmt.Sprintf("%d bursts, each at least %gx every window of its width around it, beyond chance; "+
			"%.0f%% of arrivals in excess of the local rate; %s", len(j.Bursts), m.Contrast, 100*j.Synchrony, every)
	case j.Count < int64(m.MinArrivals):
		j.Verdict, j.Needed = Inconclusive, m.MinArrivals
		j.Reason = fmt.Sprintf("%d arrivals and no waves among them: at least %d are needed to call arrivals spread", j.Count, m.MinArrivals)
	default:
		j.Verdict = Spread
		j.Reason = spreadReason(j, recurring)
	}
}

func spreadReason(j *Judgement, recurring float64) string {
	m := j.Method
	none := fmt.Sprintf("no window from %s to %s wide holds %gx the arrivals of its neighbours beyond chance",
		seconds(j.ResolutionS), seconds(j.WidestS), m.Contrast)
	switch len(j.Bursts) {
	case 0:
		return none
	case 1:
		return "one burst, not repeated: " + j.Bursts[0].describe() + "; otherwise " + none
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d bursts, but those besides the largest hold %.1f%% of arrivals (< %.0f%%): the largest is ",
		len(j.Bursts), 100*recurring, 100*m.MinRecurringShare)
	big := slices.MaxFunc(j.Bursts, func(a, b Burst) int { return cmp.Compare(a.Excess, b.Excess) })
	b.WriteString(big.describe())
	return b.String()
}

// describe says what a burst was: when, how many, how narrow, how fast.
func (b Burst) describe() string {
	return fmt.Sprintf("%d arrivals within %s at %s (%s/s)", b.Count, seconds(b.WidthS), seconds(b.AtS), si(b.PeakPerS))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// seconds formats a duration in seconds readably: 250 µs, 12 ms, 3.4 s.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d == 0:
		return "0 s"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", s*1e3)
	case d < 100*time.Second:
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

// si formats a rate with thousands separators.
func si(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
