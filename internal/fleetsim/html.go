package fleetsim

import (
	"bytes"
	"html/template"
	"io"
)

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct": func(f float64) float64 { return 100 * f },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>devicesim: {{.First.Scenario}}, {{.First.Devices}} devices</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child, td.why { text-align: left; }
.waves { color: #b00; font-weight: bold; } .spread { color: #070; font-weight: bold; }
</style></head><body>
<h1>{{.First.Scenario}}: {{.First.Devices}} devices, {{.First.Transport}} transport</h1>
<p>Engine {{.First.Engine}}, seed {{.First.Seed}}.
All times are unscaled seconds since the disruption{{if .First.BrokerBackS}}; the broker came back at {{printf "%.1f" .First.BrokerBackS}} s{{end}}.
{{with .First.Limit}}Admission limit {{printf "%.0f" .AdmitRate}} connects/s: the whole fleet needs at least {{printf "%.1f" .IdealRecoveryS}} s once the broker is back.{{end}}</p>
<figure>{{.Chart}}<figcaption>Connect attempts per second as the broker saw them.</figcaption></figure>
<table>
<tr><th>policy</th><th>time scale</th><th>recovery p50</th><th>p95</th><th>p99</th><th>max</th><th>all back</th>
<th>attempts / device</th><th>after return / device</th><th>refused</th>
<th>peak/s (100 ms)</th><th>peak/s (1 s)</th><th>Fano</th><th>local Fano</th><th>busiest s / around</th><th>max share in 1 s</th><th>verdict</th><th>why</th>
<th>wall</th><th>KiB / device</th></tr>
{{range .Reports}}<tr><td>{{.Policy}}</td><td>{{.TimeScale}}x</td>
<td>{{printf "%.1f" .RecoveryJSON.P50S}} s</td><td>{{printf "%.1f" .RecoveryJSON.P95S}} s</td>
<td>{{printf "%.1f" .RecoveryJSON.P99S}} s</td><td>{{printf "%.1f" .RecoveryJSON.MaxS}} s</td><td>{{.RecoveryJSON.AllRecovered}}</td>
<td>{{printf "%.1f" .Attempts.PerDeviceMean}}</td><td>{{printf "%.2f" .Attempts.AfterReturnPerDeviceMean}}</td><td>{{.Attempts.Refused}}</td>
<td>{{printf "%.0f" .Arrivals.PeakPerS100ms}}</td><td>{{printf "%.0f" .Arrivals.PeakPerS1s}}</td>
<td>{{printf "%.1f" .Arrivals.Fano}}</td><td>{{printf "%.1f" .Arrivals.LocalFano}}</td><td>{{printf "%.1f" .Arrivals.LocalPeakRatio}}x</td><td>{{printf "%.0f" (pct .Arrivals.MaxShare1s)}} %</td>
<td class="{{.Verdict}}">{{.Verdict}}</td><td class="why">{{.VerdictWhy}}</td>
<td>{{printf "%.1f" .Host.WallS}} s</td><td>{{printf "%.0f" .Host.MemoryPerDeviceKB}}</td></tr>
{{end}}</table>
{{range .Reports}}{{with .Telemetry}}<p>Telemetry ({{.RatePerDevice}}/s per device, whole run): {{.Enqueued}} enqueued, {{.Acknowledged}} acknowledged,
{{.ReceivedUnique}} received once, {{.Duplicates}} duplicates, {{.DroppedOldest}} dropped by full queues, <b>{{.Lost}} lost</b>.</p>{{end}}{{end}}
<p>Thresholds: {{with .First.Thresholds}}a burst is a wave when the local Fano factor is above {{.MaxLocalFano}} (beyond chance)
and its second holds more than {{.MaxLocalPeakRatio}}x the median of the 5 s before it and of the 5 s after it (big), or when one second holds more than
{{printf "%.0f" (pct .MaxShare1s)}} % of all attempts{{end}}.
Data: report.json and events.csv{{if gt (len .Reports) 1}} in each policy's directory{{end}}.</p>
</body></html>
`))

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
