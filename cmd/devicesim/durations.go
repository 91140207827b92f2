package main

import (
	"flag"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/plan"
)

// durationLimits is the most each duration flag may be, in every command
// that has it: plan's bounds, which a storm file's keys have too (MQTT's
// for a keepalive).
var durationLimits = map[string]time.Duration{
	"max-backoff": plan.MaxWait, "boot-spread": plan.MaxWait, "ping-timeout": plan.MaxWait, "retry-after": plan.MaxWait,
	"retry-after-jitter": plan.MaxWait, "keepalive": device.MaxKeepAlive,
	"outage": plan.MaxDisruption, "flap": plan.MaxDisruption, "latency": plan.MaxDisruption,
	"latency-jitter": plan.MaxDisruption, "gap": plan.MaxDisruption,
	"duration": plan.MaxSpan, "ready-wait": plan.MaxSpan, "target-p99": plan.MaxSpan, "await": plan.MaxSpan,
	"watch": plan.MaxSpan, "linger": plan.MaxSpan,
}

// checkDurationFlags refuses the first duration flag given over its limit,
// naming it: the plan the flags make cannot name a flag. Every duration
// flag has a limit (TestEveryDurationFlagIsBounded).
func checkDurationFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		g, ok := fl.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		if d, ok := g.Get().(time.Duration); ok {
			err = plan.CheckDuration("-"+fl.Name, d, durationLimits[fl.Name])
		}
	})
	return err
}
