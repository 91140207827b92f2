// Package experiment holds the studies made of many runs, as clients of
// the engines. The policy grid runs every policy against fleets of 1,000
// to a million behind admission limits, in virtual time. The calibration
// checks the virtual engine against the real agents. The soak puts one
// live fleet of real agents through storm after storm.
package experiment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/virtual"
)

// GridConfig is a policy grid: which policy brings N devices back through a
// broker that admits R connects per second, in the virtual engine. Each
// throttled-restart cell has the broker down for Outage. The broker then
// admits AdmitRate connects/s (bursts of AdmitRate/20) in AdmitMode. Each
// boot-storm cell powers every device on at once against the same
// admission. Each device's first connect is spread over W: the agents'
// 10 s, or devices / rate if longer. An operator who knows what the broker
// admits spreads boots over at least that.
type GridConfig struct {
	Devices    []int
	AdmitRates []float64
	AdmitModes []fault.AdmissionMode
	Policies   []string
	// MQTT lists what the devices speak: MQTT311 (the default alone),
	// MQTT5 (honouring the broker's reason codes) or MQTT5Deaf (ignoring
	// them); each is a cell of its own.
	MQTT       []string
	Outage     time.Duration
	MaxBackoff time.Duration
	Seed       uint64
	// Parallel is how many cells run at once (0: 2).
	Parallel int
	// Full runs every cell until its fleet is back (or its bound) and reads
	// the broker's side too. A failing cell's figures are then its own, not
	// the lower bounds at which its failure became certain. The cell then
	// also has the broker's busiest second.
	Full bool
	// Progress, if set, gets a line per cell as it finishes.
	Progress io.Writer
}

// What a grid's devices speak: a refusal over the admission limit reads
// CONNACK 3 on 3.1.1 and 0x9F connection rate exceeded on MQTT 5. A
// device that honours 0x9F stretches its wait by it.
const (
	MQTT311   = "3.1.1"
	MQTT5     = "5"
	MQTT5Deaf = "5-deaf"
)

// DefaultGrid is devicesim grid's: 1,000 to a million devices, 500 to
// 50,000 connects/s refused over the limit, every policy, a 60 s outage, a
// 32 s cap.
func DefaultGrid() GridConfig {
	var policies []string
	for _, p := range plan.PolicyNames() {
		if p != plan.PahoDefault { // real paho clients only: not in virtual time
			policies = append(policies, p)
		}
	}
	return GridConfig{Devices: []int{1000, 10_000, 100_000, 1_000_000}, AdmitRates: []float64{500, 5000, 50_000},
		AdmitModes: []fault.AdmissionMode{fault.RefuseOverLimit}, Policies: policies, MQTT: []string{MQTT311},
		Outage: time.Minute, MaxBackoff: 32 * time.Second, Seed: 1}
}

// GridCell is one cell's outcome and the bounds it is held to.
type GridCell struct {
	Policy    string        `json:"policy"`
	Scenario  plan.Scenario `json:"scenario"` // throttled-restart or boot-storm
	Devices   int           `json:"devices"`
	AdmitRate float64       `json:"admit_rate"`
	AdmitMode string        `json:"admit_mode"`
	MQTT      string        `json:"mqtt"` // MQTT311, MQTT5 or MQTT5Deaf
	// IdealS is devices / admit_rate: the broker's admission, flat out.
	IdealS float64 `json:"ideal_s"`
	// BootSpreadS (boot-storm) is the operator's boot spread W: the agents'
	// 10 s, or the ideal if longer.
	BootSpreadS float64 `json:"boot_spread_s,omitempty"`
	// P99AfterReturnS is the recovery's 99th percentile from the broker's
	// return (boot-storm: from power-on); MaxP99S the most it may be.
	P99AfterReturnS float64 `json:"p99_after_return_s"`
	P99AtLeast      bool    `json:"p99_at_least,omitempty"` // run stopped first: p99 is later still
	MaxP99S         float64 `json:"max_p99_s"`
	// AttemptsAfterReturn is the attempts per device from the return
	// (boot-storm: all of them); MaxAttempts the most it may be.
	AttemptsAfterReturn float64 `json:"attempts_after_return"`
	AttemptsAtLeast     bool    `json:"attempts_at_least,omitempty"`
	MaxAttempts         float64 `json:"max_attempts"`
	// BusiestS is the broker's busiest second, refused connects included
	// (a Full grid's).
	BusiestS     float64 `json:"busiest_second,omitempty"`
	Verdict      string  `json:"verdict"`
	AllRecovered bool    `json:"all_recovered"`
	Pass         bool    `json:"pass"`
	Why          string  `json:"why,omitempty"` // what failed
	WallS        float64 `json:"wall_s"`
}

