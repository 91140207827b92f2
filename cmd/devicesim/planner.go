package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/chart"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/planner"
	"github.com/herdguard/herdguard/internal/storm"
)

const planModes = `usage: devicesim plan -devices N -admit-rate R [flags]
  which reconnect policy brings N devices back through a broker admitting R connects/s after an
  outage, within -target-p99, the broker's busiest second under -peak-bound? Searched in virtual
  time over seeds and outage lengths, the best confirmed at full scale (docs/plan.md).
  devicesim plan -devices 1000000 -admit-rate 10000 -target-p99 3m
  devicesim plan ... -mix iotcore@32s=0.8    80 % of the fleet runs the formula, 32 s cap, today
  devicesim plan -f STORM.yaml             the file's fleet, admission and outage, its plan: section
writes to -out: answer.json, check.yaml (a storm file that checks it on your broker), policy.go.txt,
and, when a formula a fleet in the field can take meets the bounds, remote-config.json and
deviceagent.flags
exit status: 0 answered; 1 no policy meets the bounds (the closest is shown) or an error
`

// planCmd is devicesim plan.
func planCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devicesim plan", planModes, stderr)
	var q planner.Question
	var o planner.Options
	file := fs.String("f", "", "a storm file: its fleet, admission and first outage, and its plan: section's bounds")
	fs.IntVar(&q.Devices, "devices", 0, "the fleet (required)")
	fs.Float64Var(&q.AdmitRate, "admit-rate", 0, "connects a second the broker admits, all nodes together (required)")
	fs.IntVar(&q.AdmitBurst, "admit-burst", 0, "the admission's burst (0: rate/20)")
	admitMode := fs.String("admit-mode", "refuse", "over the limit the broker refuses (CONNACK 3), pauses or disconnects")
	fs.IntVar(&q.Nodes, "nodes", 0, "the broker's nodes (0: one)")
	fs.DurationVar(&q.Outage, "outage", 0, "the outage to plan for (0: 60s); half and twice it are searched too")
	fs.DurationVar(&q.TargetP99, "target-p99", 0, "99 % of the fleet back within this of the broker's return (0: twice devices/rate, at least 1m)")
	fs.Float64Var(&q.PeakBound, "peak-bound", 0, "the most connects the broker may see in a second, refused ones included (0: none)")
	fs.Float64Var(&q.MaxAttempts, "max-attempts", 0, "the most attempts a device may make from the return, on average (0: none)")
	mix := fs.String("mix", "", "what the fleet runs today: POLICY@CAP=SHARE, such as iotcore@32s=0.8")
	mqtt := fs.String("mqtt", "3.1.1", "the devices' MQTT version: 3.1.1, or 5 (honouring the broker's reason codes)")
	fs.Uint64Var(&q.Seeds, "seeds", 3, "seeds each candidate runs on")
	fs.Uint64Var(&q.Seed, "seed", 1, "the first seed")
	policies := fs.String("policies", "", "search only these policy specs, comma-separated, such as full,fleet-safe (default: every family)")
	caps := fs.String("caps", "", "search only these caps, comma-separated, such as 32s,2m (default: 16s doubling past devices/rate)")
	fs.IntVar(&o.ScreenDevices, "screen-devices", 0, "the fleet candidates are screened on, the broker scaled with it (0: 10,000)")
	checkDevices := fs.Int("check-devices", 2000, "real devices (the wire engine's) check.yaml runs against your broker")
	out := fs.String("out", "devicesim-plan", "directory for the answer and what puts it to use")
	asJSON := fs.Bool("json", false, "print answer.json instead of the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := checkDurationFlags(fs); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var err error
	if o.Candidates, err = candidatesOf(*policies, *caps); err != nil {
		return err
	}
	if *file != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name := range set {
			if !slices.Contains([]string{"f", "out", "json", "check-devices", "screen-devices", "policies", "caps"}, name) {
				return fmt.Errorf("-%s: with -f, the file says it (-out, -json, -check-devices, -screen-devices, -policies and -caps go beside it)", name)
			}
		}
		fq, err := questionOf(*file, getenv)
		if err != nil {
			return err
		}
		return answer(ctx, fq, o, *out, *checkDevices, *asJSON, stdout, stderr)
	}
	mode, err := fault.ParseAdmissionMode(*admitMode)
	if err != nil {
		return fmt.Errorf("-admit-mode: %w", err)
	}
	q.AdmitMode = mode
	switch *mqtt {
	case "3.1.1":
	case "5":
		q.MQTT5 = true
	default:
		return fmt.Errorf("-mqtt: want 3.1.1 or 5, got %q", *mqtt)
	}
	if *mix != "" {
		if q.Current, q.CurrentShare, err = parseMix(*mix); err != nil {
			return err
		}
	}
	return answer(ctx, q, o, *out, *checkDevices, *asJSON, stdout, stderr)
}

