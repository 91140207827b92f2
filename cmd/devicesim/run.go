package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/reconnect"
	"golang.org/x/term"
)

const usage = `devicesim launches a fleet of real device agents against an in-process
broker, disrupts it, and reports whether the fleet came back spread out or in
waves.

Commands:
  devicesim run [flags]      run a scenario (no flags: the embedded default)
  devicesim delays [flags]   print a policy's delays as CSV (attempt,delay_ms)
  devicesim help [command]   show help
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "delays":
		return delaysCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 {
			return run(ctx, []string{args[1], "-h"}, stdout, stdout)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := fleetsim.Default()
	fs := flag.NewFlagSet("devicesim run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.Devices, "devices", c.Devices, "number of devices")
	fs.StringVar(&c.Scenario, "scenario", c.Scenario, "broker-restart or drop-all")
	fs.StringVar(&c.Policy, "policy", c.Policy, "reconnect policy: "+strings.Join(fleetsim.PolicyNames(), ", "))
	fs.DurationVar(&c.MaxBackoff, "max-backoff", c.MaxBackoff, "the policy's cap (unscaled)")
	retryCap := fs.Int("retry-cap", -1, "retries before a device gives up; -1 retries forever")
	fs.DurationVar(&c.Outage, "outage", c.Outage, "how long the broker stays down (broker-restart, unscaled)")
	fs.Float64Var(&c.TimeScale, "time-scale", c.TimeScale, "run every duration this many times faster; reports stay unscaled")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed for every device's jitter (the same seed gives the same draws)")
	out := fs.String("out", "devicesim-report", "directory for report.json and events.csv")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	c.RetryCap = *retryCap
	if f, ok := stdout.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		c.Progress = stdout // live progress only on a terminal
	}
	r, err := fleetsim.Run(ctx, c)
	if r == nil {
		return err
	}
	r.Summary(stdout)
	if werr := r.WriteFiles(*out); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Fprintf(stdout, "report: %s/report.json, %s/events.csv\n", *out, *out)
	return err
}

func delaysCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devicesim delays", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policy := fs.String("policy", "iotcore", "reconnect policy: "+strings.Join(fleetsim.PolicyNames(), ", "))
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
	if *attempts < 1 || *samples < 1 {
		return fmt.Errorf("-attempts and -samples must be >= 1")
	}
	shape, err := fleetsim.Shape(*policy, *maxBackoff)
	if err != nil {
		return err
	}
	p, err := reconnect.New(shape, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	if err != nil {
		return err
	}
	w := csv.NewWriter(stdout)
	_ = w.Write([]string{"attempt", "delay_ms"})
	for s := 0; s < *samples; s++ {
		b := reconnect.NewBackoff(p, rand.NewPCG(*seed, uint64(s)))
		for a := 1; a <= *attempts; a++ {
			d, _ := b.Next(time.Time{})
			_ = w.Write([]string{strconv.Itoa(a), strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)})
		}
	}
	w.Flush()
	return w.Error()
}
