package policyfit_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdguard/herdguard/internal/policyfit"
	"github.com/herdguard/herdguard/internal/stormstatstest"
	"github.com/herdguard/herdguard/reconnect"
)

var (
	accuracySeeds = flag.Int("policyfit.seeds", 0, "seeds per accuracy cell (0: 20, or 1 under the race detector)")
	accuracyTable = flag.String("policyfit.table", "", "write the accuracy tables as markdown to this file (relative to the package)")
)

// seeds is how many seeds an accuracy cell runs: 20 (about 40 s for both
// tests on two idle cores), or 1 under the race detector (which looks
// for races, not error rates; make stats runs the statistics without it),
// or what -policyfit.seeds says: ACCURACY.md's are 100.
func seeds() int {
	switch {
	case *accuracySeeds > 0:
		return *accuracySeeds
	case stormstatstest.RaceDetector:
		return 1
	}
	return 20
}

// cell is one row of the accuracy tables: a fleet on one policy (or on
// two, share of it on the second), its size, the outage, and the Options
// Infer reads it with.
type cell struct {
	truths  []truth
	share   int // percent
	devices int
	outage  time.Duration
	fleet   func(seed uint64) ([]policyfit.Device, error)
	options policyfit.Options
}

func (c cell) name() string {
	names := make([]string, len(c.truths))
	for i, t := range c.truths {
		names[i] = t.name
	}
	if len(c.truths) == 2 {
		names[1] += fmt.Sprintf(" (%d %%)", c.share)
	}
	return strings.Join(names, " + ")
}

// synthCell is c's fleets drawn from the shapes themselves, through the
// internet's noise; a mixed cell's devices are "a-<i>" and "b-<i>", half
// on each.
func synthCell(devices int, outage time.Duration, truths ...truth) cell {
	return netCell(internet, 50, devices, outage, truths...)
}

// netCell is a cell through nw, share percent of a mixed one on the second.
func netCell(nw network, share, devices int, outage time.Duration, truths ...truth) cell {
	c := cell{truths: truths, share: share, devices: devices, outage: outage}
	c.fleet = func(seed uint64) ([]policyfit.Device, error) {
		if len(truths) == 1 {
			return synth(truths[0], devices, outage, nw, seed, "dev-"), nil
		}
		b := devices * share / 100
		return append(synth(truths[0], devices-b, outage, nw, seed, "a-"),
			synth(truths[1], b, outage, nw, seed+1<<40, "b-")...), nil
	}
	return c
}

// verdict is what one run said against the truth.
type verdict int

const (
	right verdict = iota
	cannotTell
	wrong
)

// tally is a cell's verdicts over its seeds.
type tally struct {
	cell
	runs, right, cannot, wrong int
	baseErrs                   []float64
	capReached, capRight       int
	placed, misplaced, leftOut int
	example                    string
}

// judge is r's verdict on a fleet of c.truths: wrong when a group that
// names a family names another than its members' (the majority's), or
// holds more than a tenth of another policy's devices, or a single
// policy is split into named groups; right when every policy is named by
// a group of its own (a policy outside the families by none); cannot tell
// otherwise.
func (t *tally) judge(r policyfit.Inference) verdict {
	truthOf := func(id string) int {
		if len(t.truths) == 2 && strings.HasPrefix(id, "b-") {
			return 1
		}
		return 0
	}
	named, seen := 0, map[int]bool{}
	var placed, misplaced int
	var fits []policyfit.Fit
	for _, g := range r.Groups {
		if g.Fit.Err != nil {
			continue
		}
		votes := make([]int, len(t.truths))
		for _, id := range g.IDs {
			votes[truthOf(id)]++
		}
		major := 0
		if len(votes) == 2 && votes[1] > votes[0] {
			major = 1
		}
		switch other := len(g.IDs) - votes[major]; {
		case g.Fit.Family != t.truths[major].family: // a foreign policy's family is "": any name is wrong
			t.example = fmt.Sprintf("%s named %s (%d devices)", t.truths[major].name, g.Fit.Family, len(g.IDs))
			return wrong
		case other*10 > len(g.IDs):
			t.example = fmt.Sprintf("%s named for %d devices, %d of them on the other policy", g.Fit.Family, len(g.IDs), other)
			return wrong
		}
		named++
		seen[major] = true
		placed, misplaced, fits = placed+len(g.IDs), misplaced+len(g.IDs)-votes[major], append(fits, g.Fit)
	}
	t.leftOut += len(r.Unsure)
	switch {
	case len(t.truths) == 1 && len(r.Groups) > 1 && named > 0:
		t.example = fmt.Sprintf("one policy split into %d groups", len(r.Groups))
		return wrong
	case named == len(t.truths) && len(seen) == named:
		t.placed, t.misplaced = t.placed+placed, t.misplaced+misplaced
		if len(t.truths) == 1 {
			t.paramErrors(fits[0])
		}
		return right
	case t.truths[0].family == "" && named == 0:
		return right // a policy outside the families is right to be told so
	}
	return cannotTell
}

