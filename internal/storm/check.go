package storm

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/report"
)

// Check holds r to every expectation e sets, in a fixed order, and
// returns them with what the run showed.
func (e Expect) Check(r *report.Report) []report.Expectation {
	var out []report.Expectation
	add := func(what, want, got string, pass bool) {
		out = append(out, report.Expectation{What: what, Want: want, Got: got, Pass: pass})
	}
	if e.Verdict != "" {
		add("verdict", e.Verdict, string(r.Verdict), string(r.Verdict) == e.Verdict)
	}
	if e.RecoveryP99 > 0 {
		recovery := func(what string, rc report.Recovery) {
			got := time.Duration(rc.P99S * float64(time.Second))
			add(what, "<= "+e.RecoveryP99.String(), fmt.Sprintf("%.1fs", rc.P99S), rc.AllRecovered && got <= e.RecoveryP99)
		}
		if len(r.Disruptions) == 0 {
			recovery("recovery p99", r.Recovery)
		}
		for _, d := range r.Disruptions { // after each disruption of a timeline
			recovery(fmt.Sprintf("recovery p99 after %.0f s", d.AtS), d.Recovery)
		}
	}
	if e.AttemptsPerDevice > 0 {
		add("attempts per device", fmt.Sprintf("<= %g", e.AttemptsPerDevice), fmt.Sprintf("%.2f", r.Attempts.PerDeviceMean),
			r.Attempts.PerDeviceMean <= e.AttemptsPerDevice)
	}
	if bound := e.BrokerBusiestSecond; bound > 0 {
		want := fmt.Sprintf("<= %g", bound)
		for _, n := range r.Nodes { // a cluster's: each node's own
			add(fmt.Sprintf("busiest second at node %d (connects that reached it)", n.Node), want,
				fmt.Sprintf("%.0f", n.Arrivals.PeakPerS1s), n.Arrivals.PeakPerS1s <= bound)
		}
		switch {
		case len(r.Nodes) > 0:
		case r.Broker == nil:
			add("busiest second at the broker (connects that reached it)", want, "this run did not see the broker's side", false)
		default:
			add("busiest second at the broker (connects that reached it)", want, fmt.Sprintf("%.0f", r.Broker.Arrivals.PeakPerS1s),
				r.Broker.Arrivals.PeakPerS1s <= bound)
		}
	}
	if bound := e.FleetBusiestSecond; bound > 0 {
		add("busiest second of the fleet (every dial)", fmt.Sprintf("<= %g", bound), fmt.Sprintf("%.0f", r.Fleet.Arrivals.PeakPerS1s),
			r.Fleet.Arrivals.PeakPerS1s <= bound)
	}
	if e.NoTelemetryLost {
		switch t := r.Telemetry; {
		case t == nil:
			add("no telemetry lost", "0 lost", "no telemetry in this run", false)
		default:
			add("no telemetry lost", "0 lost", fmt.Sprintf("%d lost", t.Lost), t.Lost == 0)
		}
	}
	return out
}

// CheckAll holds r to the file's expectations: that its host kept its
// times (a host-bound run fails this one first), the fleet's, then each
// group's, named by its group.
func (f *File) CheckAll(r *report.Report) []report.Expectation {
	var out []report.Expectation
	if h := r.Host; h.Bound { // the host's times, not the fleet's: nothing else can pass
		late := h.LateP99S() * 1000
		out = append(out, report.Expectation{What: "the host kept the run's times", Want: fmt.Sprintf("<= %v late", report.HostBoundLate),
			Got: fmt.Sprintf("%.0fms late", late)})
	}
	out = append(out, f.Expect.Check(r)...)
	switch len(f.Fleet) {
	case 0: // devicesim proxy's: the fleet is whoever connected
		return out
	case 1:
		return append(out, f.Fleet[0].Expect.Check(r)...)
	}
	for i, g := range f.Fleet {
		if i >= len(r.Groups) {
			break
		}
		gr := r.Groups[i]
		sub := &report.Report{Findings: report.Findings{Verdict: gr.Verdict, Recovery: gr.Recovery, Attempts: gr.Attempts, Fleet: gr.Fleet,
			Broker: gr.Broker}, Parts: report.Parts{Disruptions: gr.Disruptions, Nodes: gr.Nodes}}
		for _, x := range g.Expect.Check(sub) {
			x.What = g.Name + ": " + x.What
			out = append(out, x)
		}
	}
	return out
}

// Passed reports whether every expectation held.
func Passed(results []report.Expectation) bool {
	for _, x := range results {
		if !x.Pass {
			return false
		}
	}
	return true
}

// Table writes the expectations as a pass/fail table.
func Table(w io.Writer, policy string, results []report.Expectation) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "expectations (%s):\n", policy)
	for _, x := range results {
		mark := "pass"
		if !x.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %-4s  %-30s want %-12s got %s\n", mark, x.What, x.Want, x.Got)
	}
}

// Hold holds r to the file's expectations: it keeps them in the report,
// writes the table to w, and says which failed. A nil File expects
// nothing.
func (f *File) Hold(r *report.Report, w io.Writer) error {
	if f == nil {
		return nil
	}
	r.Expectations = f.CheckAll(r)
	Table(w, r.Policy, r.Expectations)
	var failed []string
	for _, x := range r.Expectations {
		if !x.Pass {
			failed = append(failed, fmt.Sprintf("%s: want %s, got %s", x.What, x.Want, x.Got))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %d of %d expectations failed: %s", r.Policy, len(failed), len(r.Expectations), strings.Join(failed, "; "))
	}
	return nil
}
