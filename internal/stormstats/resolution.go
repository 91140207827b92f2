package stormstats

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Ticks are the grids a log's timestamps are commonly written on: whole
// seconds (mosquitto, syslog), tenths, hundredths, milliseconds.
var Ticks = []time.Duration{time.Second, 100 * time.Millisecond, 10 * time.Millisecond, time.Millisecond}

// DetectTick returns the coarsest of Ticks that every time sits on, or 0
// when the times are finer than a millisecond. A whole-second log says
// nothing about when within its second an arrival came: fifty arrivals
// stamped 12 are fifty arrivals somewhere in [12 s, 13 s), not a burst.
func DetectTick(times []time.Duration) time.Duration {
	if len(times) < 2 {
		return 0 // one time sits on every grid
	}
	for _, tick := range Ticks {
		if !slices.ContainsFunc(times, func(t time.Duration) bool { return t%tick != 0 }) {
			return tick
		}
	}
	return 0
}

// smearSeed fixes the draws that place each arrival within its tick, so a
// log is judged the same way every time.
const smearSeed = 0x7469636b

// smear places each arrival uniformly within its tick, [t, t+tick): the
// most a stamp says (a clock read and truncated, as mosquitto's is).
// Independent arrivals stay independent and uniform, so a smooth rate
// stays smooth, and a round narrower than the tick fills one or two ticks.
func smear(times []time.Duration, tick time.Duration) {
	r := rand.New(rand.NewPCG(smearSeed, uint64(tick)))
	for i := range times {
		times[i] += time.Duration(r.Int64N(int64(tick)))
	}
}

// Resolvable is the shortest period between rounds that a log on tick can
// show. A burst is at least a tick wide. It needs quiet ticks on both sides
// of it (Method's neighbours, a step away). Rounds closer together are
// indistinguishable, at this resolution, from arrivals at a smooth rate.
func Resolvable(tick time.Duration) time.Duration {
	return time.Duration(neighbours+2) * tick
}

// SetAside is a group of lines Prepare left out of the judgement. Such a
// line is a stray far from the rest, such as a clock not yet set or another
// day's line. It would stretch the span so far that a storm became one
// window.
type SetAside struct {
	Count int     `json:"count"`
	Lines []int32 `json:"lines"` // the first few, from 1
	// AwayS is how far the group lies from the arrivals that were judged,
	// in seconds (negative: before them).
	AwayS float64 `json:"away_s"`
	Why   string  `json:"why"`
}

// straysGap is the least gap that can separate a stray group from the rest.
// It is ten minutes, past any retry schedule's cap that a storm's own
// stragglers keep to. A clock stepped by minutes is thus caught as well as
// one never set. strayShare is the most of the arrivals such a group may
// hold. A second disruption's recovery is thus never a stray group.
const (
	straysGap      = 10 * time.Minute
	strayShare     = 0.01
	maxListedLines = 10
)

// setAsideStrays splits times into the arrivals to judge and the groups to
// set aside. After sorting, the times are cut at every gap longer than ten
// minutes and than twice the span of the middle 80 %. A group holding at
// most 1 % of the arrivals is set aside. Several disruptions minutes or
// hours apart each keep their arrivals. A lone line from another day, or
// from a clock stepped by a quarter of an hour, does not.
func setAsideStrays(times []time.Duration, lines []int32) (kept []time.Duration, strays []SetAside) {
	n := len(times)
	if n < 2 {
		return times, nil
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(times[a], times[b]) })
	at := func(q float64) time.Duration { return times[order[min(n-1, int(q*float64(n)))]] }
	gap := max(straysGap, 2*(at(0.9)-at(0.1)))
	type group struct{ from, to int } // positions in order, [from, to)
	var groups []group
	start := 0
	for k := 1; k <= n; k++ {
		if k == n || times[order[k]]-times[order[k-1]] > gap {
			groups = append(groups, group{start, k})
			start = k
		}
	}
	if len(groups) == 1 {
		return times, nil
	}
	keep := make([]bool, len(groups))
	var lo, hi time.Duration // the kept span
	first := true
	for g, gr := range groups {
		if float64(gr.to-gr.from) > strayShare*float64(n) {
			keep[g] = true
			if first {
				lo, first = times[order[gr.from]], false
			}
			hi = times[order[gr.to-1]]
		}
	}
	if first { // no group is large: nothing stands out as the rest
		return times, nil
	}
	drop := make([]bool, n)
	for g, gr := range groups {
		if keep[g] {
			continue
		}
		s := SetAside{Count: gr.to - gr.from}
		for k := gr.from; k < gr.to; k++ {
			drop[order[k]] = true
		}
		var idx []int
		for k := gr.from; k < gr.to; k++ {
			idx = append(idx, order[k])
		}
		slices.Sort(idx) // file order
		for _, i := range idx[:min(len(idx), maxListedLines)] {
			if lines != nil {
				s.Lines = append(s.Lines, lines[i])
			} else {
				s.Lines = append(s.Lines, int32(i+1))
			}
		}
		if t := times[order[gr.to-1]]; t < lo {
			s.AwayS = (t - lo).Seconds()
		} else {
			s.AwayS = (times[order[gr.from]] - hi).Seconds()
		}
		s.Why = strayWhy(s, times[order[gr.from]])
		strays = append(strays, s)
	}
	kept = make([]time.Duration, 0, n)
	for i, t := range times {
		if !drop[i] {
			kept = append(kept, t)
		}
	}
	return kept, strays
}

