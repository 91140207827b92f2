package chart

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// FrontierPoint is one policy devicesim plan weighed: its worst run's
// busiest second at the broker and recovery p99.
type FrontierPoint struct {
	Label    string
	PeakPerS float64
	P99S     float64
	Pass     bool // it met every bound
	Frontier bool // none beat it on both
}

// Frontier is what the planner's chart draws: the policies screened, the
// question's bounds (0: none), and the recommendation and the best
// formula for a fleet in the field, at full scale.
type Frontier struct {
	Title       string
	Screened    []FrontierPoint
	TargetP99S  float64
	PeakBound   float64
	Recommended *FrontierPoint
	Field       *FrontierPoint
}

// FrontierSVG draws recovery p99 against the broker's busiest second (a
// log scale: the policies span two orders of magnitude), each policy
// screened a dot (filled where it met the bounds), the frontier joined,
// the bounds dotted, and the recommendation (and the field's formula)
// marked and named.
func FrontierSVG(f Frontier) ([]byte, error) {
	p := plot.New()
	useFont(p)
	p.Title.Text = f.Title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text = "the broker's busiest second, connects (worst run, log scale)"
	p.Y.Label.Text = "recovery p99 from the broker's return, s (worst run)"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logCountTicks{}
	p.Y.Tick.Marker = countTicks{}
	p.Add(plotter.NewGrid())

	pass, fail, front, err := f.place(p)
	if err != nil {
		return nil, err
	}
	legend := newLegend()
	if len(front) > 1 {
		slices.SortFunc(front, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		line, err := plotter.NewLine(front)
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = Vermilion, vg.Points(1.2)
		p.Add(line)
		legend.Add("the frontier: none beats these on both", line)
	}
	for _, set := range []struct {
		xys   plotter.XYs
		label string
		glyph draw.GlyphStyle
	}{
		{fail, "a policy that missed a bound", draw.GlyphStyle{Color: color.Gray{Y: 140}, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}},
		{pass, "a policy that met every bound", draw.GlyphStyle{Color: Blue, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}},
	} {
		if len(set.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(set.xys)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = set.glyph
		p.Add(sc)
		legend.Add(set.label, sc)
	}
	if err := f.mark(p, &legend); err != nil {
		return nil, err
	}
	return withLegendBeneath(p, &legend, 4.5*vg.Inch)
}

// place sorts the policies screened into those that met the bounds,
// those that did not and the frontier, and sets the axes to hold them, the
// bounds and the marked policies.
func (f Frontier) place(p *plot.Plot) (pass, fail, front plotter.XYs, err error) {
	xmin, xmax, ymax := math.Inf(1), 0.0, f.TargetP99S
	see := func(x, y float64) { xmin, xmax, ymax = min(xmin, x), max(xmax, x), max(ymax, y) }
	for _, s := range f.Screened {
		if s.PeakPerS <= 0 {
			continue // nothing on a log scale
		}
		xy := plotter.XY{X: s.PeakPerS, Y: s.P99S}
		see(xy.X, xy.Y)
		if s.Pass {
			pass = append(pass, xy)
		} else {
			fail = append(fail, xy)
		}
		if s.Frontier {
			front = append(front, xy)
		}
	}
	if len(pass)+len(fail) == 0 {
		return nil, nil, nil, fmt.Errorf("chart: no policy to chart")
	}
	for _, m := range []*FrontierPoint{f.Recommended, f.Field} {
		if m != nil && m.PeakPerS > 0 {
			see(m.PeakPerS, m.P99S)
		}
	}
	if f.PeakBound > 0 {
		see(f.PeakBound, 0)
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin/1.3, xmax*1.3, 0, ymax*1.15
	return pass, fail, front, nil
}

// mark draws the question's bounds and the policies the answer names.
func (f Frontier) mark(p *plot.Plot, legend *plot.Legend) error {
	if f.TargetP99S > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: f.TargetP99S}, {X: p.X.Max, Y: f.TargetP99S}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.Black, []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(l)
		legend.Add(fmt.Sprintf("the target: p99 %s s", TrimFloat(f.TargetP99S)), l)
	}
	if f.PeakBound > 0 {
		l, err := vertical(p, f.PeakBound, p.Y.Max, color.Black, []vg.Length{vg.Points(4), vg.Points(2)})
		if err != nil {
			return err
		}
		legend.Add(fmt.Sprintf("the bound: %s connects in a second", Thousands(int(f.PeakBound))), l)
	}
	for _, m := range []struct {
		pt    *FrontierPoint
		shape draw.GlyphDrawer
		what  string
	}{{f.Recommended, draw.PyramidGlyph{}, "the recommendation"}, {f.Field, draw.SquareGlyph{}, "for a fleet in the field"}} {
		if m.pt == nil || m.pt.PeakPerS <= 0 {
			continue
		}
		sc, err := plotter.NewScatter(plotter.XYs{{X: m.pt.PeakPerS, Y: m.pt.P99S}})
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: m.shape}
		p.Add(sc)
		legend.Add(fmt.Sprintf("%s: %s", m.what, m.pt.Label), sc)
	}
	return nil
}

// withLegendBeneath draws p, height tall, with legend beneath it, aligned
// with its data, as SVG.
func withLegendBeneath(p *plot.Plot, legend *plot.Legend, height vg.Length) ([]byte, error) {
	legendHeight := legendHeightOf(legend)
	c := vgsvg.New(chartWidth, height+legendHeight)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	plotArea := draw.Crop(dc, chartMargin, -chartMargin, legendHeight+chartMargin, -chartMargin)
	p.Draw(plotArea)
	data := p.DataCanvas(plotArea)
	legend.Draw(draw.Canvas{Canvas: dc, Rectangle: vg.Rectangle{Min: vg.Point{X: data.Min.X, Y: chartMargin},
		Max: vg.Point{X: dc.Max.X - chartMargin, Y: chartMargin + legendHeight}}})
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// logCountTicks are plot's log ticks labelled as counts are written.
type logCountTicks struct{}

func (logCountTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = Thousands(int(math.Round(t.Value)))
		}
	}
	return ticks
}
