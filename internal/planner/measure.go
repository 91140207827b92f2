package planner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/virtual"
)

// Candidate is one policy the search tries: a plan policy spec (a family,
// with its base and jitter where they are not 1 s) and its cap.
type Candidate struct {
	Policy     string        `json:"policy"`
	MaxBackoff time.Duration `json:"max_backoff"`
}

func (c Candidate) String() string { return fmt.Sprintf("%s, cap %v", c.Policy, c.MaxBackoff) }

// run is one virtual run's figures, at full scale: the peak is the scaled
// fleet's times the factor it was scaled down by.
type run struct {
	p50, p99  float64 // seconds after the broker's return
	peak      float64 // connects in the broker's busiest second
	dials     float64 // dials in the devices' busiest second, the outage's refused ones too
	attempts  float64 // per device, from the broker's return
	total     float64 // per device, the outage's attempts too
	fromStart float64 // p99 seconds from the disruption: a storm file's recovery_p99
	verdict   stormstats.Verdict
	recovered bool // every device came back
	atLeast   bool // the run stopped first: p99 and attempts are lower bounds
	cut       bool // it stopped on its attempts, over the question's bound
	outage    time.Duration
	seed      uint64
	wall      time.Duration
}

// StormPlan is the question's storm for candidate c on a fleet of
// devices, its broker scaled with it, on the virtual engine. It is what
// the planner ran, for a caller to run again, on real agents too.
func (a *Answer) StormPlan(c Candidate, devices int, seed uint64) plan.Plan {
	return stormPlan(a.Question, c, devices, seed, a.Question.Outage)
}

// stormPlan is the question's storm for one candidate on a fleet of n
// devices, its broker's admission scaled with it. The burst keeps at
// least 10 tokens, or the question's own if fewer. A small fleet's
// retries come with gaps a large one's fill. A bucket of one or two
// tokens wastes, in those gaps, admission a million devices would use.
func stormPlan(q Question, c Candidate, n int, seed uint64, outage time.Duration) plan.Plan {
	scale := float64(n) / float64(q.Devices)
	p := plan.Default()
	p.Engine, p.Devices, p.Scenario, p.Seed, p.Events = plan.Virtual, n, plan.ThrottledRestart, seed, io.Discard
	p.Policy, p.MaxBackoff, p.Outage = c.Policy, c.MaxBackoff, outage
	p.AdmitRate, p.AdmitBurst, p.AdmitMode = q.AdmitRate*scale, max(int(math.Round(float64(q.AdmitBurst)*scale)), min(q.AdmitBurst, minScreenBurst)), q.AdmitMode
	p.Nodes = q.Nodes
	if p.Nodes == 1 {
		p.Nodes = 0
	}
	p.MQTT5 = q.MQTT5
	return p
}

// cutAttempts is the attempts a device makes from the return at which a
// run stops, unless twice the question's bound is more. No policy that
// makes so many is one to recommend. Such a run costs the search more
// than all the others.
const cutAttempts = 25

// minScreenBurst is the least burst a scaled-down broker keeps.
const minScreenBurst = 10

// measure runs p in virtual time and reads the question's figures. A run
// that cannot meet the question's bounds however it ends is stopped once
// that is certain, at twice the target.
func measure(ctx context.Context, q Question, p plan.Plan, inline bool) (run, error) {
	scale := float64(q.Devices) / float64(p.Devices)
	from := p.Outage.Seconds()
	// Even a target no policy can meet is watched long enough to measure
	// what the policy does: the refusal says how far each missed.
	watch := 2 * max(q.TargetP99, time.Duration(1.2*float64(q.ideal()))+p.MaxBackoff)
	giveUp := &virtual.GiveUp{MaxAfterReturn: int64(math.Ceil(max(2*q.MaxAttempts, cutAttempts) * float64(p.Devices))),
		P99By: p.Outage + watch, P99Count: int(math.Ceil(0.99 * float64(p.Devices)))}
	p.Bound = p.Outage + watch + watch/2 + p.MaxBackoff
	if err := p.Validate(); err != nil {
		return run{}, err
	}
	start := time.Now()
	r, err := virtual.Run(ctx, p, virtual.Options{GiveUp: giveUp, Inline: inline})
	if r == nil || (err != nil && !errors.Is(err, report.ErrNotRecovered)) {
		return run{}, fmt.Errorf("%s, cap %v, seed %d, outage %v: %w", p.Policy, p.MaxBackoff, p.Seed, p.Outage, err)
	}
	out := run{p50: r.Recovery.P50S - from, p99: r.Recovery.P99S - from, attempts: r.Attempts.AfterReturnPerDeviceMean,
		total: r.Attempts.PerDeviceMean, fromStart: r.Recovery.P99S,
		verdict: r.Verdict, recovered: r.Recovery.AllRecovered, outage: p.Outage, seed: p.Seed, wall: time.Since(start)}
	if r.Broker != nil {
		out.peak = r.Broker.Arrivals.PeakPerS1s * scale
	}
	out.dials = r.Fleet.Arrivals.PeakPerS1s * scale
	if giveUp.Certain > 0 {
		out.attempts = max(out.attempts, float64(giveUp.Certain)/float64(p.Devices))
	}
	out.cut = out.attempts*float64(p.Devices) >= float64(giveUp.MaxAfterReturn)
	if r.Recovered() < giveUp.P99Count {
		out.p99, out.fromStart, out.atLeast = r.WatchedS-from, r.WatchedS, true
	}
	if !out.recovered {
		out.atLeast = true
	}
	return out, nil
}

