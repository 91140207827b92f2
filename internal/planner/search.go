package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Options are how hard the planner searches. The zero Options are the
// defaults.
type Options struct {
	// ScreenDevices is the fleet every candidate is screened on, its broker
	// scaled with it (0: 10,000, or the question's fleet if smaller).
	ScreenDevices int
	// Confirm is how many of the best candidates run again at full scale
	// (0: 3); the recommendation on every seed, the others on one.
	Confirm int
	// Candidates, if set, replaces the search space (tests, and a user who
	// asks about a few policies alone).
	Candidates []Candidate
	// Outages, if set, replaces the outage lengths screened (half, once and
	// twice the question's).
	Outages []time.Duration
	// Parallel is how many runs go at once (0: 2).
	Parallel int
	// Progress, if set, gets a line as each stage ends and a counter while
	// it runs.
	Progress io.Writer
}

// defaultScreen is the fleet candidates are screened on. At 10,000 a
// million-device storm's p99 comes out within 8.5 % of the full run's
// (1.1 % on average) and its attempts within 1.4 %, seed by seed
// (TestAScaledDownFleetPredictsTheFullOne).
const defaultScreen = 10_000

// Answer is the planner's reply.
type Answer struct {
	Question Question `json:"question"`
	// Recommendation is the candidate that meets every bound with the
	// fewest attempts a device, confirmed at full scale; nil if none does.
	Recommendation *Scorecard `json:"recommendation,omitempty"`
	// Closest is the candidate that came nearest when none met the bounds.
	Closest *Scorecard `json:"closest,omitempty"`
	// Field is the best formula a remote configuration can set: the
	// mission's formula, its base, jitter and cap within
	// remoteconfig.DefaultBounds. It is confirmed at full scale. A fleet
	// in the field can take it without new firmware.
	Field *Scorecard `json:"field,omitempty"`
	// Confirmed are the best candidates run again at full scale.
	Confirmed []Scorecard `json:"confirmed"`
	// Frontier is the screened candidates none beats on both recovery p99
	// and the broker's busiest second, best p99 first.
	Frontier []Scorecard `json:"frontier"`
	// Screened is every candidate, as screened; Rejected the reasons of
	// those that failed, counted.
	Screened []Scorecard     `json:"screened"`
	Rejected []RejectedGroup `json:"rejected"`
	// Current is the fleet's policy today on its own, and Move the least
	// share of the fleet that must take the recommendation; nil if the
	// question names none.
	Current *Scorecard `json:"current,omitempty"`
	Move    *Rollout   `json:"move,omitempty"`
	Outages []float64  `json:"outages_s"` // the outage lengths screened
	WallS   float64    `json:"wall_s"`
}

// RejectedGroup counts the candidates a reason rejected.
type RejectedGroup struct {
	Reason   string   `json:"reason"`
	Count    int      `json:"count"`
	Examples []string `json:"examples"`
}

// Plan answers q. A question no candidate answers returns the Answer,
// with Closest, and an error wrapping ErrNoPolicy that says what would
// have to change.
func Plan(ctx context.Context, q Question, o Options) (*Answer, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	q = q.withDefaults()
	start := time.Now()
	cands := o.Candidates
	if len(cands) == 0 {
		cands = SearchSpace(q)
	}
	for _, c := range cands {
		if err := stormPlan(q, c, 1, 1, q.Outage).Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, c, err)
		}
	}
	a := &Answer{Question: q}
	outages := o.Outages
	if len(outages) == 0 {
		outages = []time.Duration{q.Outage / 2, q.Outage, 2 * q.Outage}
	}
	for _, d := range outages {
		a.Outages = append(a.Outages, d.Seconds())
	}
	screen := o.screen(q)
	var err error
	a.Screened, err = o.screenAll(ctx, q, cands, screen, outages)
	if err != nil {
		return nil, err
	}
	ranked := rank(a.Screened)
	a.Frontier = frontier(a.Screened)
	a.Rejected = rejected(a.Screened)
	if err := a.confirm(ctx, q, o, ranked); err != nil {
		return nil, err
	}
	if err := a.field(ctx, q, o, ranked); err != nil {
		return nil, err
	}
	if q.Current != "" && a.Recommendation != nil {
		if err := a.rollout(ctx, q, o, screen, outages); err != nil {
			return nil, err
		}
	}
	a.WallS = time.Since(start).Seconds()
	if a.Recommendation == nil {
		return a, a.refusal()
	}
	return a, nil
}

// confirm runs the best candidates again at full scale, the first on
// every seed, the others on one; the recommendation is the first that
// still meets every bound there.
func (a *Answer) confirm(ctx context.Context, q Question, o Options, ranked []Scorecard) error {
	n := min(cmp.Or(o.Confirm, 3), len(ranked))
	var passing []Scorecard
	for _, r := range ranked[:n] {
		if r.Pass() {
			passing = append(passing, r)
		}
	}
	if len(passing) == 0 {
		if len(ranked) > 0 {
			closest := ranked[0]
			a.Closest = &closest
		}
		return nil
	}
	for i, c := range passing {
		seeds := q.Seeds
		if i > 0 && q.Devices > o.screen(q) {
			seeds = 1
		}
		out, err := o.runAll(ctx, q, []Candidate{c.Candidate}, q.Devices, []time.Duration{q.Outage}, seeds, "at full scale")
		if err != nil {
			return err
		}
		a.Confirmed = append(a.Confirmed, out[0])
		if a.Recommendation == nil && out[0].Pass() {
			rec := out[0]
			a.Recommendation = &rec
		}
	}
	if a.Recommendation == nil {
		closest := a.Confirmed[0]
		a.Closest = &closest
	}
	return nil
}

