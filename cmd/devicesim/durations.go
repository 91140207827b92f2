package main

import (
	"flag"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
)

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
			err = plan.CheckDuration("-"+fl.Name, d, plan.FlagLimits[fl.Name])
		}
	})
	return err
}