// strayWhy says what a set-aside group most likely is.
func strayWhy(s SetAside, t time.Duration) string {
	where := "after"
	away := s.AwayS
	if away < 0 {
		where, away = "before", -away
	}
	what := fmt.Sprintf("%s %s the rest", humanDuration(away), where)
	lines := "line"
	if s.Count > 1 {
		lines = fmt.Sprintf("%d lines", s.Count)
	}
	switch {
	case t >= 0 && t < 365*24*time.Hour && away > 365*24*3600:
		return fmt.Sprintf("%s %s, near time 0: a clock not yet set?", lines, what)
	case away >= 12*3600:
		return fmt.Sprintf("%s %s: another day's lines?", lines, what)
	}
	return fmt.Sprintf("%s %s: a clock jump, or another storm?", lines, what)
}

// humanDuration writes seconds as the largest sensible unit.
func humanDuration(s float64) string {
	switch {
	case s >= 2*365*24*3600:
		return fmt.Sprintf("%.0f years", s/(365.25*24*3600))
	case s >= 2*24*3600:
		return fmt.Sprintf("%.0f days", s/(24*3600))
	case s >= 2*3600:
		return fmt.Sprintf("%.0f hours", s/3600)
	}
	return fmt.Sprintf("%.0f minutes", s/60)
}

// Preparation is what Prepare did to a log before judging it.
type Preparation struct {
	// TickS is the grid the timestamps sit on (0: finer than 1 ms). Each
	// arrival is placed uniformly within its tick, and no burst narrower
	// than a tick is looked for.
	TickS float64 `json:"tick_s"`
	// ResolvableS: rounds closer together than this cannot be told from
	// arrivals at a smooth rate at this resolution (0 without a tick).
	ResolvableS float64 `json:"resolvable_s,omitempty"`
	// Unresolved says why the tick may hide rounds, if it may. Either the
	// series is too short to judge at this resolution, or its tick counts
	// vary far more or far less than independent arrivals' would. Qualify
	// then turns a spread verdict into inconclusive.
	Unresolved string     `json:"unresolved,omitempty"`
	SetAside   []SetAside `json:"set_aside,omitempty"`
}

// Qualify is j as the log's resolution lets it stand: spread becomes
// inconclusive where the tick may hide rounds (Preparation.Unresolved).
// Waves stand: their bursts were seen at a scale the tick resolves.
func (p Preparation) Qualify(j Judgement) Judgement {
	if p.Unresolved != "" && j.Verdict == Spread {
		j.Verdict = Inconclusive
		j.Reason = "inconclusive at this resolution: " + p.Unresolved + "; " + j.Reason
	}
	return j
}

// resolvableSpans is how many Resolvable periods a series must span to
// be judged at its tick's resolution.
const resolvableSpans = 4

