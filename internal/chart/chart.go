// Package chart draws devicesim's pictures with gonum/plot: panels of
// attempts a second stacked on one time axis (a run's policies, a judged
// log), and the planner's frontier. It is the drawing; the report and the
// planner say what goes in each panel.
package chart

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// MaxPoints bounds a series' points: long runs get wider bins.
const MaxPoints = 600

// Bin is the chart's finest bin: a synchronised round shows as the
// spike it is.
const Bin = 100 * time.Millisecond

// The figure: a title, one panel a policy stacked on one time axis, and
// the legend beneath them, all within chartWidth.
const (
	chartWidth  = 10 * vg.Inch
	panelHeight = 2.6 * vg.Inch
	titleHeight = 0.5 * vg.Inch
	chartMargin = 0.15 * vg.Inch
)

// Okabe and Ito's palette, which readers with any common colour vision
// deficiency tell apart: the devices' attempts vermilion, what reached the
// broker blue, a cluster's nodes the rest.
var (
	Vermilion  = color.RGBA{R: 213, G: 94, A: 255}
	Blue       = color.RGBA{B: 178, G: 114, A: 255}
	NodeColors = []color.Color{Blue, color.RGBA{R: 0, G: 158, B: 115, A: 255}, color.RGBA{R: 204, G: 121, B: 167, A: 255},
		color.RGBA{R: 86, G: 180, B: 233, A: 255}, color.RGBA{R: 230, G: 159, A: 255}, color.RGBA{R: 240, G: 228, B: 66, A: 255}}
	outageFill = color.RGBA{R: 225, G: 225, B: 225, A: 255}
	markGray   = color.Gray{Y: 90}
)

// chartFont is the figure's: a sans face, which reads at a glance and whose
// metrics (Liberation Sans, Arial's) a browser matches.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// Figure draws the panels one above the other on one time axis of
// span seconds and one scale, under title, with the legend of the first
// beneath them.
func Figure(title string, panels []Panel, span float64) ([]byte, error) {
	span = math.Max(span, 1)
	ymax := 1.0
	for _, pn := range panels {
		ymax = max(ymax, pn.YMax, pn.Limit)
	}
	ymax *= 1.2 // room for the bursts' labels

	legend := newLegend()
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p, err := pn.plot(span, ymax, i == len(panels)-1, legendIf(i == 0, &legend))
		if err != nil {
			return nil, err
		}
		plots[i] = []*plot.Plot{p}
	}

	legendHeight := legendHeightOf(&legend)
	height := titleHeight + vg.Length(len(panels))*panelHeight + legendHeight + 2*chartMargin
	c := vgsvg.New(chartWidth, height)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	body := draw.Crop(dc, chartMargin, -chartMargin, legendHeight+chartMargin, -titleHeight)
	canvases := plot.Align(plots, draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(6)}, body)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	// the legend beneath the panels, aligned with their data
	data := plots[len(plots)-1][0].DataCanvas(canvases[len(plots)-1][0])
	legend.Draw(draw.Canvas{Canvas: dc, Rectangle: vg.Rectangle{Min: vg.Point{X: data.Min.X, Y: chartMargin},
		Max: vg.Point{X: dc.Max.X - chartMargin, Y: chartMargin + legendHeight}}})
	drawTitle(dc, title)

	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func legendIf(first bool, l *plot.Legend) *plot.Legend {
	if first {
		return l
	}
	return nil
}

func legendHeightOf(l *plot.Legend) vg.Length {
	r := l.Rectangle(draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: chartWidth, Y: chartWidth}}})
	return r.Max.Y - r.Min.Y + vg.Points(4)
}

