package planner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
)

// Rollout is how much of a fleet in the field must move to the
// recommendation: the question's storm with a growing share of the
// fleet moved from its current policy.
type Rollout struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Rows are each share moved (of the whole fleet), as screened.
	Rows []RolloutRow `json:"rows"`
	// Least is the least share that meets every bound, with every larger
	// one; negative when none does.
	Least float64 `json:"least"`
}

// RolloutRow is one share's outcome.
type RolloutRow struct {
	Moved     float64   `json:"moved"`
	Scorecard Scorecard `json:"outcome"`
}

// rollout screens the current policy on its own, and the fleet with a
// growing share moved from it to the recommendation.
func (a *Answer) rollout(ctx context.Context, q Question, o Options, n int, outages []time.Duration) error {
	rec := a.Recommendation.Candidate
	cur := Candidate{Policy: q.Current, MaxBackoff: rec.MaxBackoff}
	if spec, maxBackoff, ok := splitCap(q.Current); ok {
		cur = Candidate{Policy: spec, MaxBackoff: maxBackoff}
	}
	out, err := o.runAll(ctx, q, []Candidate{cur}, n, outages, q.Seeds, "the current policy")
	if err != nil {
		return err
	}
	a.Current = &out[0]
	m := &Rollout{From: cur.String(), To: rec.String(), Least: -1}
	for _, moved := range []float64{0.1, 0.25, 0.5, 0.75, 0.9, 1} {
		share := math.Min(moved, q.CurrentShare) + (1 - q.CurrentShare) // the rest already runs it
		mix := Candidate{Policy: fmt.Sprintf("%s+%s", cur, rec)}
		runs, err := o.runMixed(ctx, q, cur, rec, share, n, outages)
		if err != nil {
			return err
		}
		row := RolloutRow{Moved: math.Min(moved, q.CurrentShare), Scorecard: judge(q, mix, n, runs)}
		m.Rows = append(m.Rows, row)
		if moved >= q.CurrentShare {
			break
		}
	}
	for i := len(m.Rows) - 1; i >= 0 && m.Rows[i].Scorecard.Pass(); i-- {
		m.Least = m.Rows[i].Moved
	}
	a.Move = m
	return nil
}

// runMixed runs the fleet with share of it on to and the rest on from.
func (o Options) runMixed(ctx context.Context, q Question, from, to Candidate, share float64, n int, outages []time.Duration) ([]run, error) {
	var runs []run
	for _, d := range outages {
		for s := range q.Seeds {
			p := stormPlan(q, to, n, q.Seed+s, d)
			moved := int(math.Round(share * float64(n)))
			if moved < n {
				p.Groups = []plan.Group{{Name: "current", Devices: n - moved, Policy: from.Policy, MaxBackoff: from.MaxBackoff}}
				if moved > 0 {
					p.Groups = append(p.Groups, plan.Group{Name: "moved", Devices: moved, Policy: to.Policy, MaxBackoff: to.MaxBackoff})
				}
			}
			r, err := measure(ctx, q, p, false)
			if err != nil {
				return nil, err
			}
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// splitCap reads "POLICY@CAP" (iotcore@32s): a current policy with its cap.
func splitCap(s string) (string, time.Duration, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '@' {
			d, err := time.ParseDuration(s[i+1:])
			if err != nil || d <= 0 || d > plan.MaxWait {
				return "", 0, false
			}
			return s[:i], d, true
		}
	}
	return "", 0, false
}