// Grid is a grid's cells, in the order run.
type Grid struct {
	Config struct {
		Outage     float64 `json:"outage_s"`
		MaxBackoff float64 `json:"max_backoff_s"`
		BootSpread float64 `json:"boot_spread_s"`
		Seed       uint64  `json:"seed"`
	} `json:"config"`
	Cells []GridCell `json:"cells"`
	WallS float64    `json:"wall_s"`
}

// Passed reports whether every cell of policy passed.
func (g *Grid) Passed(policy string) bool {
	for _, c := range g.Cells {
		if c.Policy == policy && !c.Pass {
			return false
		}
	}
	return true
}

// RunGrid runs every cell of gc. A cell's run stops once its failure is
// certain (virtual.GiveUp). Failure is certain at too many attempts, made
// or certain to be made. It is also certain at too few devices up to meet
// its p99 even at the broker's full rate. A run stops at the latest once
// it has taken twice as long as it may, so that policies that never
// recover do not hold the grid up.
func RunGrid(ctx context.Context, gc GridConfig) (*Grid, error) {
	if err := gc.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	g := &Grid{}
	g.Config.Outage, g.Config.MaxBackoff, g.Config.Seed = gc.Outage.Seconds(), gc.MaxBackoff.Seconds(), gc.Seed
	g.Config.BootSpread = bootSpread.Seconds() // or the ideal, if longer
	for _, p := range gc.Policies {
		for _, speaks := range gc.MQTT {
			for _, mode := range gc.AdmitModes {
				for _, n := range gc.Devices {
					for _, rate := range gc.AdmitRates {
						for _, sc := range []plan.Scenario{plan.ThrottledRestart, plan.BootStorm} {
							g.Cells = append(g.Cells, GridCell{Policy: p, Scenario: sc, Devices: n, AdmitRate: rate, AdmitMode: mode.String(), MQTT: speaks})
						}
					}
				}
			}
		}
	}
	// The largest cells first, so that two cores finish together.
	order := make([]int, len(g.Cells))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return g.Cells[b].Devices - g.Cells[a].Devices })
	work := make(chan int)
	errs := make([]error, len(g.Cells))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range gc.parallel() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				errs[i] = gc.run(ctx, &g.Cells[i])
				if gc.Progress != nil && errs[i] == nil {
					mu.Lock()
					writeGridLine(gc.Progress, g.Cells[i])
					mu.Unlock()
				}
			}
		}()
	}
	for _, i := range order {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	g.WallS = time.Since(start).Seconds()
	return g, errors.Join(append(errs, ctx.Err())...)
}

// inline says whether each cell builds its report on its own goroutine.
// When the cells running at once already fill the cores, a builder beside
// each would only contend with them.
func (gc GridConfig) inline() bool { return gc.parallel() >= runtime.GOMAXPROCS(0) }

// parallel is how many cells run at once.
func (gc GridConfig) parallel() int { return cmp.Or(gc.Parallel, 2) }

// bootSpread is the agents' own (device.DefaultTiming): the window over
// which a fleet that powers on at once spreads its first connects.
const bootSpread = 10 * time.Second

