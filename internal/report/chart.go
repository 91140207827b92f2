package report

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/herdguard/herdguard/internal/chart"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// ChartSVG draws connect attempts a second against unscaled time since the
// disruption: one panel a report (a compare run's policies one above the
// other on one time axis, on one scale), each with every attempt its
// devices made (refused dials included, so rounds show while the broker is
// down) and what reached the broker (or each node of a cluster), the
// outage shaded, the broker's return and each later disruption marked, the
// admission limit labelled, each burst the verdict counted marked with its
// size, and the verdict in the panel's title. The legend sits beneath the
// panels, outside them.
func ChartSVG(reports []*Report) ([]byte, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("report: no reports to chart")
	}
	n := 0
	for _, r := range reports {
		n = max(n, len(r.Fleet.chartCounts()))
	}
	per := max(1, int(math.Round(float64(n)/chart.MaxPoints))) // long runs get wider bins
	panels := make([]chart.Panel, len(reports))
	for i, r := range reports {
		panels[i] = panelOf(r, per)
	}
	return chart.Figure(figureTitle(reports), panels, float64(n)*chart.Bin.Seconds())
}

// figureTitle names the storm and, for each policy, its verdict.
func figureTitle(reports []*Report) string {
	r := reports[0]
	verdicts := make([]string, len(reports))
	for i, x := range reports {
		verdicts[i] = fmt.Sprintf("%s %s", x.Policy, x.Verdict)
	}
	return fmt.Sprintf("%s, %s devices: connect attempts a second (%s)", r.Scenario, chart.Thousands(r.Devices), strings.Join(verdicts, ", "))
}

func panelOf(r *Report, per int) chart.Panel {
	p := chart.Panel{Title: panelTitle(r), OutageEnd: r.BrokerBackS, OutageText: "the outage, until the broker was back",
		Bursts: burstsOf(r)}
	for k, d := range r.Disruptions {
		if k > 0 { // the first is the chart's 0
			p.Later = append(p.Later, d.AtS)
		}
	}
	if r.Limit != nil {
		p.Limit = r.Limit.AdmitRate
	}
	add := func(counts []int, label string, c color.Color, width vg.Length) {
		xys := chart.RateSeries(counts, per)
		for _, xy := range xys {
			p.YMax = max(p.YMax, xy.Y)
		}
		p.Lines = append(p.Lines, chart.Line{XYs: xys, Label: label, Color: c, Width: width})
	}
	add(r.Fleet.chartCounts(), "every attempt the devices made, refused ones too", chart.Vermilion, vg.Points(1.4))
	if b := r.Broker; b != nil && len(r.Nodes) == 0 {
		add(b.chartCounts(), "what reached the broker", chart.Blue, vg.Points(1.4))
	}
	// a cluster: each node's own, so that a pile-up on the survivors shows
	for _, nd := range r.Nodes {
		if nd.hist != nil {
			add(nd.hist.Counts(0, chart.Bin), fmt.Sprintf("what reached node %d", nd.Node), chart.NodeColors[nd.Node%len(chart.NodeColors)], vg.Points(1.2))
		}
	}
	return p
}

// panelTitle is the panel's policy and what the verdict found.
func panelTitle(r *Report) string {
	j := r.Fleet.Judgement
	if len(r.Disruptions) > 1 { // a timeline: each recovery judged on its own
		count := map[string]int{}
		var order []string
		for _, d := range r.Disruptions {
			v := string(d.Verdict)
			if count[v] == 0 {
				order = append(order, v)
			}
			count[v]++
		}
		parts := make([]string, len(order))
		for i, v := range order {
			parts[i] = fmt.Sprintf("%d %s", count[v], v)
		}
		return fmt.Sprintf("%s: %s, each of %d disruptions judged on its own (%s)", r.Policy, r.Verdict, len(r.Disruptions),
			strings.Join(parts, ", "))
	}
	switch {
	case j.Verdict == "waves":
		return fmt.Sprintf("%s: waves, %d bursts %s to %s s apart, synchrony %.2f", r.Policy, len(j.Bursts),
			chart.TrimFloat(j.GapMinS), chart.TrimFloat(j.GapMaxS), j.Synchrony)
	case len(j.Bursts) == 1:
		return fmt.Sprintf("%s: %s, one burst, not repeated", r.Policy, r.Verdict)
	}
	return fmt.Sprintf("%s: %s (synchrony %.2f)", r.Policy, r.Verdict, j.Synchrony)
}

// burstsOf are the bursts r's verdict counted: a timeline's, each
// recovery's own.
func burstsOf(r *Report) []stormstats.Burst {
	if len(r.Disruptions) == 0 {
		return r.Fleet.Judgement.Bursts
	}
	var out []stormstats.Burst
	for _, d := range r.Disruptions {
		out = append(out, d.Fleet.Judgement.Bursts...)
	}
	return out
}

// chartCounts is the side's attempts per 100 ms from the disruption on.
func (s *Side) chartCounts() []int {
	if s.hist == nil {
		return nil
	}
	return s.hist.Counts(0, chart.Bin)
}

// DropEvents frees the per-attempt events once WriteFiles has written them;
// the chart is drawn from the histograms the report keeps. A compare run of
// million-device runs would otherwise hold every run's tens of millions of
// attempts.
func (r *Report) DropEvents() {
	r.events, r.eventsDropped = nil, true
}
