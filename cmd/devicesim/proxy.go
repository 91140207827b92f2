package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/planner"
	"github.com/herdguard/herdguard/internal/proxystorm"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/storm"
)

const proxyModes = `usage: devicesim proxy -broker HOST:PORT [flags]
  the fault proxy between anyone's fleet (any firmware, any language) and its broker: point the fleet
  at -listen, and the proxy breaks the path, watches the fleet come back and reports it
  devicesim proxy -broker B -await-sessions N -scenario S   strike once N sessions are up
  devicesim proxy -broker B -f STORM.yaml                   the storm file's timeline and expectations
  devicesim proxy -broker B -control 127.0.0.1:8474         disruptions from the HTTP API (docs/proxy.md)
exit status: 0 the fleet came back and passed; 1 it failed (an expectation, a device never back, an
error); 3 the host bound it
`

// proxyFlags is devicesim proxy's command line.
type proxyFlags struct {
	p                                                         plan.Plan
	brokers, listen, file, out, control, tokenFile, admitMode string
	awaitSessions, maxConns, predict                          int
	identify                                                  bool
	watch, linger                                             time.Duration
	set                                                       map[string]bool
}

func parseProxyFlags(args []string, stderr io.Writer) (*proxyFlags, error) {
	f := &proxyFlags{p: plan.Default(), set: map[string]bool{}}
	f.p.Scenario = plan.BrokerRestart
	fs := newFlagSet("devicesim proxy", proxyModes, stderr)
	fs.StringVar(&f.brokers, "broker", "", "the broker, HOST:PORT; several, comma-separated: a cluster's nodes, a proxy each")
	fs.StringVar(&f.listen, "listen", "", "where the fleet connects, HOST:PORT, one a broker (default: a free port on loopback each, printed)")
	fs.StringVar(&f.file, "f", "", "a storm file (docs/storm.md) without a fleet: its timeline, brokers.external, admission and expectations")
	fs.TextVar(&f.p.Scenario, "scenario", f.p.Scenario, "the disruption: broker-restart, throttled-restart, drop-all, flapping, blackhole, latency, rate-limited or rolling-restart")
	fs.DurationVar(&f.p.Outage, "outage", f.p.Outage, "how long the disruption lasts")
	fs.DurationVar(&f.p.Flap, "flap", f.p.Flap, "flapping: how long each session lasts before the proxy drops it")
	fs.DurationVar(&f.p.Latency, "latency", f.p.Latency, "latency: added to every byte each way")
	fs.DurationVar(&f.p.LatencyJitter, "latency-jitter", f.p.LatencyJitter, "latency: up to this much more, at random")
	fs.DurationVar(&f.p.Gap, "gap", time.Minute, "rolling-restart: from one node's restart to the next")
	fs.Float64Var(&f.p.AdmitRate, "admit-rate", 0, "the broker admits this many connects a second (throttled-restart, rate-limited: 100 if unset)")
	fs.IntVar(&f.p.AdmitBurst, "admit-burst", 1, "admission burst")
	fs.StringVar(&f.admitMode, "admit-mode", "refuse", "over the limit: refuse (a reset), pause (hold the connection) or disconnect (accept, then drop)")
	fs.IntVar(&f.awaitSessions, "await-sessions", 0, "strike once this many sessions are up through the proxies")
	fs.TextVar(&f.p.DisruptAt, "disrupt-at", f.p.DisruptAt, "strike at this instant (RFC 3339)")
	fs.StringVar(&f.control, "control", "", "serve the HTTP control API on HOST:PORT (loopback; elsewhere it needs a token)")
	fs.StringVar(&f.tokenFile, "control-token-file", "", "file holding the API's bearer token (or HERDGUARD_CONTROL_TOKEN)")
	fs.DurationVar(&f.linger, "linger", time.Minute, "with -control: how long the API stays up after the report, until GET /report")
	fs.BoolVar(&f.identify, "identify", false, "read the CONNECT of every refused attempt, so each carries its client ID (a down broker reads none)")
	fs.DurationVar(&f.watch, "watch", 0, "the longest to watch for the fleet's return after the last disruption (0: outage + 20 x max-backoff + 1 min)")
	fs.IntVar(&f.maxConns, "max-conns", 0, "connections each proxy holds at once, two descriptors each (0: what the descriptor limit allows)")
	fs.Uint64Var(&f.p.Seed, "seed", f.p.Seed, "seed of the latency's jitter")
	fs.IntVar(&f.predict, "predict-devices", 0, "run the policy the fleet was seen to run at this many devices behind -admit-rate, in virtual time, "+
		"and print what devicesim plan prints for it (with -admit-rate)")
	fs.StringVar(&f.out, "out", filepath.Join("devicesim-report", "proxy"), "directory for the report: report.json, events.csv, arrivals.svg, report.html")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: devicesim proxy takes flags only", fs.Arg(0))
	}
	if f.predict < 0 || f.predict > 0 && f.p.AdmitRate <= 0 {
		return nil, errors.New("-predict-devices N needs -admit-rate R: what the broker admits at that size")
	}
	if err := checkDurationFlags(fs); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// config is the storm the flags (and the storm file) ask for.
