package fleetsim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// knownVerdicts are the runs whose verdict follows from the policy: rounds
// the devices make in step are waves whether or not the broker saw them;
// one burst of first retries (drop-all) is not a sequence of rounds.
// Restarts last 10 s, so that they are quick.
var knownVerdicts = []struct {
	scenario plan.Scenario
	policy   string
	devices  int
	want     stormstats.Verdict
}{
	{plan.BrokerRestart, "exponential", 60, stormstats.Waves}, // rounds at 1, 3, 7 and 15 s
	// the same, each a second or more wide
	{plan.BrokerRestart, "iotcore", 60, stormstats.Waves},
	{plan.BrokerRestart, "full", 60, stormstats.Spread},
	{plan.DropAll, "exponential", 200, stormstats.Spread}, // everyone back at 1 s: one burst
	// everyone back within [1, 2) s: one burst
	{plan.DropAll, "iotcore", 200, stormstats.Spread},
	{plan.DropAll, "full", 200, stormstats.Spread},
	{plan.BootStorm, "iotcore", 200, stormstats.Spread}, // the boot spread
}

// Every known verdict holds for 20 consecutive seeds on both engines, the
// real agents in virtual time (3 seeds under the race detector).
func TestKnownVerdictsHoldAcrossSeeds(t *testing.T) {
	for _, engine := range []plan.Engine{plan.Virtual, plan.Agents} {
		for _, k := range knownVerdicts {
			t.Run(fmt.Sprintf("%s/%s/%s", engine, k.scenario, k.policy), func(t *testing.T) {
				for seed := uint64(1); seed <= seeds(); seed++ {
					c := small(k.scenario, k.policy)
					c.Engine, c.Devices, c.Seed, c.Outage = engine, k.devices, seed, 10*time.Second
					var r *report.Report
					var err error
					if engine == plan.Agents {
						r, err = inVirtualTime(t, c)
					} else {
						r, err = fleetsim.Run(context.Background(), c)
					}
					if assert.NoError(t, err, "seed %d", seed) {
						assert.Equal(t, k.want, r.Verdict, "seed %d: %s", seed, r.Fleet.Judgement.Reason)
					}
				}
			})
		}
	}
}