func (gc GridConfig) validate() error {
	if len(gc.Devices) == 0 || len(gc.AdmitRates) == 0 || len(gc.AdmitModes) == 0 || len(gc.Policies) == 0 || len(gc.MQTT) == 0 {
		return fmt.Errorf("a grid needs devices, admission rates, admission modes, policies and MQTT versions")
	}
	for _, m := range gc.MQTT {
		if m != MQTT311 && m != MQTT5 && m != MQTT5Deaf {
			return fmt.Errorf("MQTT: want %s, %s or %s, got %q", MQTT311, MQTT5, MQTT5Deaf, m)
		}
	}
	for _, n := range gc.Devices {
		if n < 1 {
			return fmt.Errorf("devices must be >= 1, got %d", n)
		}
	}
	for _, r := range gc.AdmitRates {
		if !(r > 0) {
			return fmt.Errorf("admission rates must be > 0, got %g", r)
		}
	}
	for _, p := range gc.Policies {
		if _, err := plan.Shape(p, gc.MaxBackoff); err != nil {
			return err
		}
	}
	if gc.Outage <= 0 {
		return fmt.Errorf("outage must be > 0, got %v", gc.Outage)
	}
	return nil
}

// run runs one cell and judges it.
func (gc GridConfig) run(ctx context.Context, cell *GridCell) error {
	mode, _ := fault.ParseAdmissionMode(cell.AdmitMode)
	p := plan.Default()
	p.Engine, p.Devices, p.Scenario, p.Policy, p.Seed = plan.Virtual, cell.Devices, cell.Scenario, cell.Policy, gc.Seed
	p.Outage, p.MaxBackoff, p.Events = gc.Outage, gc.MaxBackoff, io.Discard
	p.AdmitRate, p.AdmitBurst, p.AdmitMode = cell.AdmitRate, max(1, int(cell.AdmitRate/20)), mode
	p.MQTT5, p.IgnoreServerSignals = cell.MQTT != MQTT311, cell.MQTT == MQTT5Deaf
	capS := gc.MaxBackoff.Seconds()
	cell.IdealS = float64(cell.Devices) / cell.AdmitRate
	from := gc.Outage.Seconds()
	if cell.Scenario == plan.BootStorm {
		from = 0
		p.BootSpread = max(bootSpread, time.Duration(cell.IdealS*float64(time.Second)))
		cell.BootSpreadS = p.BootSpread.Seconds()
		cell.MaxP99S = 1.2*cell.BootSpreadS + 2
		cell.MaxAttempts = 1.5
	} else {
		cell.MaxP99S = 1.2*cell.IdealS + capS
		cell.MaxAttempts = 1.5 * (1 + cell.IdealS/(2*capS))
	}
	p.Bound = time.Duration((from + 2*cell.MaxP99S + capS) * float64(time.Second))
	ninetyNine := int(math.Ceil(0.99 * float64(cell.Devices)))
	giveUp := &virtual.GiveUp{MaxAfterReturn: int64(cell.MaxAttempts * float64(cell.Devices)),
		P99By: time.Duration((from + cell.MaxP99S) * float64(time.Second)), P99Count: ninetyNine}
	if cell.Scenario == plan.BootStorm { // every attempt counts, from power-on
		giveUp.MaxAfterReturn = math.MaxInt64
	}
	if gc.Full {
		giveUp, p.Bound = nil, 0 // the plan's own bound, from the outage, the cap and the admission
	}
	if err := p.Validate(); err != nil {
		return err
	}
	r, err := virtual.Run(ctx, p, virtual.Options{GiveUp: giveUp, Inline: gc.inline(), FleetVerdictOnly: !gc.Full})
	if r == nil {
		return fmt.Errorf("grid cell %s %s %d devices %g/s: %w", cell.Policy, cell.Scenario, cell.Devices, cell.AdmitRate, err)
	}
	if err != nil && !errors.Is(err, report.ErrNotRecovered) {
		return err
	}
	cell.AllRecovered = r.Recovery.AllRecovered
	cell.P99AfterReturnS = r.Recovery.P99S - from
	cell.AttemptsAfterReturn = r.Attempts.AfterReturnPerDeviceMean
	if cell.Scenario == plan.BootStorm {
		cell.AttemptsAfterReturn = r.Attempts.PerDeviceMean
	}
	// ended on the attempts its devices still down were certain to make
	if giveUp != nil && giveUp.Certain > 0 {
		cell.AttemptsAfterReturn = max(cell.AttemptsAfterReturn, float64(giveUp.Certain)/float64(cell.Devices))
	}
	cell.Verdict = string(r.Verdict)
	if r.Broker != nil { // what reached it: not the dials its outage refused
		cell.BusiestS = r.Broker.Arrivals.PeakPerS1s
	}
	cell.WallS = r.Host.WallS
	var why []string
	switch {
	case r.Recovered() < ninetyNine: // the p99 of the whole fleet is later than the run went
		cell.P99AfterReturnS, cell.P99AtLeast = r.WatchedS-from, true
		why = append(why, fmt.Sprintf("%d of %d back within %.0f s", r.Recovered(), cell.Devices, cell.P99AfterReturnS))
	case cell.P99AfterReturnS > cell.MaxP99S:
		got, bound := apart(cell.P99AfterReturnS, cell.MaxP99S, 1)
		why = append(why, fmt.Sprintf("p99 %s s > %s s", got, bound))
	}
	if !cell.AllRecovered && len(why) == 0 {
		why = append(why, fmt.Sprintf("%d of %d back", r.Recovered(), cell.Devices))
	}
	if cell.AttemptsAfterReturn > cell.MaxAttempts {
		got, bound := apart(cell.AttemptsAfterReturn, cell.MaxAttempts, 2)
		why = append(why, fmt.Sprintf("%s attempts > %s", got, bound))
	}
	cell.AttemptsAtLeast = !cell.AllRecovered // the stragglers would have made more
	if cell.Scenario == plan.ThrottledRestart && r.Verdict != "spread" {
		why = append(why, "verdict "+cell.Verdict)
	}
	cell.Pass = len(why) == 0
	cell.Why = strings.Join(why, "; ")
	return nil
}

