package planner

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/chart"
	"github.com/herdguard/herdguard/internal/plan"
)

// Summary writes the answer as a design review would hear it. It gives
// the recommendation and its evidence, the frontier, and what was
// rejected and why. It ends with the fleet in the field and the command
// that checks it.
func (a *Answer) Summary(w io.Writer) {
	q := a.Question
	fmt.Fprintf(w, "%s devices, a broker admitting %.0f connects/s (burst %d, %s), an outage of %v\n",
		plan.Thousands(q.Devices), q.AdmitRate, q.AdmitBurst, q.AdmitMode, q.Outage)
	fmt.Fprintf(w, "asked: 99 %% back within %v of the broker's return%s%s\n", q.TargetP99, bound(q.PeakBound, ", the broker's busiest second at most %.0f connects"),
		bound(q.MaxAttempts, ", at most %.1f attempts a device"))
	fmt.Fprintf(w, "searched: %d policies on %s devices (the broker scaled with them), one run each; the best %d on seeds %d to %d, outages %s;\n",
		len(a.Screened), plan.Thousands(a.screened()), screenFurther, q.Seed, q.Seed+q.Seeds-1, outages(a.Outages))
	if len(a.Confirmed) == 0 {
		fmt.Fprintf(w, "  none of those met the bounds, so none ran again at %s devices\n\n", plan.Thousands(q.Devices))
	} else {
		fmt.Fprintf(w, "  the best %d of those again at %s devices\n\n", len(a.Confirmed), plan.Thousands(q.Devices))
	}
	if r := a.Recommendation; r != nil {
		fmt.Fprintf(w, "recommendation: %s\n", r.Candidate)
		figures(w, "  ", r)
		fmt.Fprintf(w, "  margin: %.0f %% to the nearest bound on its worst run\n", 100*r.Margin)
	} else if c := a.Closest; c != nil {
		fmt.Fprintf(w, "no policy meets the bounds; the closest: %s\n", c.Candidate)
		figures(w, "  ", c)
	}
	if f := a.Field; f != nil && (a.Recommendation == nil || f.Candidate != a.Recommendation.Candidate) {
		if f.Pass() {
			fmt.Fprintf(w, "\nfor a fleet in the field, whose remote configuration sets only the formula's base, jitter and cap: %s\n", f.Candidate)
		} else {
			fmt.Fprintf(w, "\nfor a fleet in the field: no formula a remote configuration can set meets the bounds; the closest, %s,\n"+
				"  misses: %s (the recommendation takes new firmware)\n", f.Candidate, strings.Join(f.Why, "; "))
		}
		figures(w, "  ", f)
	}
	if len(a.Confirmed) > 1 {
		fmt.Fprintf(w, "\nconfirmed at %s devices:\n", plan.Thousands(q.Devices))
		for _, o := range a.Confirmed {
			fmt.Fprintf(w, "  %-44s p99 %7.1f s  busiest second %9.0f  attempts %5.2f  %s\n", o.Candidate, o.P99.Max, o.Peak.Max, o.Attempts.Max, verdict(&o))
		}
	}
	fmt.Fprintf(w, "\nfrontier (screened: none beats these on both p99 and the busiest second, worst run each):\n")
	for _, o := range a.Frontier {
		fmt.Fprintf(w, "  %-44s p99 %7.1f s  busiest second %9.0f  attempts %5.2f  %s\n", o.Candidate, o.P99.Max, o.Peak.Max, o.Attempts.Max, verdict(&o))
	}
	if len(a.Rejected) > 0 {
		fmt.Fprintf(w, "\nrejected:\n")
		for _, g := range a.Rejected {
			fmt.Fprintf(w, "  %d: %s, such as %s\n", g.Count, g.Reason, g.Examples[0])
		}
	}
	if c := a.Current; c != nil {
		fmt.Fprintf(w, "\ntoday, %.0f %% of the fleet on %s:\n", 100*q.CurrentShare, c.Candidate)
		figures(w, "  on its own: ", c)
		if m := a.Move; m != nil {
			for _, r := range m.Rows {
				fmt.Fprintf(w, "  %3.0f %% moved: p99 %7.1f s  busiest second %9.0f  attempts %5.2f  %s\n", 100*r.Moved, r.Scorecard.P99.Max,
					r.Scorecard.Peak.Max, r.Scorecard.Attempts.Max, verdict(&r.Scorecard))
			}
			if m.Least < 0 {
				fmt.Fprintf(w, "  moving all of it is not enough\n")
			} else {
				fmt.Fprintf(w, "  at least %.0f %% of the fleet must move to %s\n", 100*m.Least, m.To)
			}
		}
	}
	fmt.Fprintf(w, "\nwhat this assumes: the virtual engine's broker model (admission as a token bucket, no network partition, a\n"+
		"connect served in a round trip); figures scaled from %s devices hold within the spread shown; see docs/plan.md\n", plan.Thousands(a.screened()))
	fmt.Fprintf(w, "(%.1f s)\n", a.WallS)
}

