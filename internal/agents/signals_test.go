package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// listening is c's fleet on MQTT 5, honouring the broker's reason codes
// and Server References or (ignore) deaf to them.
func listening(p plan.Plan, ignore bool) plan.Plan {
	p.MQTT5, p.IgnoreServerSignals = true, ignore
	return p
}

// sameOnBothEngines asserts that real agents and the model agree on what
// the broker saw and how the fleet came back.
func sameOnBothEngines(t *testing.T, p plan.Plan) *report.Report {
	t.Helper()
	rs := onBothEngines(t, p)
	a, v := rs[plan.Agents], rs[plan.Virtual]
	assert.Equal(t, a.Attempts.Total, v.Attempts.Total, "attempts")
	assert.Equal(t, a.Attempts.Refused, v.Attempts.Refused, "refusals")
	assert.InDelta(t, a.Recovery.P99S, v.Recovery.P99S, 0.5, "recovery p99")
	assert.Equal(t, a.Broker.Arrivals.PeakPerS1s, v.Broker.Arrivals.PeakPerS1s, "the busiest second")
	return v
}

// An admission limit answered with 0x9F connection rate exceeded: a fleet
// on the mission's formula that honours the code stretches each refused
// wait and comes back in a seventh of the time with half the attempts;
// one deaf to it keeps the formula's rounds, which the limit turns away
// wave after wave. Real agents and the model agree exactly.
func TestARateLimitedBrokerIsHeardOnBothEngines(t *testing.T) {
	p := fleetsimtest.Plan(plan.RateLimited, "iotcore", 200)
	p.AdmitRate, p.MaxBackoff = 10, 64*time.Second
	if fleetsimtest.RaceDetector { // the same recovery, half the devices at half the rate
		p.Devices, p.AdmitRate = 100, 5
	}
	honour, deaf := sameOnBothEngines(t, listening(p, false)), sameOnBothEngines(t, listening(p, true))
	require.True(t, honour.Recovery.AllRecovered)
	require.True(t, deaf.Recovery.AllRecovered)
	assert.Less(t, honour.Recovery.P99S*5, deaf.Recovery.P99S)
	assert.Less(t, honour.Attempts.PerDeviceMean*1.5, deaf.Attempts.PerDeviceMean)
	assert.Equal(t, "spread", string(honour.Verdict))
	assert.Equal(t, "waves", string(deaf.Verdict))

	p.MQTT5, p.Engine = false, plan.Virtual // a 3.1.1 fleet reads CONNACK 3 and cannot be told more
	v311, err := fleetsim.Run(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, deaf.Attempts.Total, v311.Attempts.Total, "deaf to 0x9F is 3.1.1's schedule")
}

// Across seeds on the model, honouring 0x9F wins in recovery and in
// attempts; measured: on 50 of 50 seeds at each of 100, 200 and 300
// devices and 5, 10 and 20 admitted a second, where the deaf fleet of 300
// at 5/s did not all come back within the run's bound on any seed.
func TestHonouringTheRateLimitWinsOnEverySeed(t *testing.T) {
	p := fleetsimtest.Plan(plan.RateLimited, "iotcore", 200)
	p.AdmitRate, p.MaxBackoff, p.Engine = 10, 64*time.Second, plan.Virtual
	for seed := uint64(1); seed <= fleetsimtest.Seeds(); seed++ {
		p.Seed = seed
		honour, err := fleetsim.Run(context.Background(), listening(p, false))
		require.NoError(t, err)
		deaf, _ := fleetsim.Run(context.Background(), listening(p, true)) // may end unrecovered
		require.NotNil(t, deaf)
		assert.Less(t, honour.Recovery.P99S, deaf.Recovery.P99S, "seed %d", seed)
		assert.Less(t, honour.Attempts.PerDeviceMean, deaf.Attempts.PerDeviceMean, "seed %d", seed)
	}
}

// A node over its capacity answers 0x89 server busy: its devices fail over
// at once either way, and those that honour the code stretch that wait,
// so the survivors' busiest second is lower. The 3.1.1 fleet, closed and
// refused with CONNACK 3, is the deaf one's twin.
func TestABusyNodeIsHeardOnBothEngines(t *testing.T) {
	p := fleetsimtest.Plan(plan.BusyNode, "full", 300)
	p.Nodes, p.Outage = 3, 30*time.Second
	honour, deaf := sameOnBothEngines(t, listening(p, false)), sameOnBothEngines(t, listening(p, true))
	for _, r := range []*report.Report{honour, deaf} {
		require.True(t, r.Recovery.AllRecovered)
		require.Len(t, r.Nodes, 3)
		assert.EqualValues(t, 100, r.Attempts.Total, "node 0's third, each once, to a survivor")
	}
	assert.Less(t, honour.Broker.Arrivals.PeakPerS1s, deaf.Broker.Arrivals.PeakPerS1s)
	assert.Less(t, honour.Recovery.P99S, 2*deaf.Recovery.P99S, "stretched by less than its wait")

	p.MQTT5 = false
	assert.Equal(t, deaf.Broker.Arrivals.PeakPerS1s, sameOnBothEngines(t, p).Broker.Arrivals.PeakPerS1s)
}

// A rolling drain hands each node's devices to the next with 0x9C: the
// same node a device's failover list names next, so following the Server
// Reference changes nothing here. The drain moves the fleet exactly as a
// rolling restart does (TestARollingRestartPilesOntoTheSurvivorsOnRealAgents).
func TestARollingDrainHandsEachNodeToTheNext(t *testing.T) {
	p := fleetsimtest.Plan(plan.RollingDrain, "fleet-safe", 150)
	p.Nodes, p.Gap, p.Outage = 3, time.Minute, 30*time.Second
	honour, deaf := sameOnBothEngines(t, listening(p, false)), sameOnBothEngines(t, listening(p, true))
	for _, r := range []*report.Report{honour, deaf} {
		require.True(t, r.Recovery.AllRecovered)
		require.Len(t, r.Nodes, 3)
		assert.Equal(t, []int64{150, 50, 100}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count})
		require.Len(t, r.Disruptions, 3, "each node's drain a disruption of its own")
	}
	assert.Equal(t, deaf.Attempts.Total, honour.Attempts.Total)
	assert.Equal(t, deaf.Recovery.P99S, honour.Recovery.P99S)

}