// Agreement is how far real agents may land from the model's figures, as
// a share of them. make calibrate holds the engines to 5 %, or 0.5 s and
// 0.05 attempts.
const Agreement = 0.05

// Widen is f with the engines' Agreement on each side, at least abs.
func (f Figure) Widen(abs float64) Figure {
	return Figure{Median: f.Median, Min: f.Min - max(abs, Agreement*f.Min), Max: f.Max + max(abs, Agreement*f.Max)}
}

// Figure is one measure over a candidate's runs: its median and its spread.
type Figure struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func figureOf(xs []float64) Figure {
	if len(xs) == 0 {
		return Figure{}
	}
	s := slices.Sorted(slices.Values(xs))
	mid := s[len(s)/2]
	if len(s)%2 == 0 {
		mid = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Figure{Median: mid, Min: s[0], Max: s[len(s)-1]}
}

// Scorecard is a candidate's figures over its runs, and why it fails the
// question, if it does.
type Scorecard struct {
	Candidate
	Devices  int    `json:"devices"` // the fleet it ran as: the question's, or scaled down
	Runs     int    `json:"runs"`
	P50      Figure `json:"p50_s"`
	P99      Figure `json:"p99_s"`
	Peak     Figure `json:"peak_per_s"`
	Attempts Figure `json:"attempts_per_device"`
	// AtLeast: some run stopped before its fleet was back; its figures are
	// lower bounds.
	AtLeast bool     `json:"at_least,omitempty"`
	Waves   bool     `json:"waves,omitempty"` // some run's recovery came in waves
	Why     []string `json:"why,omitempty"`   // what it fails, worst run each
	// Margin is how close its worst run came to the nearest bound, as a
	// share of that bound: 0.2 is 20 % to spare, negative a miss.
	Margin float64 `json:"margin"`
	runs   []run
}

// Pass says whether the candidate met every bound on every run.
func (o *Scorecard) Pass() bool { return len(o.Why) == 0 }

// judge sums up runs and holds them to q's bounds.
func judge(q Question, c Candidate, devices int, runs []run) Scorecard {
	o := Scorecard{Candidate: c, Devices: devices, Runs: len(runs), runs: runs}
	var p50, p99, peak, att []float64
	for _, r := range runs {
		p50, p99, peak, att = append(p50, r.p50), append(p99, r.p99), append(peak, r.peak), append(att, r.attempts)
		o.AtLeast = o.AtLeast || r.atLeast
		o.Waves = o.Waves || r.verdict == stormstats.Waves
	}
	o.P50, o.P99, o.Peak, o.Attempts = figureOf(p50), figureOf(p99), figureOf(peak), figureOf(att)
	target := q.TargetP99.Seconds()
	o.Margin = 1 - o.P99.Max/target
	cut := false
	for _, r := range runs {
		cut = cut || r.cut
	}
	switch {
	case o.P99.Max > target:
		more := ""
		if o.AtLeast {
			more = " or later"
		}
		o.Why = append(o.Why, fmt.Sprintf("recovery p99 %.0f s%s, over the %.0f s target", o.P99.Max, more, target))
	case o.AtLeast && !cut: // a run stopped on its attempts has its own reason below
		o.Margin = min(o.Margin, -0.01)
		o.Why = append(o.Why, fmt.Sprintf("not every device came back within %.0f s", o.P99.Max))
	}
	if q.PeakBound > 0 {
		o.Margin = min(o.Margin, 1-o.Peak.Max/q.PeakBound)
		if o.Peak.Max > q.PeakBound {
			o.Why = append(o.Why, fmt.Sprintf("busiest second %.0f connects, over the %.0f bound", o.Peak.Max, q.PeakBound))
		}
	}
	if q.MaxAttempts > 0 {
		o.Margin = min(o.Margin, 1-o.Attempts.Max/q.MaxAttempts)
	}
	switch {
	case q.MaxAttempts > 0 && o.Attempts.Max > q.MaxAttempts:
		o.Why = append(o.Why, fmt.Sprintf("%.1f attempts a device, over the %.1f bound", o.Attempts.Max, q.MaxAttempts))
	case cut:
		o.Margin = min(o.Margin, -0.01)
		o.Why = append(o.Why, fmt.Sprintf("%.0f attempts a device or more: the search stops a run there", o.Attempts.Max))
	}
	if o.Waves {
		o.Why = append(o.Why, "the fleet came back in waves")
	}
	return o
}
