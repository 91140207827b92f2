package experiment

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// CalibrationCell is one run both engines make.
type CalibrationCell struct {
	Scenario plan.Scenario
	Policy   string
	Mode     fault.AdmissionMode
	// AdmitRate applies from the broker's return (throttled-restart).
	AdmitRate float64
	// TimeScale, if set, is the agents' time scale for this cell instead of
	// the calibration's.
	TimeScale float64
	// Then is the rest of a timeline (plan.Storm.Then): each disruption's
	// recovery is compared on its own.
	Then []plan.Event
	// Nodes, if > 1, makes the broker a cluster of that many nodes
	// (plan.Target.Nodes).
	Nodes int
	// Broker, if set, is an external broker the real devices storm
	// through the fault proxy (the model still models the in-process one);
	// MQTT5 makes the devices speak MQTT 5.
	Broker string
	MQTT5  bool
}

func (c CalibrationCell) String() string {
	s := fmt.Sprintf("%s, %s", c.Scenario, c.Policy)
	if c.AdmitRate > 0 {
		s = fmt.Sprintf("%s %s %.0f/s, %s", c.Scenario, c.Mode, c.AdmitRate, c.Policy)
	}
	if c.Nodes > 1 {
		s = fmt.Sprintf("%d nodes: %s", c.Nodes, s)
	}
	for _, e := range c.Then {
		switch {
		case e.Node != nil:
			s += fmt.Sprintf(", then %s of node %d at %v", e.Scenario, *e.Node, e.At)
		default:
			s += fmt.Sprintf(", then %s at %v", e.Scenario, e.At)
		}
	}
	if c.MQTT5 {
		s += ", MQTT 5"
	}
	if c.Broker != "" {
		s += ", through the proxy to " + c.Broker
	}
	if c.TimeScale > 0 {
		s += fmt.Sprintf(" (agents at %gx)", c.TimeScale)
	}
	return s
}

// BrokerCalibrationCells are the cells make calibrate-mosquitto runs
// against the broker at url: a restart and a throttled restart, on MQTT
// 3.1.1 and 5, under the mission's formula and full jitter. The fault
// proxy refuses a connection over its limit with a reset, where the
// model's broker answers an MQTT 5 device 0x9F, which stretches its wait:
// over MQTT 5 the throttled restart holds the connections over the limit
// instead, as both do alike.
func BrokerCalibrationCells(url string) []CalibrationCell {
	var cells []CalibrationCell
	for _, v5 := range []bool{false, true} {
		mode := fault.RefuseOverLimit
		if v5 {
			mode = fault.PauseOverLimit
		}
		for _, p := range []string{"iotcore", "full"} {
			cells = append(cells, CalibrationCell{Scenario: plan.BrokerRestart, Policy: p, Broker: url, MQTT5: v5},
				CalibrationCell{Scenario: plan.ThrottledRestart, Policy: p, Mode: mode, AdmitRate: 200, Broker: url, MQTT5: v5,
					TimeScale: brokerCellTimeScale(p, mode)})
		}
	}
	return cells
}

// brokerCellTimeScale is the real devices' time scale for a throttled
// restart through the proxy (0: the calibration's). iotcore's rounds at
// its cap bring the devices still out within one second, which the limit
// refuses past its burst of 10. At 5x this host makes each round's
// connects in bunches. Then the limit refuses more of them than the model
// does, and the last of the fleet come back rounds later (seed 1, 2,000
// devices: the agents' last device at 418 s, the model's at 226 s). At 2x
// one round later is still common. In real time both real engines match
// the model (seed 1: p99 193.8, 193.8 and 193.8 s; the last device 225.7,
// 225.6 and 225.6 s: agents, wire, model; 2026-11-29).
func brokerCellTimeScale(policy string, mode fault.AdmissionMode) float64 {
	if policy == "iotcore" && mode == fault.RefuseOverLimit {
		return 1
	}
	return 0
}

// CalibrationCells are the cells make calibrate runs: every disruption the
// engines both model, under the mission's formula and two jittered shapes.
func CalibrationCells() []CalibrationCell {
	var cells []CalibrationCell
	for _, p := range []string{"iotcore", "full", "decorrelated"} {
		cells = append(cells,
			CalibrationCell{Scenario: plan.BrokerRestart, Policy: p},
			CalibrationCell{Scenario: plan.DropAll, Policy: p},
			CalibrationCell{Scenario: plan.ThrottledRestart, Policy: p, Mode: fault.RefuseOverLimit, AdmitRate: 200},
			CalibrationCell{Scenario: plan.ThrottledRestart, Policy: p, Mode: fault.PauseOverLimit, AdmitRate: 200},
			CalibrationCell{Scenario: plan.ThrottledRestart, Policy: p, Mode: fault.DisconnectOverLimit, AdmitRate: 200,
				TimeScale: hostServes(p)},
			CalibrationCell{Scenario: plan.Flapping, Policy: p})
	}
	return cells
}