// field finds the best formula a remote configuration can set, and runs
// it at full scale, on one seed, unless it was confirmed already.
func (a *Answer) field(ctx context.Context, q Question, o Options, ranked []Scorecard) error {
	for _, c := range ranked {
		if !Remote(c.Candidate) {
			continue
		}
		for _, done := range a.Confirmed {
			if done.Candidate == c.Candidate {
				f := done
				a.Field = &f
				return nil
			}
		}
		seeds := q.Seeds
		if q.Devices > o.screen(q) {
			seeds = 1 // its spread over seeds is the screening's
		}
		out, err := o.runAll(ctx, q, []Candidate{c.Candidate}, q.Devices, []time.Duration{q.Outage}, seeds, "the formula at full scale")
		if err != nil {
			return err
		}
		a.Field = &out[0]
		return nil
	}
	return nil
}

func (o Options) screen(q Question) int {
	return min(cmp.Or(o.ScreenDevices, defaultScreen), q.Devices)
}

// refusal says why no candidate answers, and what would have to change.
func (a *Answer) refusal() error {
	c := a.Closest
	if c == nil {
		return fmt.Errorf("%w: no candidate to try", ErrNoPolicy)
	}
	q := a.Question
	var hints []string
	if c.P99.Max > q.TargetP99.Seconds() {
		hints = append(hints, fmt.Sprintf("a %.0f s target, or a broker admitting about %.0f connects/s",
			math.Ceil(c.P99.Max), q.AdmitRate*c.P99.Max/q.TargetP99.Seconds()))
	}
	if q.PeakBound > 0 && c.Peak.Max > q.PeakBound {
		hints = append(hints, fmt.Sprintf("a bound of %.0f connects in the broker's busiest second", c.Peak.Max))
	}
	if q.MaxAttempts > 0 && c.Attempts.Max > q.MaxAttempts {
		hints = append(hints, fmt.Sprintf("%.1f attempts a device", c.Attempts.Max))
	}
	hint := ""
	if len(hints) > 0 {
		hint = fmt.Sprintf("; the closest, %s, needs %s", c.Candidate, strings.Join(hints, " and "))
	}
	return fmt.Errorf("%w: %s%s", ErrNoPolicy, strings.Join(c.Why, "; "), hint)
}

// setting is one run's outage and seed.
type setting struct {
	outage time.Duration
	seed   uint64
}

// settings are every outage with every seed.
func settings(q Question, outages []time.Duration, seeds uint64) []setting {
	var out []setting
	for _, d := range outages {
		for s := range seeds {
			out = append(out, setting{d, q.Seed + s})
		}
	}
	return out
}

// runAll runs every candidate on every outage and seed, on a fleet of n,
// and judges each.
func (o Options) runAll(ctx context.Context, q Question, cands []Candidate, n int, outages []time.Duration, seeds uint64, stage string) ([]Scorecard, error) {
	each := settings(q, outages, seeds)
	runs, err := o.runEach(ctx, q, cands, n, func(int) []setting { return each }, stage)
	if err != nil {
		return nil, err
	}
	out := make([]Scorecard, len(cands))
	for i, c := range cands {
		out[i] = judge(q, c, n, runs[i])
	}
	return out, nil
}

// screenFurther is how many candidates the second pass screens.
const screenFurther = 12

// screenAll screens every candidate in two passes. The first is one run
// each, at the question's outage and first seed. The second runs every
// other outage and seed for the best screenFurther. It skips those the
// first run ruled out by far: waves, devices not back, or a bound missed
// by half again. A candidate out of the running costs one run.
func (o Options) screenAll(ctx context.Context, q Question, cands []Candidate, n int, outages []time.Duration) ([]Scorecard, error) {
	first := setting{q.Outage, q.Seed}
	runs, err := o.runEach(ctx, q, cands, n, func(int) []setting { return []setting{first} }, "screening")
	if err != nil {
		return nil, err
	}
	var rest []setting
	for _, s := range settings(q, outages, q.Seeds) {
		if s != first {
			rest = append(rest, s)
		}
	}
	// The rest go to the best few: a candidate behind them on its first
	// run is judged on it alone.
	first1 := make([]Scorecard, len(cands))
	for i, c := range cands {
		first1[i] = judge(q, c, n, runs[i])
	}
	best := map[Candidate]bool{}
	for _, b := range rank(first1) {
		if len(best) == screenFurther || ruledOut(q, b.runs[0]) {
			break
		}
		best[b.Candidate] = true
	}
	more, err := o.runEach(ctx, q, cands, n, func(i int) []setting {
		if !best[cands[i]] {
			return nil
		}
		return rest
	}, "screening the best")
	if err != nil {
		return nil, err
	}
	out := make([]Scorecard, len(cands))
	for i, c := range cands {
		out[i] = judge(q, c, n, append(runs[i], more[i]...))
	}
	return out, nil
}