// unresolved says whether arrivals stamped on tick may hold rounds the tick
// hides ("" if not). There are two signs. One is a series shorter than a
// few resolvable periods, where no round could show. The other is tick
// counts that independent arrivals at a smooth rate would not give. For
// those, each tick whose neighbours three away hold 10 or more is scored
// u = (c - m)^2 / (70/36)m. Here m is the quadratic through the four
// nearest ticks' counts. When arrivals are independent, u is about
// chi-squared with one degree of freedom, since c - m has variance 70/36
// times the rate. Its median is 0.455. Rounds finer than the tick but a few
// ticks apart put most ticks above it. Rounds finer than the tick and
// closer than it (or a limiter's even pace) put most below. On ticks under
// a second, no reconnect schedule does that. A sign test on the share above
// calls it, at 4 standard deviations either way. That is as wide as
// correlated scores make them. The median is robust to the few ticks a step
// up or a sharp bend disturbs.
func unresolved(times []time.Duration, tick time.Duration) string {
	n := len(times)
	if n < 2 {
		return ""
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	span := sorted[n-1-n/100] - sorted[n/100] // the middle 98 %
	if need := resolvableSpans * Resolvable(tick); span < need {
		return fmt.Sprintf("the arrivals span %s, less than the %s it takes rounds to show on a %s tick",
			seconds(span.Seconds()), seconds(need.Seconds()), seconds(tick.Seconds()))
	}
	first, last := floorDiv(int64(sorted[0]), int64(tick)), floorDiv(int64(sorted[n-1]), int64(tick))
	if last-first+1 > maxDispersionTicks {
		return "" // a long fine-grained log: its tick hides nothing the judge looks for
	}
	counts := make([]int32, last-first+1)
	for _, t := range sorted {
		counts[floorDiv(int64(t), int64(tick))-first]++
	}
	var scored, above int
	for i := 3; i+3 < len(counts); i++ {
		// Which ticks are scored is decided by the ticks three away, not by
		// those that make m. Choosing ticks whose neighbours happened to
		// run high would score c against an m above its rate. A smooth rate
		// whose ticks hover about 5 would then read as rounds.
		if counts[i-3]+counts[i+3] < 10 {
			continue
		}
		// m is the quadratic through the four nearest ticks, taken at i. It
		// is exact for a rate's curvature. At a million arrivals (a
		// minute's sinusoid on a 1 s tick) that curvature outweighs the
		// counts' noise. c - m then has variance (1 + 34/36) times the
		// rate.
		m := (4*float64(counts[i-1]+counts[i+1]) - float64(counts[i-2]+counts[i+2])) / 6
		if m <= 0 {
			continue
		}
		scored++
		if d := float64(counts[i]) - m; d*d/(70.0/36*m) > chi2Median {
			above++
		}
	}
	if scored < minScoredTicks {
		return ""
	}
	z := (float64(above) - float64(scored)/2) / (scoreSpread * math.Sqrt(float64(scored)/4))
	switch {
	case z > 4:
		return fmt.Sprintf("%d of %d ticks differ from their neighbours by more than independent arrivals would (half would): rounds a few ticks apart?",
			above, scored)
	case z < -4 && tick >= time.Second:
		// Below a second no reconnect schedule makes rounds closer than the
		// tick. An admission limiter's even pace, finer than the tick,
		// makes its counts as regular. That is spread, not rounds hidden.
		return fmt.Sprintf("only %d of %d ticks differ from their neighbours as much as independent arrivals would (half would): rounds closer than a tick, or a limiter's even pace?",
			above, scored)
	}
	return ""
}

const (
	chi2Median = 0.4549 // of chi-squared with one degree of freedom
	// scoreSpread is how much more the share of ticks above chi2Median
	// varies than independent ticks' would. Each count enters four of its
	// neighbours' m, so their scores are correlated. 1.37 is the spread of
	// z measured on independent arrivals at 10 to 100,000 a tick (20,000
	// series each). Without it, 0.4 % of smooth series would read as rounds
	// a few ticks apart.
	scoreSpread        = 1.37
	minScoredTicks     = 30
	maxDispersionTicks = 10_000_000
)

// Prepare makes arrival times (with the log lines they came from, or nil)
// ready to judge with m. It sets aside lines far from the rest. It finds
// the tick the times sit on. It places each arrival within its tick. It
// changes times. The Method it returns tries no window narrower than the
// tick.
func Prepare(times []time.Duration, lines []int32, m Method) (*Histogram, Method, Preparation) {
	kept, strays := setAsideStrays(times, lines)
	p := Preparation{SetAside: strays}
	tick := DetectTick(kept)
	if tick > 0 {
		p.Unresolved = unresolved(kept, tick)
		smear(kept, tick)
		m.MinWidth = max(m.MinWidth, tick)
		p.TickS, p.ResolvableS = tick.Seconds(), Resolvable(tick).Seconds()
	}
	h := &Histogram{}
	if len(kept) > 0 {
		h.reserve(slices.Min(kept), slices.Max(kept))
	}
	for _, t := range kept {
		h.Add(t)
	}
	return h, m, p
}
