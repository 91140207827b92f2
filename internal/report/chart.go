package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// maxChartPoints bounds a series' points: long runs get wider bins.
const maxChartPoints = 600

// chartBin is the chart's finest bin: a synchronised round shows as the
// spike it is.
const chartBin = 100 * time.Millisecond

// ChartSVG draws connect attempts per second against unscaled time since
// the disruption. A compare run's policies share the axes. For each report,
// a solid line shows every attempt the devices made, refused dials
// included. Rounds therefore show even while the broker is down. A dashed
// line shows what reached the broker. The broker's return and an admission
// limit are marked.
func ChartSVG(reports []*Report) ([]byte, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("report: no reports to chart")
	}
	p := newChart(reports[0])
	all := chartSeriesOf(reports)
	n := 0
	for _, s := range all {
		n = max(n, len(s.counts))
	}
	span := float64(n) * chartBin.Seconds()
	per := max(1, int(math.Round(float64(n)/maxChartPoints))) // long runs get wider bins
	ymax, err := addSeries(p, all, per)
	if err != nil {
		return nil, err
	}
	if err := addMarks(p, reports[0], ymax, span); err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, ymax*1.15
	p.Add(plotter.NewGrid())
	w, err := p.WriterTo(10*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newChart is an empty chart with r's title, the axes and the legend.
func newChart(r *Report) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %d devices: connect attempts (solid: the devices', dashed: at the broker)", r.Scenario, r.Devices)
	p.X.Label.Text = "seconds since the disruption (unscaled)"
	p.Y.Label.Text = "attempts per second"
	p.Legend.Top = true
	// Smaller, and in from the edge: a viewer's fallback font is often wider
	// than the metrics the legend was laid out with.
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.XOffs = -vg.Points(36)
	return p
}

// chartSeries is one line of the chart: attempts per 100 ms, solid for the
// devices' and dashed for what a broker or node took.
type chartSeries struct {
	counts []int
	dashed bool
	label  string
	color  int
}

// chartSeriesOf is every report's lines: the devices' attempts, and what
// reached the broker or, in a cluster, each node.
func chartSeriesOf(reports []*Report) []chartSeries {
	var all []chartSeries
	for i, r := range reports {
		all = append(all, chartSeries{counts: r.Fleet.chartCounts(), label: fmt.Sprintf("%s (%s, synchrony %.2f)", r.Policy, r.Verdict, r.Fleet.Judgement.Synchrony), color: i})
		if b := r.Broker; b != nil && len(r.Nodes) == 0 {
			all = append(all, chartSeries{counts: b.chartCounts(), dashed: true, label: fmt.Sprintf("%s at the broker (%s)", r.Policy, b.Judgement.Verdict), color: i})
		}
		// a cluster: each node's own, so that a pile-up on the survivors
		// shows
		for _, nd := range r.Nodes {
			if nd.hist != nil {
				all = append(all, chartSeries{counts: nd.hist.Counts(0, chartBin), dashed: true,
					label: fmt.Sprintf("%s at node %d (busiest second %.0f/s)", r.Policy, nd.Node, nd.Arrivals.PeakPerS1s), color: len(reports) + nd.Node})
			}
		}
	}
	return all
}

// addSeries draws each series as rates over bins of per counts and
// returns the highest rate drawn.
func addSeries(p *plot.Plot, all []chartSeries, per int) (ymax float64, err error) {
	for _, s := range all {
		xys := rateSeries(s.counts, per)
		for _, xy := range xys {
			ymax = max(ymax, xy.Y)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return 0, err
		}
		line.Color = plotutil.Color(s.color)
		line.Width = vg.Points(1.2)
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(s.label, line)
	}
	return ymax, nil
}

// addMarks marks r's broker return, up to ymax, and its admission limit
// across the span.
func addMarks(p *plot.Plot, r *Report, ymax, span float64) error {
	if r.BrokerBackS > 0 {
		back, err := plotter.NewLine(plotter.XYs{{X: r.BrokerBackS, Y: 0}, {X: r.BrokerBackS, Y: ymax}})
		if err != nil {
			return err
		}
		back.Color, back.Dashes = color.Gray{Y: 120}, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(back)
		p.Legend.Add("broker back", back)
	}
	if r.Limit != nil && span > 0 {
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.Limit.AdmitRate}, {X: span, Y: r.Limit.AdmitRate}})
		if err != nil {
			return err
		}
		limit.Color, limit.Dashes = color.RGBA{R: 200, A: 255}, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(limit)
		p.Legend.Add(fmt.Sprintf("admission limit %.0f/s", r.Limit.AdmitRate), limit)
	}
	return nil
}

// rateSeries turns 100 ms counts into (bin start in seconds, arrivals per
// second) points over bins of per counts, starting at 0.
func rateSeries(counts []int, per int) plotter.XYs {
	bin := time.Duration(per) * chartBin
	xys := make(plotter.XYs, 0, len(counts)/per+1)
	for i := 0; i < len(counts); i += per {
		sum := 0
		for _, c := range counts[i:min(i+per, len(counts))] {
			sum += c
		}
		xys = append(xys, plotter.XY{X: (time.Duration(i) * chartBin).Seconds(), Y: float64(sum) / bin.Seconds()})
	}
	if len(xys) == 0 {
		xys = append(xys, plotter.XY{})
	}
	return xys
}

// chartCounts is the side's attempts per 100 ms from the disruption on.
func (s *Side) chartCounts() []int {
	if s.hist == nil {
		return nil
	}
	return s.hist.Counts(0, chartBin)
}

// DropEvents frees the per-attempt events once WriteFiles has written them;
// the chart is drawn from the histograms the report keeps. A compare run of
// million-device runs would otherwise hold every run's tens of millions of
// attempts.
func (r *Report) DropEvents() {
	r.events, r.eventsDropped = nil, true
}