// hostServes is the agents' time scale for the disconnect-mode cell of
// policy p. In disconnect mode the broker sets up and tears down a whole
// session for every refused attempt. iotcore's rounds at its cap bring
// the whole waiting fleet within one second. At 5x that is some 10,000
// sessions a second, twice what this host serves. The broker's backlog
// then hands the devices their disconnects together. The formula keeps
// them in lock-step for good (seed 1: p99 300 s at 5x, 193.8 s at 2x as
// in virtual time). 2x keeps the host out of it; 0 keeps the
// calibration's.
func hostServes(policy string) float64 {
	if policy == "iotcore" {
		return 2
	}
	return 0
}

// Calibration is what make calibrate measures: the same cells on both
// engines, and whether they agree.
type Calibration struct {
	Devices int `json:"devices"`
	// VirtualTime: the agents ran in a testing/synctest bubble, on a clock
	// no host can slow (the model against the code); otherwise in wall-clock
	// time at TimeScale (what this host serves).
	VirtualTime bool              `json:"virtual_time"`
	Wire        bool              `json:"wire,omitempty"` // the wire engine ran beside the agents
	TimeScale   float64           `json:"time_scale"`     // the agents'
	Seeds       []uint64          `json:"seeds"`
	Rows        []CalibrationRow  `json:"rows"`
	Agree       bool              `json:"agree"`
	Tolerance   CalibrationBounds `json:"tolerance"`
}

// CalibrationBounds is how close the engines must be. A run's p99 is close
// enough too when it lies within the other engine's p98.5 to p99.5
// (report.Recovery.Near99), each end widened as a time is: where devices
// come back in rounds, the ranks about p99 tell how much of the fleet
// apart two engines are, and p99 alone a whole round for ten devices.
type CalibrationBounds struct {
	Share float64 `json:"share"`  // of the larger figure
	TimeS float64 `json:"time_s"` // or this much for times, whichever is larger
	Count float64 `json:"count"`  // or this many for attempts per device
}

// DefaultCalibrationBounds: within 5 %, or 0.5 s for times and 0.05 for
// attempts per device, whichever is larger.
var DefaultCalibrationBounds = CalibrationBounds{Share: 0.05, TimeS: 0.5, Count: 0.05}

// CalibrationRow is one cell's figures on each engine.
type CalibrationRow struct {
	Cell    string         `json:"cell"`
	Agents  EngineFigures  `json:"agents"`
	Wire    *EngineFigures `json:"wire,omitempty"` // where the calibration runs the wire engine too
	Virtual EngineFigures  `json:"virtual"`
	Agree   bool           `json:"agree"`
	Apart   []string       `json:"apart,omitempty"` // the figures that differ too much
	Bound   bool           `json:"host_bound"`      // a real engine's run was host-bound
}

// EngineFigures are the figures compared, each the mean over the seeds.
// A percentile of rounds 32 s apart lands in one round or the next from
// seed to seed on either engine: P99NearS is p98.5 and p99.5.
type EngineFigures struct {
	P50S                float64            `json:"p50_s"`
	P99S                float64            `json:"p99_s"`
	P99NearS            [2]float64         `json:"p99_near_s"`
	AttemptsPerDevice   float64            `json:"attempts_per_device"`
	AttemptsAfterReturn float64            `json:"attempts_after_return_per_device"`
	Verdict             stormstats.Verdict `json:"verdict"`
	WallS               float64            `json:"wall_s"`
	// Recoveries are a timeline's, each after its own disruption.
	Recoveries []RecoveryFigures `json:"recoveries,omitempty"`
}

// RecoveryFigures are one disruption's recovery, after it.
type RecoveryFigures struct {
	P50S float64 `json:"p50_s"`
	P99S float64 `json:"p99_s"`
}

// add adds one run's figures, the k-th of n seeds.
func (f *EngineFigures) add(r *report.Report, n int) {
	w := 1 / float64(n)
	f.P50S += w * r.Recovery.P50S
	f.P99S += w * r.Recovery.P99S
	lo, hi := r.Recovery.Near99()
	f.P99NearS[0] += w * lo
	f.P99NearS[1] += w * hi
	f.AttemptsPerDevice += w * r.Attempts.PerDeviceMean
	f.AttemptsAfterReturn += w * r.Attempts.AfterReturnPerDeviceMean
	f.WallS += w * r.Host.WallS
	if f.Recoveries == nil {
		f.Recoveries = make([]RecoveryFigures, len(r.Disruptions))
	}
	for k, d := range r.Disruptions {
		if k < len(f.Recoveries) {
			f.Recoveries[k].P50S += w * d.Recovery.P50S
			f.Recoveries[k].P99S += w * d.Recovery.P99S
		}
	}
}