// paramErrors notes a right fit's base error, and whether it told the cap
// where the storm reached it.
func (t *tally) paramErrors(f policyfit.Fit) {
	tr := t.truths[0]
	if tr.base > 0 {
		t.baseErrs = append(t.baseErrs, math.Abs(f.Base.Seconds()/tr.base.Seconds()-1))
	}
	if tr.family == policyfit.Constant || tr.family == policyfit.NoBackoff || !tr.reachesCap(t.outage) {
		return
	}
	t.capReached++
	variant := true // IoTCore's: jitter above the cap or not
	if s, ok := tr.shape.(reconnect.IoTCore); ok {
		variant = f.JitterAtCap == s.JitterAtCap
	}
	if f.Cap > 0 && math.Abs(f.Cap.Seconds()/tr.cap.Seconds()-1) <= 0.1 && variant {
		t.capRight++
	}
}

// reachesCap reports whether a device drawing median jitter waits its
// whole first capped wait before the outage ends.
func (tr truth) reachesCap(outage time.Duration) bool {
	if tr.shape == nil || tr.cap == 0 {
		return false
	}
	var t, prev time.Duration
	for n := range 64 {
		top := tr.shape.Delay(n, prev, 1-1e-9)
		w := tr.shape.Delay(n, prev, 0.5)
		if t += w; top >= tr.cap*99/100 {
			return t < outage
		}
		prev = w
	}
	return false
}

// measure runs every cell at n seeds, on all cores.
func measure(cells []cell, n int) []*tally {
	out := make([]*tally, len(cells))
	type job struct{ cell, seed int }
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range jobs {
				var r policyfit.Inference
				devices, err := cells[j.cell].fleet(uint64(j.seed))
				if err == nil {
					r, err = policyfit.Infer(devices, cells[j.cell].options)
				}
				mu.Lock()
				t := out[j.cell]
				switch v := t.judge(r); {
				case err != nil:
					t.wrong++
					t.example = err.Error()
				case v == right:
					t.right++
				case v == wrong:
					t.wrong++
				default:
					t.cannot++
				}
				t.runs++
				mu.Unlock()
			}
		})
	}
	for i, c := range cells {
		out[i] = &tally{cell: c}
	}
	for seed := 1; seed <= n; seed++ {
		for i := range cells {
			jobs <- job{i, seed}
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

// synthCells are the policies of the field and ours, one policy a fleet,
// at 50 and 500 devices, through outages of 10 s, 1 min and 5 min (and
// 500 through 3 s, where most devices retry once: a short storm must not
// make a confident answer); and fleets half on one policy, half on another.
func synthCells() []cell {
	var cells []cell
	for _, tr := range allTruths {
		for _, o := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute} {
			cells = append(cells, synthCell(50, o, tr))
		}
		for _, o := range []time.Duration{3 * time.Second, 10 * time.Second, time.Minute, 5 * time.Minute} {
			cells = append(cells, synthCell(500, o, tr))
		}
	}
	for _, tr := range foreignTruths {
		for _, o := range []time.Duration{time.Minute, 5 * time.Minute} {
			cells = append(cells, synthCell(500, o, tr))
		}
	}
	for _, pair := range [][2]truth{{pahoGo, full}, {mqttJS, decorrelated}, {iotCore, fleetSafe}, {equal, full}} {
		for _, o := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute} {
			cells = append(cells, synthCell(200, o, pair[0], pair[1]))
		}
	}
	// a policy on too few devices to split off: told apart, or left out
	for _, pair := range [][2]truth{{pahoGo, full}, {full, pahoGo}, {iotCore, fleetSafe}} {
		for _, share := range []int{5, 10} {
			cells = append(cells, netCell(internet, share, 400, time.Minute, pair[0], pair[1]))
		}
	}
	return cells
}

// cellular is a mobile network's: a notice of up to 200 ms, one-way
// latencies of 25 to 300 ms, stamps up to 10 ms late.
var cellular = network{notice: 200 * time.Millisecond, latencyMin: 25 * time.Millisecond, latencyMax: 300 * time.Millisecond,
	noise: 10 * time.Millisecond}

// cellularCells are every policy through a cellular network, 1 min.
func cellularCells() []cell {
	var cells []cell
	for _, tr := range allTruths {
		cells = append(cells, netCell(cellular, 0, 200, time.Minute, tr))
	}
	return cells
}