// screened is the fleet size candidates were screened at.
func (a *Answer) screened() int {
	if len(a.Screened) == 0 {
		return 0
	}
	return a.Screened[0].Devices
}

func figures(w io.Writer, indent string, o *Scorecard) {
	at := ""
	if o.AtLeast {
		at = " (or later)"
	}
	fmt.Fprintf(w, "%srecovery from the broker's return: p50 %s s, p99 %s s%s\n", indent, span(o.P50, "%.1f"), span(o.P99, "%.1f"), at)
	fmt.Fprintf(w, "%sthe broker's busiest second: %s connects; attempts a device: %s\n", indent, span(o.Peak, "%.0f"), span(o.Attempts, "%.2f"))
	if o.Runs == 1 {
		fmt.Fprintf(w, "%s(one run of %s devices)\n", indent, plan.Thousands(o.Devices))
		return
	}
	fmt.Fprintf(w, "%s(%d runs of %s devices: the median, and the least and most in brackets)\n", indent, o.Runs, plan.Thousands(o.Devices))
}

func span(f Figure, format string) string {
	if f.Min == f.Max {
		return fmt.Sprintf(format, f.Median)
	}
	return fmt.Sprintf(format+" ["+format+", "+format+"]", f.Median, f.Min, f.Max)
}

func verdict(o *Scorecard) string {
	if o.Pass() {
		return "meets the bounds"
	}
	return strings.Join(o.Why, "; ")
}

func bound(v float64, format string) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf(format, v)
}

func outages(s []float64) string {
	var parts []string
	for _, v := range s {
		parts = append(parts, (time.Duration(v * float64(time.Second))).String())
	}
	return strings.Join(parts, ", ")
}

// FrontierChart is the answer as its chart draws it (chart.FrontierSVG):
// every candidate screened, the frontier, the bounds, and the
// recommendation and the field's formula at full scale.
func (a *Answer) FrontierChart() chart.Frontier {
	q := a.Question
	f := chart.Frontier{Title: fmt.Sprintf("%s devices, a broker admitting %s connects/s: recovery against the broker's busiest second",
		plan.Thousands(q.Devices), plan.Thousands(int(q.AdmitRate))), TargetP99S: q.TargetP99.Seconds(), PeakBound: q.PeakBound}
	onFrontier := map[string]bool{}
	for _, o := range a.Frontier {
		onFrontier[o.Candidate.String()] = true
	}
	point := func(o *Scorecard) chart.FrontierPoint {
		return chart.FrontierPoint{Label: o.Candidate.String(), PeakPerS: o.Peak.Max, P99S: o.P99.Max, Pass: o.Pass(),
			Frontier: onFrontier[o.Candidate.String()]}
	}
	for i := range a.Screened {
		f.Screened = append(f.Screened, point(&a.Screened[i]))
	}
	if a.Recommendation != nil {
		r := point(a.Recommendation)
		f.Recommended = &r
	}
	if a.Field != nil && a.Field.Pass() && (a.Recommendation == nil || a.Field.Candidate != a.Recommendation.Candidate) {
		fl := point(a.Field)
		f.Field = &fl
	}
	return f
}
