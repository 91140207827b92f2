package main

import (
	"flag"
	"fmt"
	"io"
)

// Each command's modes, printed above its flags by help.
const (
	runModes = `usage: devicesim run [flags]
  devicesim run                        the default: 2,000 real agents lose their broker for 30 s,
                                       the mission's formula, then fleet-safe, as fast as the host serves
  devicesim run -f STORM.yaml          a storm file (docs/storm.md): fleet, broker, timeline, expectations
  devicesim run -scenario S -policy P  one scenario, one policy (-compare P1,P2: side by side)
  devicesim run -engine virtual        the model, in virtual time: up to a hundred million devices
  devicesim run -broker URL[,URL...]   your broker, or cluster, through the fault proxy
  devicesim run -shards N              one shard of a fleet across machines (devicesim merge joins them)
exit status: 0 the run passed; 1 it failed (an expectation, -expect, an error);
3 the host bound it: its times are the host's, so it cannot pass
`
	gridModes = `usage: devicesim grid [flags]
  devicesim grid                   every policy against fleets of 1,000 to a million behind brokers
                                   admitting 500 to 50,000 connects/s, in virtual time (grid.html)
  devicesim grid -mqtt 5,5-deaf    MQTT 5 fleets that honour the broker's reason codes, and deaf ones
  devicesim grid -full             every cell to its end, with the broker's busiest second
  devicesim grid -mix fleet-safe   the rollout question: how much of the fleet must move to a policy
                                   (devicesim grid -mix fleet-safe -h lists its flags)
`
	mixModes = `usage: devicesim grid -mix POLICY [flags]
  the rollout question: the fleet runs -from today and a growing share moves to POLICY; which share
  keeps the broker's busiest second under -peak-bound and brings the fleet back spread out?
`
	mergeModes = `usage: devicesim merge -out DIR SHARD_DIR...
       devicesim merge -out DIR -shards N [-await D] DIR
  combines the reports of a fleet's shards (devicesim run -shards N) into one report; it refuses
  shards that ran different storms, struck at different instants or kept different clocks
`
	deployModes = `usage: devicesim deploy -f STORM.yaml -image IMAGE [-out DIR]
  writes the Kubernetes manifests that run the storm's shards as one Indexed Job (docs/large-fleets.md):
  the storm file names its shard as "${JOB_COMPLETION_INDEX}/N"; kubectl apply -k DIR starts it
`
	soakModes = `usage: devicesim soak [flags]
  one fleet of real agents with telemetry through storm after storm: memory, goroutines and
  messages must all come back to their baseline
`
	calibrateModes = `usage: devicesim calibrate [flags]
  the same runs on both engines, seed by seed: do real agents and the model agree?
`
	delaysModes = `usage: devicesim delays [flags]
  a policy's delays as CSV (attempt,delay_ms), one row an attempt of each of -samples devices
`
)

// testHookHelp, when set, is handed a command's flag set as its help is
// printed, every flag defined: a test reads what each command takes by
// asking for its help, which runs nothing.
var testHookHelp func(*flag.FlagSet)

// newFlagSet is a command's flag set whose help prints modes, then the
// flags.
func newFlagSet(name, modes string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if testHookHelp != nil {
			testHookHelp(fs)
		}
		fmt.Fprint(fs.Output(), modes)
		fmt.Fprintln(fs.Output(), "flags:")
		fs.PrintDefaults()
	}
	return fs
}