// lan is devicesim proxy's own host, or a LAN: a refused attempt's round
// trip is under a ms, so nothing hides how late a client's timer fires.
var lan = network{notice: 30 * time.Millisecond, latencyMax: time.Millisecond, noise: time.Millisecond}

// lanCells are constant waits drawn late or jittered by a few %, 200
// devices on a LAN, read as devicesim proxy reads them: with a notice
// window of 1 s, which leaves the first wait free to be half of 1 s.
func lanCells() []cell {
	var cells []cell
	for _, tr := range []truth{mqttJS, mqttJSLoop, constantJitter} {
		for _, o := range []time.Duration{10 * time.Second, 20 * time.Second, time.Minute} {
			c := netCell(lan, 0, 200, o, tr)
			c.options = policyfit.Options{NoticeWindow: time.Second}
			cells = append(cells, c)
		}
	}
	return cells
}

// The measured error rates of Infer on synthetic fleets: every policy of
// the field and ours, 50 and 500 devices, outages of 10 s to 5 min, two
// policies outside the families, and four fleets of two policies; every
// policy on a cellular network; constants on a LAN. Each cell over
// seeds() seeds (checkTallies says what they must meet).
func TestInferenceAccuracyOnSyntheticFleets(t *testing.T) {
	cells := synthCells()
	if stormstatstest.RaceDetector && *accuracySeeds == 0 {
		cells = slices.DeleteFunc(cells, func(c cell) bool { return c.devices > 50 || c.outage > time.Minute })
	}
	tallies := measure(cells, seeds())
	checkTallies(t, tallies, true)
	writeTable(t, "synthetic", tallies)
	if stormstatstest.RaceDetector && *accuracySeeds == 0 {
		return
	}
	tallies = measure(cellularCells(), seeds())
	checkTallies(t, tallies, true)
	writeTable(t, "cellular", tallies)
	tallies = measure(lanCells(), seeds())
	checkTallies(t, tallies, true)
	writeTable(t, "lan", tallies)
}

// checkTallies holds every cell to at most one wrong run in 50 (and one
// at fewer seeds), all cells together to 0.5 % of their runs, and, if
// named, every single-policy fleet through an outage of 1 min or more to
// being named in 80 % of its runs.
func checkTallies(t *testing.T, tallies []*tally, named bool) {
	t.Helper()
	runs, wrongs := 0, 0
	for _, c := range tallies {
		runs, wrongs = runs+c.runs, wrongs+c.wrong
		if float64(c.wrong) > max(1, 0.02*float64(c.runs)) {
			t.Errorf("%s: wrong in %d of %d seeds, e.g. %s", c.name(), c.wrong, c.runs, c.example)
		}
		if named && len(c.truths) == 1 && c.truths[0].family != "" && c.outage >= time.Minute && float64(c.right) < 0.8*float64(c.runs) {
			t.Errorf("%s: named in %d of %d seeds (cannot tell %d)", c.name(), c.right, c.runs, c.cannot)
		}
	}
	if float64(wrongs) > 0.005*float64(runs) {
		t.Errorf("wrong in %d of %d runs", wrongs, runs)
	}
}

// tables collects both tests' tables for -policyfit.table.
var (
	tablesMu sync.Mutex
	tables   = map[string]string{}
)

