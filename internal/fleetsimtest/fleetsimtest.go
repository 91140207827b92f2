// Package fleetsimtest runs real agents in virtual time for tests: a
// testing/synctest bubble around fleetsim.Run, and the number of seeds a
// statistical test runs.
package fleetsimtest

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// InVirtualTime runs c in a testing/synctest bubble. The real agents, paho
// and the mochi broker are all built inside it on in-memory transports.
// The bubble's clock moves only when every goroutine waits. Every attempt
// leaves at its scheduled instant whatever else the host is doing, so a
// test asserts the code's figures, never the machine's. Time scale 1:
// virtual time costs nothing to wait through.
func InVirtualTime(t *testing.T, p plan.Plan) (*report.Report, error) {
	t.Helper()
	p.TimeScale = 1
	return InBubble(t, p)
}

// InBubble is InVirtualTime at the time scale c names (which the run may
// refuse, and say so).
func InBubble(t *testing.T, p plan.Plan) (r *report.Report, err error) {
	t.Helper()
	if RaceDetector {
		// One P under the race detector. The runtime fires a bubble's timers
		// under one race context. With two Ps, a goroutine reading an expired
		// timer's channel could fire one under it on the other P. That could
		// happen while the bubble's own timer check was still starting
		// goroutines under it. The result was a crash in the race runtime's
		// stack depot, in about one make test in two, with Go 1.26.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	synctest.Test(t, func(*testing.T) { r, err = fleetsim.Run(context.Background(), p) })
	return r, err
}

// Plan is the default plan with devices on policy through scenario: a
// test's starting point, the engine left to the plan's default (real
// agents).
func Plan(scenario plan.Scenario, policy string, devices int) plan.Plan {
	p := plan.Default()
	p.Devices, p.Scenario, p.Policy = devices, scenario, policy
	return p
}

// Seeds is how many consecutive seeds a statistical test runs on real
// agents: 20, or 1 under the race detector (which slows them tenfold, and
// looks for races, not error rates). A test that calls it is named in make
// test's stats step, which runs it at 20.
func Seeds() uint64 {
	if RaceDetector {
		return 1
	}
	return 20
}
