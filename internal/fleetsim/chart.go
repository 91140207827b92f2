package fleetsim

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// maxChartPoints bounds a series' points: long runs get wider bins.
const maxChartPoints = 600

// ChartSVG draws connect attempts per second at the broker against unscaled
// time since the disruption, one line per report (a compare run's policies
// share the axes). The broker's return and an admission limit are marked.
func ChartSVG(reports []*Report) ([]byte, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("fleetsim: no reports to chart")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %d devices: connect attempts at the broker", reports[0].Scenario, reports[0].Devices)
	p.X.Label.Text = "seconds since the disruption (unscaled)"
	p.Y.Label.Text = "attempts per second"
	p.Legend.Top = true
	span := 0.0
	for _, r := range reports {
		for _, e := range r.events {
			span = max(span, e.t.Seconds())
		}
	}
	// 100 ms bins show a synchronised round as the spike it is; long runs
	// get wider ones.
	bin := max(100*time.Millisecond, time.Duration(span/maxChartPoints*float64(time.Second)).Round(100*time.Millisecond))
	ymax := 0.0
	for i, r := range reports {
		xys := rateSeries(r.arrivalTimes(), bin)
		for _, xy := range xys {
			ymax = max(ymax, xy.Y)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.2)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%s)", r.Policy, r.Verdict), line)
	}
	r0 := reports[0]
	if r0.BrokerBackS > 0 {
		back, err := plotter.NewLine(plotter.XYs{{X: r0.BrokerBackS, Y: 0}, {X: r0.BrokerBackS, Y: ymax}})
		if err != nil {
			return nil, err
		}
		back.Color, back.Dashes = color.Gray{Y: 120}, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(back)
		p.Legend.Add("broker back", back)
	}
	if r0.Limit != nil && span > 0 {
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r0.Limit.AdmitRate}, {X: span, Y: r0.Limit.AdmitRate}})
		if err != nil {
			return nil, err
		}
		limit.Color, limit.Dashes = color.RGBA{R: 200, A: 255}, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(limit)
		p.Legend.Add(fmt.Sprintf("admission limit %.0f/s", r0.Limit.AdmitRate), limit)
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

// rateSeries turns arrival times into (bin start in seconds, arrivals per
// second) points, zero-filled, starting at 0.
func rateSeries(times []time.Duration, bin time.Duration) plotter.XYs {
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	for len(sorted) > 0 && sorted[0] < 0 {
		sorted = sorted[1:]
	}
	counts := stormstats.Counts(sorted, 0, bin)
	xys := make(plotter.XYs, 0, len(counts)+1)
	for i, n := range counts {
		xys = append(xys, plotter.XY{X: (time.Duration(i) * bin).Seconds(), Y: float64(n) / bin.Seconds()})
	}
	if len(xys) == 0 {
		xys = append(xys, plotter.XY{})
	}
	return xys
}

func (r *Report) arrivalTimes() []time.Duration {
	ts := make([]time.Duration, len(r.events))
	for i, e := range r.events {
		ts[i] = e.t
	}
	return ts
}
