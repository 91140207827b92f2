package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/experiment"
)

func gridCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "-mix" || strings.HasPrefix(a, "-mix=") || a == "--mix" || strings.HasPrefix(a, "--mix=") {
			return mixCmd(ctx, args, stdout, stderr)
		}
	}
	gc := experiment.DefaultGrid()
	fs := newFlagSet("devicesim grid", gridModes, stderr)
	fs.String("mix", "", "the rollout question: the policy a growing share of the fleet moves to (grid -mix P -h: its flags)")
	devices := fs.String("devices", joinInts(gc.Devices), "comma-separated fleet sizes")
	rates := fs.String("admit-rates", "500,5000,50000", "comma-separated admission rates, connects per second (bursts of rate/20)")
	modes := fs.String("admit-mode", "refuse", "comma-separated: refuse (CONNACK 3), pause (stop accepting), disconnect (accept, then drop)")
	policies := fs.String("policies", strings.Join(gc.Policies, ","), "comma-separated policies")
	mqtt := fs.String("mqtt", experiment.MQTT311, "comma-separated: 3.1.1, 5 (honouring reason codes), 5-deaf (ignoring them)")
	fs.DurationVar(&gc.Outage, "outage", gc.Outage, "the broker's outage before it admits")
	fs.DurationVar(&gc.MaxBackoff, "max-backoff", gc.MaxBackoff, "every policy's cap")
	fs.Uint64Var(&gc.Seed, "seed", gc.Seed, "seed for every device's jitter")
	fs.BoolVar(&gc.Full, "full", false, "run every cell to its end and read the broker's busiest second (slower)")
	out := fs.String("out", "devicesim-report/grid", "directory for grid.json and grid.html")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := checkDurationFlags(fs); err != nil {
		return err
	}
	var err error
	if gc.Devices, err = parseInts(*devices); err != nil {
		return fmt.Errorf("-devices: %w", err)
	}
	if gc.AdmitRates, err = parseFloats(*rates); err != nil {
		return fmt.Errorf("-admit-rates: %w", err)
	}
	gc.AdmitModes = nil
	for _, m := range strings.Split(*modes, ",") {
		mode, err := fault.ParseAdmissionMode(strings.TrimSpace(m))
		if err != nil {
			return fmt.Errorf("-admit-mode: %w", err)
		}
		gc.AdmitModes = append(gc.AdmitModes, mode)
	}
	gc.Policies = splitSpecs(*policies)
	gc.MQTT = nil
	for _, m := range strings.Split(*mqtt, ",") {
		gc.MQTT = append(gc.MQTT, strings.TrimSpace(m))
	}
	gc.Progress = stdout
	g, err := experiment.RunGrid(ctx, gc)
	if g == nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d cells in %.0f s\n", len(g.Cells), g.WallS)
	for _, p := range gc.Policies {
		fmt.Fprintf(stdout, "%-22s %s\n", p, map[bool]string{true: "passes every cell", false: "fails"}[g.Passed(p)])
	}
	if werr := writeGrid(g, *out); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Fprintf(stdout, "grid: %s/grid.html (grid.json beside it)\n", *out)
	return err
}

// mixCmd is grid -mix: the rollout question. It asks how much of the fleet
// must move to a new policy before the broker's peak stays under a bound
// and the fleet comes back spread out.
func mixCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	mc := experiment.DefaultMix()
	fs := newFlagSet("devicesim grid -mix", mixModes, stderr)
	// No default printed: the command line that reaches here names it.
	fs.StringVar(&mc.To, "mix", "", "the policy a growing share of the fleet moves to")
	fs.StringVar(&mc.From, "from", mc.From, "the policy the fleet runs today")
	fs.IntVar(&mc.Storm.Devices, "devices", mc.Storm.Devices, "the fleet's devices")
	fs.Float64Var(&mc.Storm.AdmitRate, "admit-rate", mc.Storm.AdmitRate, "connects a second the broker admits when it returns (bursts of rate/20), refusing the rest")
	fs.DurationVar(&mc.Storm.Outage, "outage", mc.Storm.Outage, "the broker's outage")
	fs.Float64Var(&mc.PeakBound, "peak-bound", mc.PeakBound, "the most connects the broker may see in its busiest second")
	shares := fs.String("shares", "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", "comma-separated shares of the fleet on -mix")
	fs.Uint64Var(&mc.Storm.Seed, "seed", mc.Storm.Seed, "seed for every device's jitter")
	out := fs.String("out", "devicesim-report/mix", "directory for mix.json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := checkDurationFlags(fs); err != nil {
		return err
	}
	var err error
	if mc.Shares, err = parseFloats(*shares); err != nil {
		return fmt.Errorf("-shares: %w", err)
	}
	mc.Storm.AdmitBurst = max(1, int(mc.Storm.AdmitRate/20))
	// The table once: its header now, its rows as the shares are run, and
	// its last line, the answer, at the end.
	head := experiment.Mix{From: mc.From, To: mc.To, Devices: mc.Storm.Devices, AdmitRate: mc.Storm.WithDefaults().AdmitRate,
		PeakBound: mc.PeakBound}
	var table strings.Builder
	head.Table(&table)
	header, _ := lastLine(table.String())
	mc.Progress = &headed{w: stdout, header: header}
	m, err := experiment.RunMix(ctx, mc)
	if m == nil {
		return err
	}
	table.Reset()
	m.Table(&table)
	_, answer := lastLine(table.String())
	fmt.Fprint(stdout, answer)
	b, jerr := json.MarshalIndent(m, "", "  ")
	if jerr == nil {
		jerr = datadir.WriteFileIn(*out, "mix.json", b)
	}
	return errors.Join(err, jerr)
}

// headed writes its header before the first write, so that a run refused
// before its first row prints none.
type headed struct {
	w      io.Writer
	header string
}

func (h *headed) Write(b []byte) (int, error) {
	if h.header != "" {
		if _, err := io.WriteString(h.w, h.header); err != nil {
			return 0, err
		}
		h.header = ""
	}
	return h.w.Write(b)
}

// lastLine splits text at its last line.
func lastLine(text string) (before, last string) {
	i := strings.LastIndexByte(strings.TrimSuffix(text, "\n"), '\n')
	return text[:i+1], text[i+1:]
}

func writeGrid(g *experiment.Grid, dir string) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	if err := datadir.WriteFileIn(dir, "grid.json", b); err != nil {
		return err
	}
	return datadir.WriteSharedIn(dir, "grid.html", g.WriteHTML)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}