// ruledOut says whether one run rules a candidate out by far.
func ruledOut(q Question, r run) bool {
	return r.atLeast || r.verdict == stormstats.Waves || r.p99 > 1.5*q.TargetP99.Seconds() ||
		q.PeakBound > 0 && r.peak > 1.5*q.PeakBound || q.MaxAttempts > 0 && r.attempts > 1.5*q.MaxAttempts
}

// runEach runs each candidate i on a fleet of n at each of its settings,
// o.Parallel runs at once, and returns each candidate's runs in order.
func (o Options) runEach(ctx context.Context, q Question, cands []Candidate, n int, of func(i int) []setting, stage string) ([][]run, error) {
	type job struct{ c, k int }
	runs := make([][]run, len(cands))
	total := 0
	for i := range cands {
		runs[i] = make([]run, len(of(i)))
		total += len(runs[i])
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var errs []error
	done := 0
	var wg sync.WaitGroup
	parallel := cmp.Or(o.Parallel, 2)
	start := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				st := of(j.c)[j.k]
				r, err := measure(ctx, q, stormPlan(q, cands[j.c], n, st.seed, st.outage), parallel > 1)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				runs[j.c][j.k] = r
				done++
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "\r%s: %d of %d runs, %s devices each", stage, done, total, plan.Thousands(n))
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for c := range cands {
		for k := range runs[c] {
			select {
			case jobs <- job{c, k}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if o.Progress != nil && total > 0 {
		fmt.Fprintf(o.Progress, "\r%s: %s devices a run, %d runs, %.1f s\n", stage, plan.Thousands(n), total, time.Since(start).Seconds())
	}
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return nil, err
	}
	return runs, nil
}

// rank orders outcomes. Those that pass come first, and of those, the ones
// with 10 % to spare. Then come fewest attempts a device: each is a
// connect the broker serves. Then comes the earlier p99. Those that fail
// are ordered by how far they missed.
func rank(outs []Scorecard) []Scorecard {
	const robust = 0.1
	r := slices.Clone(outs)
	slices.SortStableFunc(r, func(a, b Scorecard) int {
		switch {
		case a.Pass() != b.Pass():
			if a.Pass() {
				return -1
			}
			return 1
		case !a.Pass():
			return cmp.Compare(b.Margin, a.Margin)
		case (a.Margin >= robust) != (b.Margin >= robust):
			if a.Margin >= robust {
				return -1
			}
			return 1
		}
		// Attempts within 2 % of each other are alike: the earlier p99 wins.
		if math.Abs(a.Attempts.Median-b.Attempts.Median) > 0.02*max(a.Attempts.Median, b.Attempts.Median) {
			return cmp.Compare(a.Attempts.Median, b.Attempts.Median)
		}
		return cmp.Compare(a.P99.Max, b.P99.Max)
	})
	return r
}

// frontier is the outcomes no other beats on both the worst p99 and the
// worst busiest second, best p99 first, at most eight.
func frontier(outs []Scorecard) []Scorecard {
	var f []Scorecard
	for _, a := range outs {
		if a.AtLeast || a.Waves {
			continue
		}
		dominated := false
		for _, b := range outs {
			if b.AtLeast || b.Waves {
				continue
			}
			if b.P99.Max <= a.P99.Max && b.Peak.Max <= a.Peak.Max && (b.P99.Max < a.P99.Max || b.Peak.Max < a.Peak.Max) {
				dominated = true
				break
			}
		}
		if !dominated {
			f = append(f, a)
		}
	}
	slices.SortFunc(f, func(a, b Scorecard) int { return cmp.Compare(a.P99.Max, b.P99.Max) })
	if len(f) > 8 {
		// Keep both ends and an even spread between them.
		kept := make([]Scorecard, 0, 8)
		for i := range 8 {
			kept = append(kept, f[i*(len(f)-1)/7])
		}
		f = kept
	}
	return f
}

// rejected counts the reasons the failing outcomes failed for, by kind.
func rejected(outs []Scorecard) []RejectedGroup {
	kinds := []struct{ name, prefix string }{
		{"the fleet came back in waves", "the fleet came back in waves"},
		{"recovery p99 over the target", "recovery p99"},
		{"the broker's busiest second over the bound", "busiest second"},
		{"too many attempts a device", "attempts"},
	}
	var groups []RejectedGroup
	for _, k := range kinds {
		g := RejectedGroup{Reason: k.name}
		for _, o := range outs {
			for _, why := range o.Why {
				if strings.HasPrefix(why, k.prefix) || k.prefix == "attempts" && strings.Contains(why, "attempts a device") {
					g.Count++
					if len(g.Examples) < 3 {
						g.Examples = append(g.Examples, o.Candidate.String()+": "+why)
					}
					break
				}
			}
		}
		if g.Count > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}