// drawTitle writes the figure's title across its top, smaller until it
// fits the width, and cut short with an ellipsis if even that does not.
func drawTitle(dc draw.Canvas, title string) {
	sty := draw.TextStyle{Color: color.Black, Font: chartFont, XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
	room := dc.Max.X - dc.Min.X - 2*chartMargin
	for size := 14.0; ; size-- {
		sty.Font.Size = vg.Points(size)
		if sty.Width(title) <= room {
			break
		}
		if size <= 9 {
			for sty.Width(title+"...") > room && len(title) > 1 {
				title = title[:len(title)-1]
			}
			title += "..."
			break
		}
	}
	dc.FillText(sty, vg.Point{X: dc.Min.X + chartMargin, Y: dc.Max.Y - titleHeight/2}, title)
}

// Panel is what one panel draws: its title, its lines, the outage to
// shade (until outageEnd s), later disruptions to mark, the admission
// limit (0: none), the bursts the verdict found, and the legend's words
// for the outage.
type Panel struct {
	Title      string
	Lines      []Line
	YMax       float64
	OutageEnd  float64
	OutageText string
	Later      []float64
	Limit      float64
	Bursts     []stormstats.Burst
	// XLabel and YLabel name the axes: a run's, where they are empty
	XLabel, YLabel string
}

// Line is one series of a panel.
type Line struct {
	XYs   plotter.XYs
	Label string
	Color color.Color
	Width vg.Length
}

// plot draws the panel: the outage shaded, the marks, the lines, the
// bursts. The first panel's entries make the legend.
func (pn Panel) plot(span, ymax float64, bottom bool, legend *plot.Legend) (*plot.Plot, error) {
	p := plot.New()
	p.TextHandler = plot.DefaultTextHandler
	useFont(p)
	p.Title.Text = pn.Title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Title.Padding = vg.Points(4)
	p.X.Tick.Marker, p.Y.Tick.Marker = countTicks{}, countTicks{}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, span, 0, ymax
	p.Y.Label.Text = cmp.Or(pn.YLabel, "attempts a second")
	if bottom {
		p.X.Label.Text = cmp.Or(pn.XLabel, "seconds since the disruption (unscaled)")
	}
	p.Add(plotter.NewGrid())
	note := func(label string, t plot.Thumbnailer) {
		if legend != nil {
			legend.Add(label, t)
		}
	}
	if pn.OutageEnd > 0 {
		end := pn.OutageEnd
		shade, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: end, Y: 0}, {X: end, Y: ymax}, {X: 0, Y: ymax}})
		if err != nil {
			return nil, err
		}
		shade.Color, shade.LineStyle.Width = outageFill, 0
		p.Add(shade)
		note(pn.OutageText, shade)
	}
	for k, at := range pn.Later {
		line, err := vertical(p, at, ymax, markGray, []vg.Length{vg.Points(2), vg.Points(2)})
		if err != nil {
			return nil, err
		}
		if k == 0 {
			note("each later disruption", line)
		}
	}
	if pn.Limit > 0 {
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: pn.Limit}, {X: span, Y: pn.Limit}})
		if err != nil {
			return nil, err
		}
		limit.Color, limit.Width, limit.Dashes = color.Black, vg.Points(1), []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(limit)
		label := fmt.Sprintf("admission limit %s/s", Thousands(int(math.Round(pn.Limit))))
		if err := addText(p, span, pn.Limit, label, draw.XRight, draw.YBottom); err != nil {
			return nil, err
		}
		note(label, limit)
	}
	for _, l := range pn.Lines {
		line, err := plotter.NewLine(l.XYs)
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = l.Color, l.Width
		p.Add(line)
		note(l.Label, line)
	}
	if err := pn.markBursts(p, span); err != nil {
		return nil, err
	}
	if len(pn.Bursts) > 0 {
		glyph := draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3.5), Shape: draw.TriangleGlyph{}}
		note("a burst the verdict found, with its attempts", glyphThumb{glyph})
	}
	return p, nil
}