// questionOf reads a storm file's question: its fleet, its broker's
// admission and nodes, its first disruption's outage, its seed, and the
// bounds and current policy of its plan: section.
func questionOf(path string, getenv func(string) string) (planner.Question, error) {
	sf, err := storm.ReadFile(path, getenv)
	if err != nil {
		return planner.Question{}, fmt.Errorf("%s: %w", path, err)
	}
	p, _, err := sf.Plan()
	if err != nil {
		return planner.Question{}, fmt.Errorf("%s: %w", path, err)
	}
	if sf.Question == nil {
		return planner.Question{}, fmt.Errorf("%s: no plan: section (docs/plan.md says what it holds)", path)
	}
	sq := sf.Question
	q := planner.Question{Devices: p.Devices, AdmitRate: p.AdmitRate, AdmitBurst: p.AdmitBurst, AdmitMode: p.AdmitMode,
		Nodes: p.Nodes, Outage: p.Outage, MQTT5: p.MQTT5, Seed: p.Seed, TargetP99: sq.TargetP99, PeakBound: sq.PeakBound,
		MaxAttempts: sq.MaxAttempts, Current: sq.Current, CurrentShare: sq.CurrentShare, Seeds: sq.Seeds}
	if q.AdmitRate <= 0 {
		return q, fmt.Errorf("%s: brokers.admission.rate: the planner needs what the broker admits", path)
	}
	return q, nil
}

// answer asks the planner q, prints its answer and writes what puts it to
// use into out.
func answer(ctx context.Context, q planner.Question, o planner.Options, out string, checkDevices int, asJSON bool, stdout, stderr io.Writer) error {
	if err := q.Validate(); err != nil {
		return err
	}
	if f, ok := stderr.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		o.Progress = stderr // a progress line, on a terminal only
	}
	a, planErr := planner.Plan(ctx, q, o)
	if a == nil {
		return planErr
	}
	if planErr == nil {
		if err := writePlan(ctx, a, out, checkDevices, o); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(a); err != nil {
			return err
		}
	} else {
		a.Summary(stdout)
		if planErr == nil {
			fmt.Fprintf(stdout, "\nwritten to %s/; check it on your broker:\n  MQTT_BROKER=tcp://your-broker:1883 devicesim run -f %s\n",
				out, filepath.Join(out, "check.yaml"))
		}
	}
	return planErr
}

// candidatesOf is the search -policies and -caps narrow: nil when both
// are empty (the default search); one of them alone takes the other's
// default.
func candidatesOf(policies, caps string) ([]planner.Candidate, error) {
	if policies == "" && caps == "" {
		return nil, nil
	}
	ps := []string{"iotcore", "full", "equal", "decorrelated", "fleet-safe"}
	if policies != "" {
		ps = splitSpecs(policies)
	}
	cs := []time.Duration{16 * time.Second, 32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second}
	if caps != "" {
		cs = nil
		for _, c := range strings.Split(caps, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(c))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("-caps: %q is not a duration such as 32s", c)
			}
			if err := plan.CheckDuration("-caps", d, plan.MaxWait); err != nil {
				return nil, err
			}
			cs = append(cs, d)
		}
	}
	var out []planner.Candidate
	for _, c := range cs {
		for _, p := range ps {
			out = append(out, planner.Candidate{Policy: strings.TrimSpace(p), MaxBackoff: c})
		}
	}
	return out, nil
}

// splitSpecs splits a comma-separated list of policy specs, whose own
// parameters are comma-separated too: "full,iotcore:base=2s,jitter=4s"
// is full and iotcore:base=2s,jitter=4s.
func splitSpecs(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if len(out) > 0 && !strings.Contains(part, ":") && strings.Contains(part, "=") {
			out[len(out)-1] += "," + part
			continue
		}
		out = append(out, part)
	}
	return out
}

// parseMix reads POLICY@CAP=SHARE.
func parseMix(s string) (string, float64, error) {
	policy, share, ok := strings.Cut(s, "=")
	if !ok {
		return policy, 1, nil
	}
	v, err := strconv.ParseFloat(share, 64)
	if err != nil || v < 0 || v > 1 {
		return "", 0, fmt.Errorf("-mix %q: the share after = must be within 0 and 1", s)
	}
	return policy, v, nil
}

// writePlan writes the answer and what puts it to use into dir.
func writePlan(ctx context.Context, a *planner.Answer, dir string, checkDevices int, o planner.Options) error {
	o.Progress = nil
	check, err := a.NewCheck(ctx, checkDevices, o)
	if err != nil {
		return err
	}
	answer, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	rec := a.Recommendation.Candidate
	snippet, err := planner.GoSnippet(rec)
	if err != nil {
		return err
	}
	frontier, err := chart.FrontierSVG(a.FrontierChart())
	if err != nil {
		return err
	}
	files := map[string]string{"answer.json": string(answer) + "\n", "check.yaml": check.StormFile(), "policy.go.txt": snippet,
		"frontier.svg": string(frontier)}
	// A fleet in the field takes the best formula, if the recommendation
	// is not one.
	formula := rec
	if a.Field != nil && a.Field.Pass() {
		formula = a.Field.Candidate
	}
	if doc, err := planner.RemoteConfig(formula); err == nil {
		files["remote-config.json"] = string(doc) + "\n"
	}
	if flags, err := planner.AgentFlags(formula); err == nil {
		files["deviceagent.flags"] = flags + "\n"
	}
	for name, text := range files {
		if err := datadir.WriteFileIn(dir, name, []byte(text)); err != nil {
			return err
		}
	}
	return nil
}
