package experiment

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
)

var gridPage = template.Must(template.New("grid").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>devicesim grid</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 2em; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: right; font-size: 90%; }
th:first-child { text-align: left; }
td.pass { background: #e3f4e3; } td.fail { background: #f8dddd; }
small { color: #555; }
</style></head><body>
<h1>Which policy brings a fleet back through a limited broker?</h1>
<p>Virtual time, seed {{.Grid.Config.Seed}}. Throttled restart: the broker is down for {{.Grid.Config.Outage}} s, then admits the rate
(bursts of rate/20); a cell passes when the recovery's 99th percentile from the return is at most 1.2 x ideal + {{.Grid.Config.MaxBackoff}} s (ideal = devices / rate),
the attempts per device from the return at most 1.5 x (1 + ideal / {{.TwoCaps}} s), and the verdict spread. Boot storm: every device powers on at once,
spreading its first connect over W, the agents' {{.Grid.Config.BootSpread}} s or the ideal if longer (an operator who knows what the broker
admits spreads boots over at least that), against the same admission from power-on; it passes when the 99th percentile is at most
1.2 x W + 2 s with at most 1.5 attempts per device. Each cell: p99 / bound,
attempts / bound, verdict. {{len .Grid.Cells}} cells in {{printf "%.0f" .Grid.WallS}} s.</p>
{{range .Tables}}<h2>{{.Policy}}: {{if .Pass}}passes every cell{{else}}fails {{.Failed}} of {{.Cells}} cells{{end}}</h2>
<table><tr><th>devices, scenario</th>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Label}}</th>{{range .Cells}}{{if .}}<td class="{{if .Pass}}pass{{else}}fail{{end}}" title="{{.Why}}">{{printf "%.1f" .P99AfterReturnS}} / {{printf "%.1f" .MaxP99S}} s<br>
{{printf "%.2f" .AttemptsAfterReturn}} / {{printf "%.2f" .MaxAttempts}}<br><small>{{.Verdict}}</small></td>{{else}}<td></td>{{end}}{{end}}</tr>
{{end}}</table>
{{end}}</body></html>
`))

type gridTable struct {
	Policy        string
	Pass          bool
	Failed, Cells int
	Columns       []string
	Rows          []gridRow
}

type gridRow struct {
	Label string
	Cells []*GridCell
}

// WriteHTML writes grid.html: one coloured table per policy, a row per fleet
// size and scenario, a column per admission rate and mode.
func (g *Grid) WriteHTML(w io.Writer) error {
	var tables []*gridTable
	byPolicy := map[string]*gridTable{}
	type col struct {
		rate float64
		mode string
	}
	var cols []col
	for i := range g.Cells {
		c := &g.Cells[i]
		if k := (col{c.AdmitRate, c.AdmitMode}); !slices.Contains(cols, k) {
			cols = append(cols, k)
		}
	}
	slices.SortFunc(cols, func(a, b col) int {
		if a.mode != b.mode {
			return strings.Compare(a.mode, b.mode)
		}
		return cmp.Compare(a.rate, b.rate)
	})
	for i := range g.Cells {
		c := &g.Cells[i]
		name := c.Policy
		if c.MQTT != MQTT311 {
			name += map[string]string{MQTT5: ", MQTT 5 honouring its codes", MQTT5Deaf: ", MQTT 5 deaf to its codes"}[c.MQTT]
		}
		t := byPolicy[name]
		if t == nil {
			t = &gridTable{Policy: name, Pass: true}
			for _, k := range cols {
				t.Columns = append(t.Columns, fmt.Sprintf("%.0f/s, %s", k.rate, k.mode))
			}
			byPolicy[name] = t
			tables = append(tables, t)
		}
		label := fmt.Sprintf("%d, %s", c.Devices, c.Scenario)
		ri := slices.IndexFunc(t.Rows, func(r gridRow) bool { return r.Label == label })
		if ri < 0 {
			t.Rows = append(t.Rows, gridRow{Label: label, Cells: make([]*GridCell, len(cols))})
			ri = len(t.Rows) - 1
		}
		t.Rows[ri].Cells[slices.Index(cols, col{c.AdmitRate, c.AdmitMode})] = c
		t.Cells++
		if !c.Pass {
			t.Pass = false
			t.Failed++
		}
	}
	return gridPage.Execute(w, struct {
		Grid    *Grid
		TwoCaps float64
		Tables  []*gridTable
	}{g, 2 * g.Config.MaxBackoff, tables})
}