// AgentsRunner runs the real devices' side of a calibration (the agents,
// the wire engine). For the model against the code (the package's tests
// and make calibrate), it runs inside a testing/synctest bubble. It is nil
// for Run in wall-clock time.
type AgentsRunner func(plan.Plan) (*report.Report, error)

// CalibrationConfig is what a calibration runs: its cells, on fleets of
// Devices, once per seed. The real devices run through RunAgents, or in
// wall-clock time at TimeScale when it is nil. Wire runs the wire engine
// beside the agents, held to the same bounds against them. Progress, if
// set, gets each row as it is measured.
type CalibrationConfig struct {
	Cells     []CalibrationCell
	Devices   int
	TimeScale float64
	Seeds     []uint64
	RunAgents AgentsRunner
	Wire      bool
	Progress  io.Writer
}

// Calibrate runs each cell on the agents and the virtual engine (and the
// wire engine, if c.Wire). It compares the means, each recovery's of a
// timeline too. Each seed's verdicts must match, the run's and each
// recovery's.
func Calibrate(ctx context.Context, c CalibrationConfig) (*Calibration, error) {
	cal := &Calibration{Devices: c.Devices, TimeScale: c.TimeScale, Seeds: c.Seeds, Agree: true, Tolerance: DefaultCalibrationBounds,
		VirtualTime: c.RunAgents != nil, Wire: c.Wire}
	if c.RunAgents != nil {
		cal.TimeScale = 1
	}
	progress := c.Progress
	for _, cell := range c.Cells {
		row, err := calibrateCell(ctx, cell, c)
		if err != nil {
			return cal, err
		}
		cal.Agree = cal.Agree && row.Agree
		cal.Rows = append(cal.Rows, row)
		if progress != nil {
			writeRow(progress, row)
		}
	}
	return cal, nil
}

// calibrateCell runs one cell on each engine, once per seed.
func calibrateCell(ctx context.Context, cell CalibrationCell, c CalibrationConfig) (CalibrationRow, error) {
	p := plan.Default()
	p.Devices, p.Scenario, p.Policy, p.TimeScale = c.Devices, cell.Scenario, cell.Policy, cmp.Or(cell.TimeScale, c.TimeScale)
	p.AdmitRate, p.AdmitMode, p.AdmitBurst = cell.AdmitRate, cell.Mode, max(1, int(cell.AdmitRate/20))
	p.Then, p.Events, p.Nodes, p.MQTT5 = cell.Then, io.Discard, cell.Nodes, cell.MQTT5
	if c.RunAgents != nil {
		cell.TimeScale = 0 // a host's allowance: virtual time needs none
	}
	engines := []plan.Engine{plan.Agents, plan.Virtual}
	row := CalibrationRow{Cell: cell.String()}
	if c.Wire {
		engines, row.Wire = append(engines, plan.Wire), &EngineFigures{}
	}
	var verdicts []string
	for _, seed := range c.Seeds {
		p.Seed = seed
		got := make([]*report.Report, len(engines))
		for k, engine := range engines {
			run := p
			run.Engine = engine
			if engine == plan.Virtual {
				run.Broker = "" // the model's broker is the in-process one
			} else {
				run.Broker = cell.Broker
			}
			var err error
			if engine != plan.Virtual && c.RunAgents != nil {
				got[k], err = c.RunAgents(run)
			} else {
				got[k], err = fleetsim.Run(ctx, run)
			}
			if got[k] == nil {
				return row, fmt.Errorf("%s, %s engine, seed %d: %w", cell, engine, seed, err)
			}
		}
		n := len(c.Seeds)
		row.Agents.add(got[0], n)
		row.Virtual.add(got[1], n)
		row.Bound = row.Bound || got[0].Host.Bound
		row.Agents.Verdict, row.Virtual.Verdict = got[0].Verdict, got[1].Verdict
		verdicts = append(verdicts, verdictsApart(seed, "", got[0], got[1])...)
		if row.Wire != nil {
			row.Wire.add(got[2], n)
			row.Wire.Verdict = got[2].Verdict
			row.Bound = row.Bound || got[2].Host.Bound
			verdicts = append(verdicts, verdictsApart(seed, "wire: ", got[2], got[0])...)
		}
	}
	row.Apart = DefaultCalibrationBounds.Apart(row.Agents, row.Virtual)
	if row.Wire != nil {
		for _, a := range DefaultCalibrationBounds.Apart(*row.Wire, row.Agents) {
			row.Apart = append(row.Apart, "wire: "+a)
		}
	}
	row.Apart = append(row.Apart, verdicts...)
	row.Agree = len(row.Apart) == 0
	return row, nil
}