func (f *proxyFlags) config(getenv func(string) string) (proxystorm.Config, *storm.File, error) {
	var file *storm.File
	cfg := proxystorm.Config{Identify: f.identify, AwaitSessions: f.awaitSessions, Watch: f.watch, Manual: f.control != "" &&
		f.awaitSessions == 0 && f.p.DisruptAt.IsZero() && f.file == ""}
	p := f.p
	mode, err := fault.ParseAdmissionMode(f.admitMode)
	if err != nil {
		return cfg, nil, fmt.Errorf("-admit-mode: %w", err)
	}
	p.AdmitMode = mode
	if f.file != "" {
		for _, name := range []string{"scenario", "outage", "flap", "latency", "latency-jitter", "gap", "admit-rate", "admit-burst", "admit-mode"} {
			if f.set[name] {
				return cfg, nil, fmt.Errorf("-%s: the storm file (-f) names the storm; give one or the other", name)
			}
		}
		if file, err = storm.ReadFile(f.file, getenv); err != nil {
			return cfg, nil, err
		}
		var brokers []string
		if p, brokers, err = file.ProxyPlan(); err != nil {
			return cfg, nil, err
		}
		if f.brokers == "" {
			cfg.Brokers = brokers
		}
		if f.set["disrupt-at"] {
			p.DisruptAt = f.p.DisruptAt
		}
	}
	if f.brokers != "" {
		cfg.Brokers = strings.Split(f.brokers, ",")
	}
	if f.listen != "" {
		cfg.Listen = strings.Split(f.listen, ",")
	}
	if p.DisruptAt.After > 0 {
		return cfg, nil, errors.New("-disrupt-at +D is for the shards of devicesim run; the proxy strikes at an instant (RFC 3339)")
	}
	cfg.Plan, cfg.DisruptAt = p, p.DisruptAt.At
	if cfg.MaxConns = f.maxConns; cfg.MaxConns == 0 && descriptors() > 0 {
		cfg.MaxConns = (descriptors() - 64) / 2 / max(len(cfg.Brokers), 1)
	}
	return cfg, file, nil
}

// predict runs the policy the fleet was seen to run at -predict-devices
// behind -admit-rate, as devicesim plan would with it as the fleet's
// current policy: its recovery, the broker's busiest second, its attempts,
// and the recommendation with the share of the fleet that must move.
func predict(ctx context.Context, rep *report.Report, f *proxyFlags, stdout, stderr io.Writer) error {
	fmt.Fprintf(stdout, "\nat %s devices behind a broker admitting %.0f connects a second:\n", plan.Thousands(f.predict), f.p.AdmitRate)
	q, note, why := proxystorm.Prediction(rep.Inferred, f.p, f.predict)
	if why != "" {
		fmt.Fprintln(stdout, "  cannot predict: "+why)
		return nil
	}
	if note != "" {
		fmt.Fprintln(stdout, "  "+note)
	}
	return answer(ctx, q, planner.Options{}, filepath.Join(f.out, "plan"), 2000, false, stdout, stderr)
}

func proxyCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f, err := parseProxyFlags(args, stderr)
	if f == nil {
		return err
	}
	cfg, file, err := f.config(getenv)
	if err != nil {
		return err
	}
	token, err := proxystorm.ControlToken(f.control, f.tokenFile, getenv)
	if err != nil {
		return err
	}
	s, err := proxystorm.New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	for k, addr := range s.Addrs() {
		fmt.Fprintf(stdout, "node %d: the fleet connects to %s, for the broker at %s\n", k, addr, cfg.Brokers[k])
	}
	if cfg.MaxConns > 0 {
		fmt.Fprintf(stdout, "each proxy holds at most %d connections (two descriptors each, of the process's %d); one more is refused\n",
			cfg.MaxConns, descriptors())
	}
	served := make(chan struct{}, 1)
	if f.control != "" {
		stop, err := proxystorm.ServeControl(f.control, s.Handler(token), served, stdout)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Fprintln(stdout, cfg.Trigger())
	rep, runErr := s.Run(ctx)
	if rep == nil {
		return runErr
	}
	rep.Summary(stdout)
	err = errors.Join(runErr, file.Hold(rep, stdout))
	if werr := writeReport(rep, f.out); werr != nil {
		return errors.Join(err, werr)
	}
	devices := s.Devices()
	if werr := datadir.WriteSharedIn(f.out, "devices.csv", func(w io.Writer) error { return proxystorm.WriteDevices(w, devices) }); werr != nil {
		return errors.Join(err, werr)
	}
	if body, jerr := rep.JSON(); jerr == nil {
		s.Wrote(filepath.Join(f.out, "report.json"), body)
	}
	fmt.Fprintf(stdout, "report: %s/report.html (report.json, events.csv, arrivals.svg, devices.csv beside it)\n", f.out)
	if f.predict > 0 {
		err = errors.Join(err, predict(ctx, rep, f, stdout, stderr))
	}
	if f.control != "" && ctx.Err() == nil {
		select { // the API's client reads the report before the command ends
		case <-served:
		case <-time.After(f.linger):
		case <-ctx.Done():
		}
	}
	return errors.Join(hostBound(rep), err)
}