// bursts marks each burst of the devices' attempts the verdict counted
// with a triangle above it, labelled with its attempts where the label
// has room (the largest first; no two labels within 6 % of the span).
func (pn Panel) markBursts(p *plot.Plot, span float64) error {
	bursts := pn.Bursts
	if len(bursts) == 0 || len(pn.Lines) == 0 {
		return nil
	}
	devices := pn.Lines[0].XYs
	// the window's highest bin: a wide window's middle may be quiet
	peak := func(from, to float64) plotter.XY {
		best := plotter.XY{X: (from + to) / 2}
		for _, xy := range devices {
			if xy.X >= from-Bin.Seconds() && xy.X <= to && xy.Y > best.Y {
				best = xy
			}
		}
		return best
	}
	marks := make(plotter.XYs, len(bursts))
	for i, b := range bursts {
		at := peak(b.AtS, b.AtS+b.WidthS)
		marks[i] = plotter.XY{X: at.X, Y: at.Y + p.Y.Max*0.03}
	}
	sc, err := plotter.NewScatter(marks)
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3.5), Shape: draw.TriangleGlyph{}}
	p.Add(sc)
	order := make([]int, len(bursts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(bursts[b].Count, bursts[a].Count) })
	var labelled []float64
	for _, i := range order {
		x := marks[i].X
		if slices.ContainsFunc(labelled, func(y float64) bool { return math.Abs(x-y) < 0.06*span }) {
			continue
		}
		labelled = append(labelled, x)
		if err := addText(p, x, marks[i].Y+p.Y.Max*0.03, Thousands(int(bursts[i].Count)), draw.XCenter, draw.YBottom); err != nil {
			return err
		}
	}
	return nil
}

// addText writes label at (x, y) in the plot's data.
func addText(p *plot.Plot, x, y float64, label string, xAlign draw.XAlignment, yAlign draw.YAlignment) error {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{label}})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = chartFont
		l.TextStyle[i].Font.Size = vg.Points(9)
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = xAlign, yAlign
	}
	l.Offset = vg.Point{Y: vg.Points(1)}
	p.Add(l)
	return nil
}

// vertical draws a vertical line at x.
func vertical(p *plot.Plot, x, ymax float64, c color.Color, dashes []vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax}})
	if err != nil {
		return nil, err
	}
	l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1)
	p.Add(l)
	return l, nil
}

// countTicks are plot's default ticks, labelled as counts are written:
// 2,500, not 2500.00.
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label == "" {
			continue
		}
		if t.Value == math.Trunc(t.Value) {
			ticks[i].Label = Thousands(int(t.Value))
		} else {
			ticks[i].Label = fmt.Sprintf("%g", t.Value)
		}
	}
	return ticks
}

// useFont sets every text of p in the chart's font, each at its size.
func useFont(p *plot.Plot) {
	for _, t := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label} {
		size := t.Font.Size
		t.Font = chartFont
		t.Font.Size = size
	}
}

// newLegend is the charts' legend: the chart's font, entries listed down
// from its top left.
func newLegend() plot.Legend {
	legend := plot.NewLegend()
	legend.TextStyle.Font = chartFont
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.Left, legend.Top, legend.Padding = true, true, vg.Points(3)
	return legend
}

// glyphThumb is a legend entry drawn as a glyph.
type glyphThumb struct{ draw.GlyphStyle }

func (g glyphThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(g.GlyphStyle, c.Center())
}

// TrimFloat writes a gap in seconds to one decimal, "2" for 2.0.
func TrimFloat(s float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", s), ".0")
}

// Thousands writes n with commas between its thousands, as the
// simulator's summaries do (plan.Thousands).
func Thousands(n int) string { return plan.Thousands(n) }

// RateSeries turns 100 ms counts into (bin start in seconds, arrivals per
// second) points over bins of per counts, starting at 0.
func RateSeries(counts []int, per int) plotter.XYs {
	bin := time.Duration(per) * Bin
	xys := make(plotter.XYs, 0, len(counts)/per+1)
	for i := 0; i < len(counts); i += per {
		sum := 0
		for _, c := range counts[i:min(i+per, len(counts))] {
			sum += c
		}
		xys = append(xys, plotter.XY{X: (time.Duration(i) * Bin).Seconds(), Y: float64(sum) / bin.Seconds()})
	}
	if len(xys) == 0 {
		xys = append(xys, plotter.XY{})
	}
	return xys
}
