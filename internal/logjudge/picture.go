package logjudge

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/herdguard/herdguard/internal/chart"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// View is a broker's log as devicesim judge read it, for its picture:
// every time in seconds from the log's first arrival.
type View struct {
	Name    string // the file judged, or "standard input"
	Format  string
	Times   []time.Duration // each arrival, from the first
	Verdict stormstats.Verdict
	// Recoveries are the recoveries judged on their own, the first from
	// the log's start where the log showed its disruptions; one for a log
	// judged whole.
	Recoveries []RecoveryView
	// Start is the first arrival's instant; zero where the log's times
	// are not on the wall clock.
	Start time.Time
}

// RecoveryView is one recovery of a judged log.
type RecoveryView struct {
	AtS       float64 `json:"at_s"` // its start; 0 for the log's
	Why       string  `json:"why"`  // the line that said so, if the log did
	Arrivals  stormstats.Arrivals
	Judgement stormstats.Judgement // its bursts from the log's first arrival
}

// ChartSVG draws a judged log's connects a second, its disruptions
// marked and each burst its verdict found with its size.
func ChartSVG(v View) ([]byte, error) {
	if len(v.Times) == 0 {
		return nil, fmt.Errorf("report: no arrivals to chart")
	}
	span := slices.Max(v.Times).Seconds() + chart.Bin.Seconds()
	bins := int(math.Ceil(span / chart.Bin.Seconds()))
	per := max(1, int(math.Ceil(float64(bins)/chart.MaxPoints)))
	bin := time.Duration(per) * chart.Bin
	rates := make(plotter.XYs, int(span/bin.Seconds())+1)
	for i := range rates {
		rates[i].X = float64(i) * bin.Seconds()
	}
	for _, t := range v.Times {
		rates[int(t/bin)].Y += 1 / bin.Seconds()
	}
	pn := chart.Panel{Title: logTitle(v), Lines: []chart.Line{{XYs: rates, Label: "connects in the broker's log", Color: chart.Blue, Width: vg.Points(1.4)}},
		XLabel: "seconds from the log's first arrival", YLabel: "connects a second"}
	for _, xy := range rates {
		pn.YMax = max(pn.YMax, xy.Y)
	}
	for _, r := range v.Recoveries {
		if r.AtS > 0 {
			pn.Later = append(pn.Later, r.AtS)
		}
		pn.Bursts = append(pn.Bursts, r.Judgement.Bursts...)
	}
	title := fmt.Sprintf("%s (%s): connects a second, %s", v.Name, v.Format, v.Verdict)
	return chart.Figure(title, []chart.Panel{pn}, span)
}

func logTitle(v View) string {
	if len(v.Recoveries) > 1 {
		return fmt.Sprintf("%s: %d recoveries, each judged on its own", v.Verdict, len(v.Recoveries))
	}
	j := v.Recoveries[0].Judgement
	if j.Verdict == stormstats.Waves {
		return fmt.Sprintf("waves, %d bursts %s to %s s apart, synchrony %.2f", len(j.Bursts), chart.TrimFloat(j.GapMinS), chart.TrimFloat(j.GapMaxS), j.Synchrony)
	}
	return fmt.Sprintf("%s (synchrony %.2f)", j.Verdict, j.Synchrony)
}

var logPage = template.Must(template.New("log").Funcs(template.FuncMap{
	"count": func(f float64) string { return chart.Thousands(int(math.Round(f))) },
	"at": func(start time.Time, s float64) string {
		if start.IsZero() {
			return fmt.Sprintf("%.1f s", s)
		}
		return fmt.Sprintf("%.1f s (%s)", s, start.Add(time.Duration(s*float64(time.Second))).Format("2006-01-02T15:04:05.999Z07:00"))
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>devicesim judge: {{.Name}}</title>
<style>` + report.PageStyle + `</style></head><body>
<h1>{{.Name}}: <span class="{{.Verdict}}">{{.Verdict}}</span></h1>
<dl class="summary">
<dt>{{len .Times}} connects, {{.Format}}</dt>
{{range .Recoveries}}<dd>{{if .Why}}after the disruption at {{at $.Start .AtS}} ({{.Why}}){{else}}from the log's start{{end}}:
<span class="{{.Judgement.Verdict}}">{{.Judgement.Verdict}}</span>, {{.Arrivals.Count}} arrivals, the busiest second {{count .Arrivals.PeakPerS1s}}</dd>
{{end}}</dl>
<figure>{{.Chart}}<figcaption>Connects a second in the broker's log, from its first arrival{{if not .Start.IsZero}} ({{.Start.Format "2006-01-02T15:04:05.999Z07:00"}}){{end}}:
each disruption the log showed or -disruptions named dashed; a triangle marks each burst the verdict found, with its connects.</figcaption></figure>
<div class="scroll"><table><tr><th>recovery from</th><th>arrivals</th><th>busiest second</th><th>synchrony</th><th>bursts</th><th>verdict</th><th>why</th></tr>
{{range .Recoveries}}<tr><td>{{at $.Start .AtS}}</td><td>{{.Arrivals.Count}}</td><td>{{count .Arrivals.PeakPerS1s}}</td>
<td>{{printf "%.2f" .Judgement.Synchrony}}</td><td>{{len .Judgement.Bursts}}</td><td class="{{.Judgement.Verdict}}">{{.Judgement.Verdict}}</td>
<td class="why">{{.Judgement.Reason}}</td></tr>
{{end}}</table></div>
<p>Data: the log itself; devicesim judge -json writes these figures for programs.</p>
</body></html>
`))

// WritePicture writes a judged log's arrivals.svg and report.html into
// dir, which it makes if need be, as a run's are written.
func WritePicture(dir string, v View) error {
	svg, err := ChartSVG(v)
	if err != nil {
		return err
	}
	d, err := datadir.MkdirShared(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := datadir.WriteShared(d, "arrivals.svg", 0o644, func(w io.Writer) error {
		_, err := w.Write(svg)
		return err
	}); err != nil {
		return err
	}
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		svg = svg[i:]
	}
	return datadir.WriteShared(d, "report.html", 0o644, func(w io.Writer) error {
		return logPage.Execute(w, struct {
			View
			Chart template.HTML
		}{v, template.HTML(svg)}) // the chart is our own SVG
	})
}
