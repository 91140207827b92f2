package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/experiment"
	"github.com/herdguard/herdguard/internal/plan"
)

func soakCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sc := experiment.DefaultSoak()
	fs := newFlagSet("devicesim soak", soakModes, stderr)
	fs.IntVar(&sc.Devices, "devices", sc.Devices, "number of devices (real agents, in memory)")
	fs.IntVar(&sc.Storms, "storms", sc.Storms, "storms, in turn: "+strings.Join(experiment.SoakStorms, ", "))
	// paho-default publishes no telemetry, which a soak holds to account.
	policies := slices.DeleteFunc(plan.PolicyNames(), func(p string) bool { return p == plan.PahoDefault })
	fs.StringVar(&sc.Policy, "policy", sc.Policy, "reconnect policy: "+strings.Join(policies, ", ")+", or a spec such as full:guard=4")
	fs.Float64Var(&sc.Telemetry, "telemetry", sc.Telemetry, "QoS 1 messages per device per (unscaled) second, for the whole soak")
	fs.Float64Var(&sc.TimeScale, "time-scale", sc.TimeScale, "run every duration this many times faster")
	fs.DurationVar(&sc.Outage, "outage", sc.Outage, "each restart's and flapping window's length (unscaled)")
	fs.Float64Var(&sc.AdmitRate, "admit-rate", sc.AdmitRate, "the throttled storms' admission, connects per (unscaled) second")
	fs.Uint64Var(&sc.Seed, "seed", sc.Seed, "seed for every device's jitter")
	out := fs.String("out", "devicesim-report/soak", "directory for soak.json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := checkDurationFlags(fs); err != nil {
		return err
	}
	sc.Progress = stdout
	rep, err := experiment.Soak(ctx, sc)
	if rep == nil {
		return err
	}
	rep.Summary(stdout)
	b, jerr := json.MarshalIndent(rep, "", "  ")
	if jerr == nil {
		jerr = datadir.WriteFileIn(*out, "soak.json", b)
	}
	if err == nil && !rep.Pass {
		err = fmt.Errorf("%w: %s", experiment.ErrSoakFailed, strings.Join(rep.Problems, "; "))
	}
	return errors.Join(err, jerr)
}