// verdictsApart lists where one seed's run a and the run it is held to, v,
// differ in verdict: the run's, and each recovery's of a timeline; each
// line begins with prefix.
func verdictsApart(seed uint64, prefix string, a, v *report.Report) []string {
	var out []string
	if a.Verdict != v.Verdict {
		out = append(out, fmt.Sprintf("%sseed %d: verdict %s vs %s", prefix, seed, a.Verdict, v.Verdict))
	}
	for k := range min(len(a.Disruptions), len(v.Disruptions)) {
		if x, y := a.Disruptions[k].Verdict, v.Disruptions[k].Verdict; x != y {
			out = append(out, fmt.Sprintf("%sseed %d: recovery %d verdict %s vs %s", prefix, seed, k+1, x, y))
		}
	}
	return out
}

// Apart lists the figures a and v disagree on.
func (b CalibrationBounds) Apart(a, v EngineFigures) []string {
	var out []string
	near := func(x, y, floor float64) bool { return math.Abs(x-y) <= max(b.Share*max(x, y), floor) }
	// within says x lies within the ranks about p99 of the other, ends
	// widened as near widens them
	within := func(x float64, ranks [2]float64) bool {
		return x >= ranks[0]-max(b.Share*ranks[0], b.TimeS) && x <= ranks[1]+max(b.Share*ranks[1], b.TimeS)
	}
	for _, f := range []struct {
		name  string
		x, y  float64
		floor float64
	}{{"p50", a.P50S, v.P50S, b.TimeS}, {"p99", a.P99S, v.P99S, b.TimeS},
		{"attempts", a.AttemptsPerDevice, v.AttemptsPerDevice, b.Count},
		{"after return", a.AttemptsAfterReturn, v.AttemptsAfterReturn, b.Count}} {
		if f.name == "p99" && (within(a.P99S, v.P99NearS) || within(v.P99S, a.P99NearS)) {
			continue
		}
		if !near(f.x, f.y, f.floor) {
			out = append(out, fmt.Sprintf("%s %.2f vs %.2f", f.name, f.x, f.y))
		}
	}
	if len(a.Recoveries) != len(v.Recoveries) {
		return append(out, fmt.Sprintf("%d recoveries vs %d", len(a.Recoveries), len(v.Recoveries)))
	}
	for k := range a.Recoveries {
		x, y := a.Recoveries[k], v.Recoveries[k]
		if !near(x.P50S, y.P50S, b.TimeS) || !near(x.P99S, y.P99S, b.TimeS) {
			out = append(out, fmt.Sprintf("recovery %d p50/p99 %.2f/%.2f vs %.2f/%.2f", k+1, x.P50S, x.P99S, y.P50S, y.P99S))
		}
	}
	return out
}

// Table writes the calibration as a markdown table: each figure the
// agents', the wire engine's where it ran, and the model's.
func (cal *Calibration) Table(w io.Writer) {
	time := fmt.Sprintf("agents at %gx", cal.TimeScale)
	if cal.VirtualTime {
		time = "agents in virtual time"
	}
	engines := "agents / virtual"
	if cal.Wire {
		engines = "agents / wire / virtual"
	}
	fmt.Fprintf(w, "| cell (%d devices, %s, mean of %d seeds) | p50 %s | p99 | attempts / device | after the return | verdict | agree |\n",
		cal.Devices, time, len(cal.Seeds), engines)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range cal.Rows {
		writeRow(w, r)
	}
}

func writeRow(w io.Writer, r CalibrationRow) {
	figures := []EngineFigures{r.Agents, r.Virtual}
	if r.Wire != nil {
		figures = []EngineFigures{r.Agents, *r.Wire, r.Virtual}
	}
	each := func(format string, of func(EngineFigures) float64) string {
		parts := make([]string, len(figures))
		for k, f := range figures {
			parts[k] = fmt.Sprintf(format, of(f))
		}
		return strings.Join(parts, " / ")
	}
	verdicts := make([]string, len(figures))
	for k, f := range figures {
		verdicts[k] = string(f.Verdict)
	}
	verdict := verdicts[0]
	if slices.ContainsFunc(verdicts, func(v string) bool { return v != verdict }) {
		verdict = strings.Join(verdicts, " / ")
	}
	agree := "yes"
	if !r.Agree {
		agree = "no: " + fmt.Sprint(r.Apart)
	}
	if r.Bound {
		agree += " (real devices host-bound)"
	}
	fmt.Fprintf(w, "| %s | %s s | %s s | %s | %s | %s | %s |\n", r.Cell,
		each("%.1f", func(f EngineFigures) float64 { return f.P50S }), each("%.1f", func(f EngineFigures) float64 { return f.P99S }),
		each("%.2f", func(f EngineFigures) float64 { return f.AttemptsPerDevice }),
		each("%.2f", func(f EngineFigures) float64 { return f.AttemptsAfterReturn }), verdict, agree)
}
