package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/agents/children"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/livemetrics"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/storm"
)

const usage = `devicesim launches a fleet of real device agents against an in-process
broker (or an external one), disrupts it, and reports whether the fleet came
back spread out or in waves.

Commands:
  devicesim run [flags]      run a scenario (no flags: the embedded default)
  devicesim run -f STORM.yaml
                             run a storm file; exit 1 if an expectation fails
  devicesim merge -out DIR SHARD_DIR...
                             combine shard reports into one
  devicesim deploy -f STORM.yaml -image IMAGE -out DIR
                             the storm's shards as a Kubernetes Indexed Job
  devicesim proxy -broker HOST:PORT [-await-sessions N | -control ADDR] [flags]
                             the fault proxy between anyone's fleet and its broker:
                             strike it, watch it come back, report it
  devicesim judge [-json] [-expect spread|waves|inconclusive] [-format NAME] FILE|-
                             judge a broker's log (mosquitto, RabbitMQ, EMQX, HiveMQ,
                             VerneMQ, AWS IoT, Azure IoT Hub, -pattern): spread out,
                             or in waves?
  devicesim soak [flags]     one fleet with telemetry through storm after storm:
                             memory, goroutines and messages must all come back
  devicesim calibrate [flags]
                             the same runs on both engines: do they agree?
  devicesim grid [flags]     every policy against fleets of 1,000 to a million and
                             brokers admitting 500 to 50,000 connects/s (virtual time)
  devicesim plan -devices N -admit-rate R [flags]
                             which policy brings the fleet back within your target,
                             the broker under its bound? (virtual time)
  devicesim delays [flags]   print a policy's delays as CSV (attempt,delay_ms)
  devicesim help [command]   show help

Before any command, -cpuprofile FILE writes a CPU profile of it to FILE.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	args, stopProfile, err := cpuProfiled(args)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "merge":
		return mergeCmd(args[1:], stdout, stderr)
	case "deploy":
		return deployCmd(args[1:], stdout, stderr)
	case "proxy":
		return proxyCmd(ctx, args[1:], getenv, stdout, stderr)
	case "judge":
		return judgeCmd(args[1:], stdin, stdout, stderr)
	case "soak":
		return soakCmd(ctx, args[1:], stdout, stderr)
	case "calibrate":
		return calibrateCmd(ctx, args[1:], stdout, stderr)
	case "grid":
		return gridCmd(ctx, args[1:], stdout, stderr)
	case "plan":
		return planCmd(ctx, args[1:], getenv, stdout, stderr)
	case "delays":
		return delaysCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 {
			return run(ctx, []string{args[1], "-h"}, getenv, stdin, stdout, stdout)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// runFlags is devicesim run's command line.
type runFlags struct {
	p                                                  plan.Plan
	retryCap, shards                                   *int
	shard, child, admitMode, compare, out, metricsAddr *string
	events, file                                       *string
	streamEvents, merge                                *bool
	expect                                             expectFlag
	set                                                map[string]bool // the flags given
	// storm is the storm file (-f), whose expectations every run is held to.
	storm *storm.File
}

// parseRunFlags reads args; a nil runFlags and nil error is -h.
func parseRunFlags(args []string, stderr io.Writer) (*runFlags, error) {
	f := &runFlags{p: plan.Default(), set: map[string]bool{}}
	fs := newFlagSet("devicesim run", runModes, stderr)
	f.file = fs.String("f", "", "run the storm file (YAML; docs/storm.md): the fleet, the broker, the disruption and what the run must show; exit 1 if an expectation fails")
	fs.TextVar(&f.p.Engine, "engine", f.p.Engine, "agents (real agents and broker, real time) or virtual (the model, virtual time)")
	fs.IntVar(&f.p.Devices, "devices", f.p.Devices, "number of devices")
	fs.TextVar(&f.p.Scenario, "scenario", f.p.Scenario, "one of "+scenarioNames())
	// No default printed: without -policy the run compares -compare's.
	fs.Func("policy", "the reconnect `POLICY`: "+strings.Join(plan.PolicyNames(), ", ")+
		"; or a spec, a family with its base and the iotcore formulas' jitter (iotcore:base=2s,jitter=4s) or the flood guard's "+
		"connects a minute (full:guard=4) (unset: each of -compare's)", func(v string) error { f.p.Policy = v; return nil })
	fs.DurationVar(&f.p.MaxBackoff, "max-backoff", f.p.MaxBackoff, "the policy's cap (unscaled)")
	f.retryCap = fs.Int("retry-cap", -1, "retries before a device gives up; -1 retries forever")
	fs.DurationVar(&f.p.Outage, "outage", f.p.Outage, "how long the disruption lasts (unscaled)")
	fs.DurationVar(&f.p.Flap, "flap", f.p.Flap, "flapping: how long each session lasts before the broker drops it (unscaled)")
	fs.DurationVar(&f.p.Latency, "latency", f.p.Latency, "latency: added to every byte each way (unscaled)")
	fs.DurationVar(&f.p.LatencyJitter, "latency-jitter", f.p.LatencyJitter, "latency: up to this much more, at random, keeping each direction in order (unscaled)")
	fs.DurationVar(&f.p.KeepAlive, "keepalive", f.p.KeepAlive, "the agents' MQTT keepalive (unscaled; whole seconds once scaled, at least 2 s)")
	fs.DurationVar(&f.p.PingTimeout, "ping-timeout", f.p.PingTimeout, "how long an agent waits for a PINGRESP before it calls the connection dead (unscaled)")
	fs.DurationVar(&f.p.RetryAfter, "retry-after", f.p.RetryAfter, "config-outage: the Retry-After the config server sends (0: the time left in the fault)")
	fs.DurationVar(&f.p.RetryAfterJitter, "retry-after-jitter", f.p.RetryAfterJitter, "config-outage: the jitter devices add to a Retry-After, at most (0: the firmware's; < 0: none)")
	fs.TextVar(&f.p.Transport, "transport", f.p.Transport, "in-process broker transport: mem, tcp or tls (mutual TLS)")
	fs.StringVar(&f.p.Broker, "broker", "", "your broker's URL, through the fault proxy; several, comma-separated: a cluster's nodes")
	fs.StringVar(&f.p.TLSCA, "ca", "", "-broker ssl://: PEM file of the CA that signs the broker (empty: the system's)")
	fs.StringVar(&f.p.TLSCert, "cert", "", "-broker ssl://: PEM client certificate every device presents (mutual TLS)")
	fs.StringVar(&f.p.TLSKey, "key", "", "-broker ssl://: PEM key of -cert")
	fs.StringVar(&f.p.TLSCAKey, "ca-key", "", "-broker ssl://: PEM key of -ca, to issue each device its own certificate")
	fs.DurationVar(&f.p.Duration, "duration", f.p.Duration, "observe: how long to wait for a disruption")
	fs.IntVar(&f.p.Nodes, "nodes", 0, "the in-process broker as a cluster of this many nodes (0: one broker)")
	fs.DurationVar(&f.p.Gap, "gap", time.Minute, "rolling-restart, rolling-drain: from one node's restart to the next (unscaled)")
	f.shard = fs.String("shard", "", "run slice i of n of the fleet's device IDs (i/n; needs -broker)")
	f.shards = fs.Int("shards", 0, "run slice JOB_COMPLETION_INDEX of this many (a Kubernetes Indexed Job)")
	fs.TextVar(&f.p.DisruptAt, "disrupt-at", f.p.DisruptAt, "strike the first disruption at this instant (RFC 3339), or +D after every shard is ready: every shard at once")
	fs.StringVar(&f.p.ReadyDir, "ready-dir", "", "shards: the directory on a shared volume where they meet before -disrupt-at (default for +D: ready beside the shard reports)")
	fs.DurationVar(&f.p.ReadyWait, "ready-wait", plan.DefaultReadyWait, "shards: how long each waits in -ready-dir for the others")
	f.merge = fs.Bool("merge", false, "shards: shard 0 waits for every shard's report beside its own and merges them into merged/ there")
	fs.IntVar(&f.p.TCPPerProcess, "tcp-per-process", 0, "TCP devices this process holds before child processes take the rest (0: what descriptors allow)")
	f.child = fs.String("child", "", "internal: run as a child of another devicesim: the plan from this file (which the parent wrote), the disruption's time on stdin")
	f.streamEvents = fs.Bool("stream-events", false, "internal, with -child: stream every device record to descriptor 3")
	fs.DurationVar(&f.p.BootSpread, "boot-spread", 0, "window the devices first connect within (unscaled; 0: 10 s in boot-storm)")
	fs.Float64Var(&f.p.Telemetry, "telemetry", 0, "each device publishes this many QoS 1 messages per (unscaled) second through a store-and-forward queue")
	// No default printed: unset, the host picks the scale, the plan's only its ceiling.
	fs.Func("time-scale", fmt.Sprintf("run every duration `N` times faster; reports stay unscaled (unset: what the host serves, "+
		"at most %gx; %gx for a shard or -disrupt-at; 1x for observe, config-outage and paho-default)", f.p.TimeScale, f.p.TimeScale),
		number(&f.p.TimeScale))
	fs.Float64Var(&f.p.Connects, "host-connects", 0, "connects a second this host serves real agents (0: 5,000; make scale measures it)")
	fs.Uint64Var(&f.p.Seed, "seed", f.p.Seed, "seed for every device's jitter (the same seed gives the same draws)")
	fs.Float64Var(&f.p.AdmitRate, "admit-rate", 0, "broker admits this many connects per (unscaled) second; 0: no limit (throttled-restart: 100)")
	fs.IntVar(&f.p.AdmitBurst, "admit-burst", 1, "admission burst")
	f.admitMode = fs.String("admit-mode", "refuse", "over the limit: refuse (CONNACK 3; MQTT 5: -admit-code), pause (stop accepting) or disconnect (accept, then drop)")
	fs.Func("mqtt", "the devices' MQTT version: 3.1.1 or 5 (reason codes and Server References heard) (default 3.1.1)", func(v string) error {
		p, err := device.ParseProtocol(v)
		if err != nil {
			return fmt.Errorf("want 3.1.1 or 5")
		}
		f.p.MQTT5 = p == device.MQTT5
		return nil
	})
	fs.Func("server-signals", "MQTT 5: honour or ignore the broker's reason codes and Server References (default honour)", func(v string) error {
		if v != "honour" && v != "ignore" {
			return fmt.Errorf("want honour or ignore")
		}
		f.p.IgnoreServerSignals = v == "ignore"
		return nil
	})
	fs.Func("admit-code", "MQTT 5: the reason code of a refusal over the admission limit (default 0x9F)", reasonCode(&f.p.AdmitCode))
	fs.Func("busy-code", "busy-node: the reason code the busy node answers MQTT 5 devices with (default 0x89)", reasonCode(&f.p.BusyCode))
	f.compare = fs.String("compare", defaultCompare, "comma-separated policies, run one after another and compared in one table "+
		"(-policy alone: that one policy)")
	f.out = fs.String("out", "devicesim-report", "directory for the report: report.json, events.csv, arrivals.svg, report.html "+
		"(a shard's: its shard-i in it; -compare's: a directory a policy in it)")
	fs.Var(&f.expect, "expect", "exit 1 unless the fleet's verdict is this one (spread, waves or inconclusive); one policy only")
	f.metricsAddr = fs.String("metrics", "", "serve the running fleet's Prometheus metrics on host:port at /metrics")
	f.events = fs.String("events", "auto", "write events.csv, one row an attempt, as the run goes: on, off, or auto (on up to 1,000,000 devices)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	if err := checkDurationFlags(fs); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// number is a flag's parser of a number into dst.
func number(dst *float64) func(string) error {
	return func(v string) (err error) {
		if *dst, err = strconv.ParseFloat(v, 64); err != nil {
			return errors.New("want a number, such as 2")
		}
		return nil
	}
}

// reasonCode is a flag's parser of an MQTT 5 refusal's reason code, hex
// (0x9F) or decimal.
func reasonCode(dst *byte) func(string) error {
	return func(v string) (err error) {
		*dst, err = plan.ParseReasonCode(v)
		return err
	}
}

// resolve turns the flags into the plan: the shard, a child's plan, the
// admission mode, where the run reports.
func (f *runFlags) resolve(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (plan.Plan, error) {
	if *f.file != "" {
		if err := f.readStorm(getenv, stdout); err != nil {
			return f.p, err
		}
	}
	p := f.p
	if f.set["policy"] && !f.set["compare"] {
		*f.compare = "" // one policy, as asked
	}
	switch {
	case *f.shard != "":
		sh, err := plan.ParseShard(*f.shard)
		if err != nil {
			return p, fmt.Errorf("-shard: %w", err)
		}
		p.Shard = sh
	case *f.shards > 0:
		idx := getenv("JOB_COMPLETION_INDEX")
		i, err := strconv.Atoi(idx)
		if err != nil {
			return p, fmt.Errorf("-shards needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job), got %q", idx)
		}
		p.Shard = plan.Shard{Index: i, Count: *f.shards}
	}
	if p.Shard.Count > 0 && !f.set["out"] {
		*f.out = p.Shard.Dir(*f.out)
	}
	p = p.Settle(f.set["time-scale"], *f.out)
	if *f.merge && p.Shard.Count == 0 {
		return p, errors.New("-merge joins a sharded run's reports: it needs -shard or -shards")
	}
	if *f.child != "" {
		child, err := children.ReadPlan(*f.child)
		if err != nil {
			return p, fmt.Errorf("-child: %w", err)
		}
		p, *f.compare, *f.retryCap, *f.admitMode = child, "", child.RetryCap, child.AdmitMode.String()
		p.Hold = stdin
	}
	if *f.streamEvents {
		if p.Hold == nil {
			return p, errors.New("-stream-events is for a child run: it needs -child")
		}
		p.Stream = os.NewFile(3, "events")
	}
	if exe, err := os.Executable(); err == nil {
		p.Exe = exe
	}
	if p.Descriptors == 0 { // a child's comes from its parent's plan
		p.Descriptors = descriptors()
	}
	p.RetryCap = *f.retryCap
	mode, err := fault.ParseAdmissionMode(*f.admitMode)
	if err != nil {
		return p, fmt.Errorf("-admit-mode: %w", err)
	}
	p.AdmitMode = mode
	p.Warn = stderr
	if t, ok := stdout.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(t.Fd())) {
		p.Progress = stdout // live progress only on a terminal
	}
	switch *f.events {
	case "on", "off", "auto":
	default:
		return p, fmt.Errorf("-events: want on, off or auto, got %q", *f.events)
	}
	return p, nil
}

// readStorm takes the plan, its compare and its expectations from the
// storm file -f names; the flags that the file sets are refused beside it.
func (f *runFlags) readStorm(getenv func(string) string, stdout io.Writer) error {
	for name := range f.set {
		if name != "f" && name != "out" && name != "events" && name != "metrics" && name != "merge" {
			return fmt.Errorf("-%s: the storm file -f says it (only -out, -events, -metrics and -merge go beside -f)", name)
		}
	}
	sf, err := storm.ReadFile(*f.file, getenv)
	if err != nil {
		return fmt.Errorf("-f %s: %w", *f.file, err)
	}
	p, why, err := sf.Plan()
	if err != nil {
		return fmt.Errorf("-f %s: %w", *f.file, err)
	}
	fmt.Fprintf(stdout, "storm %s: engine %s (%s)\n", *f.file, p.Engine, why)
	f.p, f.storm = p, sf
	*f.compare, *f.retryCap, *f.admitMode = strings.Join(sf.Compare, ","), p.RetryCap, p.AdmitMode.String()
	return nil
}

func runCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, stderr)
	if f == nil {
		return err
	}
	p, err := f.resolve(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	writeEvents := *f.events == "on" || (*f.events == "auto" && p.Devices <= autoEventsDevices)
	if err := checkPlan(p, *f.compare); err != nil {
		return err
	}
	if *f.metricsAddr != "" {
		if p.Engine == plan.Virtual {
			return errors.New("-metrics follows real agents as they run; the virtual engine runs in virtual time")
		}
		fleet := livemetrics.NewFleet()
		addr, stop, err := fleet.Serve(*f.metricsAddr)
		if err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
		defer stop()
		fmt.Fprintf(stderr, "metrics: http://%s/metrics\n", addr)
		p.Metrics = fleet
	}
	if p.Shard.Count > 0 {
		// An earlier run's report must not be merged as this one's, even if
		// this one is refused before it starts.
		_ = os.Remove(filepath.Join(*f.out, "report.json"))
	}
	if *f.compare == "" {
		file := f.storm
		if p.Shard.Count > 0 && file != nil {
			// A slice is not the fleet: the storm's expectations are the
			// merged report's.
			fmt.Fprintln(stdout, "shard: the storm file's expectations hold the merged report, not one shard's")
			file = nil
		}
		err := runOne(ctx, p, *f.out, writeEvents, &f.expect, file, stdout)
		_, statErr := os.Stat(filepath.Join(*f.out, "report.json"))
		if ran := statErr == nil; *f.merge && p.Shard.Index == 0 && ran { // a shard refused before it ran has nothing to merge
			parent := filepath.Dir(*f.out)
			err = errors.Join(err, mergeShards(ctx, plan.Dirs(parent, p.Shard.Count), filepath.Join(parent, "merged"), p.MergeWait(),
				f.storm, stdout))
		}
		return err
	}
	if *f.merge || !p.DisruptAt.IsZero() {
		return errors.New("-merge and -disrupt-at strike and join one storm of one policy: name it with -policy " +
			"(without it, a run compares two), and run each policy's storm on its own")
	}
	if f.expect.v != "" {
		return errors.New("-expect judges one policy's run: drop -compare, or run each policy with its own -expect")
	}
	return runCompare(ctx, p, splitSpecs(*f.compare), *f.out, writeEvents, f.storm, stdout)
}

// runCompare runs the plan once for each policy, one after another, and
// writes each run's report in its own directory, then one table and one
// chart of them all.
func runCompare(ctx context.Context, p plan.Plan, policies []string, out string, writeEvents bool, expect *storm.File, stdout io.Writer) error {
	var reports []*report.Report
	var errs []error
	p = fleetsim.ServedScale(p, stdout)
	for _, name := range policies {
		p.Policy = strings.TrimSpace(name)
		fmt.Fprintf(stdout, "== %s\n", p.Policy)
		r, served, err := runServed(ctx, p, filepath.Join(out, p.Policy), writeEvents, stdout)
		if r == nil {
			return err
		}
		p.TimeScale = served.TimeScale // what the host served one policy, it serves the next
		r.Summary(stdout)
		errs = append(errs, hostBound(r), err, expect.Hold(r, stdout))
		if werr := writeReport(r, filepath.Join(out, p.Policy)); werr != nil {
			return werr
		}
		if err != nil && ctx.Err() != nil {
			return err // interrupted: the policies after it are not run
		}
		r.DropEvents() // the table and the chart need only the summary
		reports = append(reports, r)
	}
	fmt.Fprintln(stdout)
	report.CompareTable(stdout, reports)
	charts := []string{filepath.Join(out, "arrivals.svg"), filepath.Join(out, "report.html")}
	unfinished.add(charts...)
	if err := report.WriteCharts(out, reports); err != nil {
		return err
	}
	unfinished.done(charts...)
	fmt.Fprintf(stdout, "report: %s/report.html (chart: %s/arrivals.svg), one directory per policy\n", out, out)
	return errors.Join(errs...)
}

// checkPlan checks the run, each policy of compare's, before anything
// starts or a file is written: the flags, and whether this machine has the
// memory for the fleet.
func checkPlan(p plan.Plan, compare string) error {
	policies := []string{p.Policy}
	if compare != "" {
		policies = splitSpecs(compare)
	}
	for _, name := range policies {
		p.Policy = strings.TrimSpace(name)
		if err := p.Validate(); err != nil {
			return err
		}
	}
	return p.CheckFits(plan.AvailableMemory())
}

// defaultCompare is the embedded default's compare: the mission's formula,
// which devices ship with, and the policy the grid finds safe for a fleet.
const defaultCompare = "iotcore,fleet-safe"

func runOne(ctx context.Context, p plan.Plan, out string, writeEvents bool, expect *expectFlag, file *storm.File, stdout io.Writer) error {
	r, _, err := runServed(ctx, fleetsim.ServedScale(p, stdout), out, writeEvents, stdout)
	if r == nil {
		return err
	}
	r.Summary(stdout)
	err = errors.Join(err, file.Hold(r, stdout))
	if werr := writeReport(r, out); werr != nil {
		return errors.Join(err, werr)
	}
	beside := "report.json, events.csv, arrivals.svg"
	if !writeEvents {
		beside = "report.json, arrivals.svg; no events.csv: -events off, or auto beyond 1,000,000 devices"
	}
	fmt.Fprintf(stdout, "report: %s/report.html (%s beside it)\n", out, beside)
	if p.Hold == nil { // a child's host is its parent's to judge, over the whole fleet
		err = errors.Join(hostBound(r), err)
	}
	return errors.Join(err, expect.check(r.Verdict))
}

// exitHostBound is the exit status of a run whose host set its times: not
// a pass, and not the fleet's failure either.
const exitHostBound = 3

// hostBound is the error of a run its host bound, nil for any other.
func hostBound(r *report.Report) error {
	if !r.Host.Bound {
		return nil
	}
	return &exitError{code: exitHostBound, err: fmt.Errorf("%s: the host bound this run (%.0f ms late at the 99th percentile, against %v), "+
		"so it cannot pass: lower -time-scale or -devices, or leave the time scale to the host", r.Policy,
		1000*r.Host.LateP99S(), report.HostBoundLate)}
}

// runServed runs p at the scale the host serves (fleetsim.SlowerWhileBound).
func runServed(ctx context.Context, p plan.Plan, dir string, writeEvents bool, stdout io.Writer) (*report.Report, plan.Plan, error) {
	return fleetsim.SlowerWhileBound(ctx, p, stdout, func(p plan.Plan) (*report.Report, error) {
		return runWritingEvents(ctx, p, dir, writeEvents)
	})
}

// autoEventsDevices is the largest fleet whose events.csv -events auto
// writes: a million devices make up to tens of millions of rows, a few GB.
const autoEventsDevices = 1_000_000

// runWritingEvents runs c with its events streamed to dir/events.csv, or
// to nowhere when not writing them (never kept in memory either way).
//
// An interrupted run's report, where Run has one, says so (its engine
// marks it Incomplete); where it has none, the events file goes too.
func runWritingEvents(ctx context.Context, p plan.Plan, dir string, write bool) (*report.Report, error) {
	p.Events = io.Discard
	if err := p.Validate(); err != nil {
		return nil, err // before the events file: a refused run leaves nothing behind
	}
	if !write {
		_ = os.Remove(filepath.Join(dir, "events.csv")) // not this run's
		return fleetsim.Run(ctx, p)
	}
	// Streamed beside events.csv, and put in its place once the run has a
	// report: dir may be shared, and what was there is never followed.
	d, err := datadir.MkdirShared(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := datadir.CreateShared(d, "events.csv", 0o644)
	if err != nil {
		return nil, err
	}
	unfinished.add(f.Name())
	defer unfinished.done(f.Name())
	p.Events = f
	r, err := fleetsim.Run(ctx, p)
	if r == nil {
		f.Abort()
		return nil, err
	}
	unfinished.add(filepath.Join(dir, "events.csv")) // until writeReport has the rest
	return r, errors.Join(err, f.Commit())
}

// writeReport writes r's files into dir; until they are all there, an
// interrupted devicesim removes them.
func writeReport(r *report.Report, dir string) error {
	files := []string{"events.csv", "report.json", "arrivals.svg", "report.html"}
	for i, f := range files {
		files[i] = filepath.Join(dir, f)
	}
	unfinished.add(files...)
	if err := r.WriteFiles(dir); err != nil {
		return err
	}
	unfinished.done(files...)
	return nil
}

func delaysCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devicesim delays", delaysModes, stderr)
	policy := fs.String("policy", "iotcore", "reconnect policy: "+strings.Join(plan.PolicyNames(), ", "))
	maxBackoff := fs.Duration("max-backoff", 32*time.Second, "the policy's cap")
	attempts := fs.Int("attempts", 8, "retries per sample")
	samples := fs.Int("samples", 1000, "independent devices to draw")
	seed := fs.Uint64("seed", 1, "seed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := checkDurationFlags(fs); err != nil {
		return err
	}
	if *attempts < 1 || *samples < 1 {
		return fmt.Errorf("-attempts and -samples must be >= 1")
	}
	w := csv.NewWriter(stdout)
	_ = w.Write([]string{"attempt", "delay_ms"})
	if err := plan.Delays(*policy, *maxBackoff, *attempts, *samples, *seed, func(a int, d time.Duration) {
		_ = w.Write([]string{strconv.Itoa(a), strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)})
	}); err != nil {
		return err
	}
	w.Flush()
	return w.Error()
}

func mergeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devicesim merge", mergeModes, stderr)
	out := fs.String("out", "devicesim-report/merged", "directory for the merged report")
	shards := fs.Int("shards", 0, "merge DIR/shard-0 to DIR/shard-(N-1), DIR the one directory named")
	wait := fs.Duration("await", 0, "wait this long for every shard's report to be written (0: they must be there)")
	stormFile := fs.String("f", "", "hold the merged report to this storm file's expectations; exit 1 if one fails")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := checkDurationFlags(fs); err != nil {
		return err
	}
	dirs := fs.Args()
	switch {
	case len(dirs) == 0:
		return errors.New("merge: name the shard report directories, or with -shards N their parent")
	case *shards > 0 && len(dirs) != 1:
		return errors.New("merge -shards N: name the one directory that holds shard-0 to shard-(N-1)")
	case *shards > 0:
		dirs = plan.Dirs(dirs[0], *shards)
	}
	var file *storm.File
	if *stormFile != "" {
		// Only its expectations are read: any shard's slice, any broker.
		var err error
		if file, err = storm.ReadFile(*stormFile, func(string) string { return "0" }); err != nil {
			return fmt.Errorf("merge -f %s: %w", *stormFile, err)
		}
	}
	return mergeShards(context.Background(), dirs, *out, *wait, file, stdout)
}

// mergeShards merges the shard reports in dirs into out, waiting up to
// wait for any not written yet, and holds the merged report to the storm
// file's expectations, if there is one.
func mergeShards(ctx context.Context, dirs []string, out string, wait time.Duration, file *storm.File, stdout io.Writer) error {
	m, err := report.MergeDirs(ctx, dirs, wait)
	if err != nil {
		return err
	}
	m.Summary(stdout)
	checked := file.Hold(m, stdout)
	if err := m.WriteFiles(out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report: %s/report.html (merged from %d shards)\n", out, len(dirs))
	return checked
}

func scenarioNames() string {
	names := make([]string, len(plan.Scenarios))
	for i, s := range plan.Scenarios {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
