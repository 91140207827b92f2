package report

import (
	"bytes"
	"html/template"
	"io"
	"math"

	"github.com/herdguard/herdguard/internal/chart"
)

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":       func(f float64) float64 { return 100 * f },
	"ms":        func(s float64) float64 { return 1000 * s },
	"thousands": chart.Thousands,
	"count":     func(f float64) string { return chart.Thousands(int(math.Round(f))) },
	"failed": func(xs []Expectation) int {
		n := 0
		for _, x := range xs {
			if !x.Pass {
				n++
			}
		}
		return n
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>devicesim: {{.First.Scenario}}, {{.First.Devices}} devices</title>
<style>` + PageStyle + `</style></head><body>
<h1>{{.First.Scenario}}: {{thousands .First.Devices}} devices</h1>
<dl class="summary">
{{range .Reports}}<dt>{{.Policy}}: <span class="{{.Verdict}}">{{.Verdict}}</span></dt>
<dd>recovery p50 {{printf "%.1f" .Recovery.P50S}} s, p99 {{printf "%.1f" .Recovery.P99S}} s{{if .Recovery.AllRecovered}}, every device back{{else}}, <span class="fail">not every device back</span>{{end}};
{{printf "%.1f" .Attempts.PerDeviceMean}} attempts a device;
{{with .Broker}}the broker's busiest second {{count .Arrivals.PeakPerS1s}} connects{{else}}the devices' busiest second {{count .Fleet.Arrivals.PeakPerS1s}} attempts{{end}}{{if .Expectations}};
expectations: {{with failed .Expectations}}<span class="fail">{{.}} failed</span> of {{else}}<span class="pass">all passed</span> of {{end}}{{len .Expectations}}{{end}}</dd>
{{end}}</dl>
<p>Engine {{.First.Engine}}, {{.First.Transport}} transport, seed {{.First.Seed}}.
All times are unscaled seconds since the disruption{{if .First.BrokerBackS}}; the broker came back at {{printf "%.1f" .First.BrokerBackS}} s{{end}}.
{{with .First.Limit}}Admission limit {{printf "%.0f" .AdmitRate}} connects/s: the whole fleet needs at least {{printf "%.1f" .IdealRecoveryS}} s once the broker is back.{{end}}</p>
{{range .Reports}}{{if .Host.Bound}}<p class="waves">Host-bound ({{.Policy}}): attempts left up to {{printf "%.0f" (ms .Host.LagP99S)}} ms and losses were noticed up to
{{printf "%.0f" (ms .Host.NoticeP99S)}} ms late (p99, unscaled): the host, not the fleet, set these times. Lower the time scale or the fleet.</p>{{end}}{{end}}
<figure>{{.Chart}}<figcaption>Connect attempts a second, a panel a policy on one time axis and one scale: every attempt the devices made (vermilion, refused dials included) and what reached the broker or each node (blue and the rest); the outage shaded, later disruptions dashed, the admission limit dotted; a triangle marks each burst the verdict found, with its attempts.</figcaption></figure>
<div class="scroll"><table>
<tr><th>policy</th><th>time scale</th><th>recovery p50</th><th>p95</th><th>p99</th><th>max</th><th>all back</th>
<th>attempts / device</th><th>after return / device</th><th>refused</th>
<th>peak/s (100 ms)</th><th>peak/s (1 s)</th><th>synchrony</th><th>bursts</th><th>period</th><th>verdict</th><th>why</th>
<th>broker peak/s (1 s)</th><th>broker verdict</th>
<th>wall</th><th>KiB / device</th></tr>
{{range .Reports}}<tr><td>{{.Policy}}</td><td>{{.TimeScale}}x</td>
<td>{{printf "%.1f" .Recovery.P50S}} s</td><td>{{printf "%.1f" .Recovery.P95S}} s</td>
<td>{{printf "%.1f" .Recovery.P99S}} s</td><td>{{printf "%.1f" .Recovery.MaxS}} s</td><td>{{.Recovery.AllRecovered}}</td>
<td>{{printf "%.1f" .Attempts.PerDeviceMean}}</td><td>{{printf "%.2f" .Attempts.AfterReturnPerDeviceMean}}</td><td>{{.Attempts.Refused}}</td>
{{with .Fleet}}<td>{{printf "%.0f" .Arrivals.PeakPerS100ms}}</td><td>{{printf "%.0f" .Arrivals.PeakPerS1s}}</td>
<td>{{printf "%.2f" .Judgement.Synchrony}}</td><td>{{len .Judgement.Bursts}}</td><td>{{if .Judgement.PeriodS}}{{printf "%.1f" .Judgement.PeriodS}} s{{end}}</td>
<td class="{{.Judgement.Verdict}}">{{.Judgement.Verdict}}</td><td class="why">{{.Judgement.Reason}}</td>{{end}}
{{with .Broker}}<td>{{printf "%.0f" .Arrivals.PeakPerS1s}}</td><td class="{{.Judgement.Verdict}}">{{.Judgement.Verdict}}</td>{{else}}<td>-</td><td>-</td>{{end}}
<td>{{printf "%.1f" .Host.WallS}} s</td><td>{{printf "%.0f" .Host.MemoryPerDeviceKB}}</td></tr>
{{end}}</table></div>
{{range .Reports}}{{if .Disruptions}}<h2>{{.Policy}}: each disruption's recovery</h2>
<div class="scroll"><table><tr><th>disruption at</th><th>recovery p99 after it</th><th>all back</th><th>verdict</th><th>why</th></tr>
{{range .Disruptions}}<tr><td>{{printf "%.0f" .AtS}} s</td><td>{{printf "%.1f" .Recovery.P99S}} s</td><td>{{.Recovery.AllRecovered}}</td>
<td class="{{.Verdict}}">{{.Verdict}}</td><td class="why">{{.Fleet.Judgement.Reason}}</td></tr>
{{end}}</table></div><p>The run's verdict is its recoveries' together: <span class="{{.Verdict}}">{{.Verdict}}</span>.</p>{{end}}
{{if .Groups}}<h2>{{.Policy}}: each group of the fleet</h2>
<div class="scroll"><table><tr><th>group</th><th>policy</th><th>devices</th><th>recovery p99</th><th>all back</th><th>attempts / device</th><th>verdict</th></tr>
{{range .Groups}}<tr><td>{{.Name}}</td><td>{{.Policy}}</td><td>{{.Devices}}</td><td>{{printf "%.1f" .Recovery.P99S}} s</td><td>{{.Recovery.AllRecovered}}</td>
<td>{{printf "%.1f" .Attempts.PerDeviceMean}}</td><td class="{{.Verdict}}">{{.Verdict}}</td></tr>
{{end}}</table></div>{{end}}
{{if .Nodes}}<h2>{{.Policy}}: each node of the cluster</h2>
<div class="scroll"><table><tr><th>node</th><th>connects taken</th><th>busiest second</th></tr>
{{range .Nodes}}<tr><td>{{.Node}}</td><td>{{.Arrivals.Count}}</td><td>{{printf "%.0f" .Arrivals.PeakPerS1s}}/s</td></tr>
{{end}}</table></div>{{end}}
{{if .Expectations}}<h2>{{.Policy}}: expectations</h2>
<div class="scroll"><table><tr><th>what</th><th>want</th><th>got</th><th>pass</th></tr>
{{range .Expectations}}<tr><td>{{.What}}</td><td>{{.Want}}</td><td>{{.Got}}</td><td class="{{if .Pass}}spread{{else}}waves{{end}}">{{if .Pass}}pass{{else}}FAIL{{end}}</td></tr>
{{end}}</table></div>{{end}}{{end}}
{{range .Reports}}{{with .Telemetry}}<p>Telemetry ({{.RatePerDevice}}/s per device, whole run): {{.Enqueued}} enqueued, {{.Acknowledged}} acknowledged,
{{.ReceivedUnique}} received once, {{.Duplicates}} duplicates, {{.DroppedOldest}} dropped by full queues, <b>{{.Lost}} lost</b>.</p>{{end}}{{end}}
<p>How the verdict is reached: {{with .First.Fleet.Judgement.Method}}a burst is a window holding at least {{.Contrast}}x the attempts of each of
the three windows of its width on either side, beyond chance (the chance of finding one where there is none is at most {{.Alpha}}, every window of
every width tried counted). Waves are at least two bursts, those besides the largest holding at least {{printf "%.0f" (pct .MinRecurringShare)}} %
of the attempts; one burst alone is reported but is not a sequence of rounds. Synchrony is the share of attempts in excess of the local rate,
summed over the bursts. Below {{.MinArrivals}} attempts with no waves found the verdict is inconclusive{{end}}. The verdict judges every attempt the
devices made, refused dials included: synchronisation is a property of the devices' schedule, visible even while the broker saw nothing.
Data: report.json and events.csv{{if gt (len .Reports) 1}} in each policy's directory{{end}}.</p>
</body></html>
`))

// PageStyle is the style sheet of devicesim's pages (a run's, a judged
// log's): no font, script or image fetched.
const PageStyle = `
body { font-family: "Liberation Sans", Arial, sans-serif; margin: 1em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child, td.why { text-align: left; }
.waves, .fail { color: #b00; font-weight: bold; } .spread, .pass { color: #070; font-weight: bold; }
.inconclusive { color: #555; font-weight: bold; }
.scroll { overflow-x: auto; } td.why { min-width: 16em; }
figure { margin: 1em 0; } figure svg { display: block; width: auto; height: auto; max-width: 100%; max-height: 96vh; }
.summary { font-size: 1.1em; } .summary dt { font-weight: bold; margin-top: 0.6em; } .summary dd { margin-left: 1em; }
`

// WriteHTML writes report.html for one run or a compare run's reports, with
// the chart inline so the file stands alone.
func WriteHTML(w io.Writer, reports []*Report) error {
	chart, err := ChartSVG(reports)
	if err != nil {
		return err
	}
	if i := bytes.Index(chart, []byte("<svg")); i > 0 {
		chart = chart[i:] // inline in HTML: no XML prolog
	}
	return page.Execute(w, struct {
		First   *Report
		Reports []*Report
		Chart   template.HTML
	}{reports[0], reports, template.HTML(chart)}) // the chart is our own SVG
}