// apart writes a and b with at least digits decimals, and as many more as
// it takes to tell them apart: "1.552 > 1.550", never "1.55 > 1.55".
func apart(a, b float64, digits int) (string, string) {
	for ; digits < 9 && strconv.FormatFloat(a, 'f', digits, 64) == strconv.FormatFloat(b, 'f', digits, 64); digits++ {
	}
	return strconv.FormatFloat(a, 'f', digits, 64), strconv.FormatFloat(b, 'f', digits, 64)
}

func writeGridLine(w io.Writer, c GridCell) {
	mark := "pass"
	if !c.Pass {
		mark = "FAIL: " + c.Why
	}
	busiest := ""
	if c.BusiestS > 0 {
		busiest = fmt.Sprintf("busiest %7.0f/s  ", c.BusiestS)
	}
	fmt.Fprintf(w, "%-22s %-6s %-17s %9d devices %6.0f/s %-10s p99 %7.1f s (<= %7.1f)  %6.2f attempts (<= %5.2f)  %s%-12s %s\n",
		c.Policy, c.MQTT, c.Scenario, c.Devices, c.AdmitRate, c.AdmitMode, c.P99AfterReturnS, c.MaxP99S,
		c.AttemptsAfterReturn, c.MaxAttempts, busiest, c.Verdict, mark)
}

// Table writes the grid's cells, a line each, grouped by policy.
func (g *Grid) Table(w io.Writer) {
	cells := slices.Clone(g.Cells)
	slices.SortStableFunc(cells, func(a, b GridCell) int { return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.MQTT, b.MQTT)) })
	for _, c := range cells {
		writeGridLine(w, c)
	}
}
