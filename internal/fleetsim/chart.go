package fleetsim

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
	counts := make([][]int, len(reports))
	n := 0
	for i, r := range reports {
		counts[i] = r.arrivalCounts()
		n = max(n, len(counts[i]))
	}
	span := float64(n) * chartBin.Seconds()
	per := max(1, int(math.Round(float64(n)/maxChartPoints))) // long runs get wider bins
	ymax := 0.0
	for i, r := range reports {
		xys := rateSeries(counts[i], per)
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

// arrivalCounts is the attempts the broker saw per 100 ms from the
// disruption on: all the chart needs, and what DropEvents keeps.
func (r *Report) arrivalCounts() []int {
	if r.eventsDropped {
		return r.chartCounts
	}
	last := time.Duration(-1)
	for _, e := range r.events {
		last = max(last, e.t)
	}
	if last < 0 {
		return nil
	}
	counts := make([]int, int(last/chartBin)+1)
	for _, e := range r.events {
		if e.t >= 0 {
			counts[int(e.t/chartBin)]++
		}
	}
	return counts
}

// DropEvents frees the per-attempt events once WriteFiles has written them,
// keeping the 100 ms counts the chart draws: a compare run of million-device
// runs would otherwise hold every run's tens of millions of attempts.
func (r *Report) DropEvents() {
	r.chartCounts = r.arrivalCounts()
	r.events, r.eventsDropped = nil, true
}