func writeTable(t *testing.T, source string, tallies []*tally) {
	t.Helper()
	if *accuracyTable == "" {
		return
	}
	tablesMu.Lock()
	defer tablesMu.Unlock()
	tables[source] = markdown(tallies)
	if err := os.WriteFile(*accuracyTable, []byte(accuracyDoc()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// markdown is a table of tallies: a row a cell.
func markdown(tallies []*tally) string {
	var b strings.Builder
	b.WriteString("| policy | devices | outage | named right | cannot tell | wrong | base error, median (90th pct) | cap told | in no group |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	pct := func(n, of int) string { return fmt.Sprintf("%.0f %%", 100*float64(n)/float64(max(of, 1))) }
	for _, c := range tallies {
		base := "—"
		if len(c.baseErrs) > 0 {
			s := slices.Sorted(slices.Values(c.baseErrs))
			base = fmt.Sprintf("%.1f %% (%.1f %%)", 100*s[len(s)/2], 100*s[len(s)*9/10])
		}
		capTold := "—"
		if c.capReached > 0 {
			capTold = pct(c.capRight, c.capReached)
		}
		if len(c.truths) == 2 && c.placed > 0 {
			base = fmt.Sprintf("misplaced %.1f %%", 100*float64(c.misplaced)/float64(c.placed))
		}
		outage := strings.NewReplacer("m0s", " min", "s", " s").Replace(c.outage.String())
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %.1f %% |\n", c.name(), c.devices, outage,
			pct(c.right, c.runs), pct(c.cannot, c.runs), pct(c.wrong, c.runs), base, capTold,
			100*float64(c.leftOut)/float64(max(c.runs*c.devices, 1)))
	}
	return b.String()
}

func accuracyDoc() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# How often internal/policyfit names the right policy\n\n")
	fmt.Fprintf(&b, "Measured %s with\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "    go test -count=1 -timeout 1h -run 'TestInferenceAccuracy' ./internal/policyfit/ \\\n")
	fmt.Fprintf(&b, "      -args -policyfit.seeds %d -policyfit.table ACCURACY.md\n\n", seeds())
	for _, source := range []string{"synthetic", "cellular", "lan", "virtual", "agents"} {
		if tab, ok := tables[source]; ok {
			b.WriteString(tableIntro[source])
			b.WriteString(tab)
			b.WriteString("\n")
		}
	}
	b.WriteString(tableNotes)
	return b.String()
}

var tableIntro = map[string]string{
	"synthetic": "## Synthetic fleets\n\n" +
		"Each device draws its waits from `reconnect.Shape.Delay` with its own seeded source. It notices the loss\n" +
		"within U[0, 50 ms), has a one-way latency of U[5, 100 ms) of its own (a refused attempt costs twice\n" +
		"that before its timer starts), and each arrival is stamped up to 3 ms late. paho Go's first attempt is\n" +
		"immediate on 90 % of devices. Every attempt from the outage's end on is admitted. Mixed fleets are half\n" +
		"on each policy but where the second's share is given; \"misplaced\" is the share of the named groups'\n" +
		"members that run the other one, \"in no group\" the share of devices in Inference.Unsure. The two policies\n" +
		"outside the families (a +-50 % jitter, a fixed table of waits) are named right when no group names one.\n\n",
	"cellular": "## Synthetic fleets on a cellular network\n\n" +
		"As above, but a device notices the loss within U[0, 200 ms), has a one-way latency of U[25, 300 ms) (round\n" +
		"trips of 50 to 600 ms), and each arrival is stamped up to 10 ms late. Options are the defaults.\n\n",
	"lan": "## Constants on a LAN\n\n" +
		"As the synthetic fleets, but a refused attempt's round trip is under a ms (a device's one-way latency is\n" +
		"U[0, 1 ms)), a device notices the loss within U[0, 30 ms), each arrival is stamped up to 1 ms late, and\n" +
		"Infer is given a notice window of 1 s, as devicesim proxy gives it where 300 ms names no policy (MQTT.js's\n" +
		"fleets). \"Late\" is MQTT.js 5's\n" +
		"setInterval with hundreds of clients in one event loop: while the storm's first 8 rounds crowd the\n" +
		"loop, a device's timer keeps the lateness it drew first, U[0, 40 ms); then it is late by U[0, 5 ms)\n" +
		"(as 200 MQTT.js clients were through devicesim proxy). \"+-2.5 %\" is a uniform jitter.\n\n",
	"virtual": "## The virtual engine\n\n" +
		"`internal/virtual` runs each device's own state machine (`device.Machine`) against a broker restarted\n" +
		"for the outage: exact times, no network. The firmware's flood guard is lifted (`guard=600`) so that\n" +
		"the policy alone sets the waits.\n\n",
	"agents": "## The firmware's agents through devicesim proxy\n\n" +
		"100 of the firmware's own agents (`device.Agent`: paho's client, the reconnect core, each its own seeded\n" +
		"jitter) connect through devicesim proxy's storm (`internal/proxystorm`, with -identify) to the in-process\n" +
		"broker, all in one synctest bubble: the proxy waits for every session, refuses as a down broker for the\n" +
		"outage, and infers the policy from the attempts it saw, as the command does (a notice window of 300 ms,\n" +
		"1 s where that names no policy). The flood guard is lifted (`guard=600`).\n\n",
}

const tableNotes = `"Named right": one group (one a policy in a mixed fleet), and the family is the truth. "Cannot tell":
a Fit.Err (too few retries, families within the margin, no family fits). "Wrong": a group that names a
family other than its members' (the majority's), or whose members are more than a tenth on another
policy, or a single policy split into named groups. Base error is |Base / truth - 1| over the seeds
named right: a constant's and a linear's base is seen with the refused attempt's round trip on it (105 ms
on average here, 325 ms on the cellular network), which the proxy cannot tell from the wait.
"Cap told": of the seeds named right where a device drawing median jitter waits out its first capped wait
before the outage ends, the share whose Cap is within 10 % of the truth (and, for IoT Core, whose
JitterAtCap is).
`
