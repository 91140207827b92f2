package agents_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// A broker restarted twice, five minutes apart, on real agents: each
// recovery is judged on its own, exactly as the virtual engine judges it
// (TestATimelineJudgesEachRecovery), and a fleet on full jitter reads
// spread after both on every seed, where its whole series reads waves (two
// recoveries, two bursts); the formula's rounds read waves either way.
func TestATimelineJudgesEachRecoveryOnRealAgents(t *testing.T) {
	for seed := uint64(1); seed <= fleetsimtest.Seeds(); seed++ {
		p := fleetsimtest.Plan(plan.BrokerRestart, "full", 200)
		p.Seed = seed
		p.Then = []plan.Event{{At: 5 * time.Minute, Scenario: plan.BrokerRestart, Outage: 30 * time.Second}}
		r, err := fleetsimtest.InVirtualTime(t, p)
		require.NoError(t, err)
		require.Len(t, r.Disruptions, 2)
		for _, d := range r.Disruptions {
			assert.Equal(t, stormstats.Spread, d.Verdict, "seed %d, disruption at %v s: %s", seed, d.AtS, d.Fleet.Judgement.Reason)
			assert.True(t, d.Recovery.AllRecovered)
			assert.Less(t, d.Recovery.P99S, 120.0)
			assert.GreaterOrEqual(t, d.Recovery.P50S, 30.0, "nobody back before the broker")
		}
		assert.Equal(t, 300.0, r.Disruptions[1].AtS)
		assert.Equal(t, stormstats.Spread, r.Verdict, "seed %d: separate disruptions are not waves", seed)
		assert.Equal(t, stormstats.Waves, r.Fleet.Judgement.Verdict, "seed %d: as one series", seed)
	}
	p := fleetsimtest.Plan(plan.BrokerRestart, "iotcore", 200)
	p.Then = []plan.Event{{At: 5 * time.Minute, Scenario: plan.DropAll}}
	r, err := fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	require.Len(t, r.Disruptions, 2)
	assert.Equal(t, stormstats.Waves, r.Disruptions[0].Verdict, "the formula's rounds")
	assert.Equal(t, stormstats.Waves, r.Verdict)
	assert.True(t, r.Disruptions[1].Recovery.AllRecovered)
	assert.Less(t, r.Disruptions[1].Recovery.MaxS, 2.0, "a drop-all: every device back within its first wait")
}

// A three-node cluster of real in-process brokers restarted node by node,
// a minute apart, exactly as the virtual engine's model of it
// (TestARollingRestartPilesOntoTheSurvivors): each node's sessions fail
// over to the next node, so the fleet piles onto the survivors. Node 1
// takes node 0's third; when node 1 restarts, node 2 takes both; when node
// 2 restarts, node 0 (back by then) takes the whole fleet.
func TestARollingRestartPilesOntoTheSurvivorsOnRealAgents(t *testing.T) {
	for seed := uint64(1); seed <= fleetsimtest.Seeds(); seed++ {
		p := fleetsimtest.Plan(plan.RollingRestart, "fleet-safe", 300)
		p.Seed, p.Nodes, p.Gap, p.Outage = seed, 3, time.Minute, 30*time.Second
		r, err := fleetsimtest.InVirtualTime(t, p)
		require.NoError(t, err)
		require.True(t, r.Recovery.AllRecovered)
		require.Len(t, r.Nodes, 3)
		assert.Equal(t, []int64{300, 100, 200}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count},
			"seed %d", seed)
		assert.Equal(t, int64(600), r.Broker.Arrivals.Count, "every connect the cluster took, node by node")
		assert.InDelta(t, 150.0, r.BrokerBackS, 0.001, "the last node back at 2 gaps + the outage")
		require.Len(t, r.Disruptions, 3, "each node's restart a disruption of its own")
		for k, d := range r.Disruptions {
			assert.Equal(t, float64(60*k), d.AtS)
			assert.True(t, d.Recovery.AllRecovered, "seed %d, node %d", seed, k)
		}
	}
	p := fleetsimtest.Plan(plan.RollingRestart, "fleet-safe", 30)
	p.Nodes, p.Gap, p.Transport = 3, time.Minute, plan.TLS
	assert.ErrorContains(t, p.Validate(), "one CA")
}

// Only real agents break the path: a timeline of a broker restart, then a
// black hole, then a slow path, the fault proxy in the devices' path from
// the start. Each recovery is judged on its own: nobody is back from the
// black hole before it ends, and the slow path makes every connect pay its
// round trip. The model refuses the same timeline, naming the engine that
// runs it.
func TestATimelineBreaksThePathOnRealAgents(t *testing.T) {
	p := fleetsimtest.Plan(plan.BrokerRestart, "fleet-safe", 100)
	p.Then = []plan.Event{
		{At: 3 * time.Minute, Scenario: plan.Blackhole, Outage: time.Minute},
		{At: 6 * time.Minute, Scenario: plan.Latency, Outage: 30 * time.Second, Latency: 2 * time.Second, LatencyJitter: 500 * time.Millisecond},
	}
	r, err := fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	require.Len(t, r.Disruptions, 3)
	require.NotNil(t, r.Proxy, "the proxy stood in the path for the whole timeline")
	for _, d := range r.Disruptions {
		assert.True(t, d.Recovery.AllRecovered, "disruption at %v s", d.AtS)
	}
	assert.GreaterOrEqual(t, r.Disruptions[0].Recovery.P50S, 30.0, "the restart: nobody back before the broker")
	assert.GreaterOrEqual(t, r.Disruptions[1].Recovery.P50S, 60.0, "the black hole: nothing passes until it ends")
	assert.GreaterOrEqual(t, r.Disruptions[2].Recovery.MaxS, 1.5+2.0, "the slow path: fleet-safe's first wait and the latency")
	assert.Equal(t, []float64{0, 180, 360}, []float64{r.Disruptions[0].AtS, r.Disruptions[1].AtS, r.Disruptions[2].AtS})

	p.Engine = plan.Virtual
	assert.ErrorContains(t, p.Validate(), "timeline[1]: blackhole breaks the network path, which the virtual engine does not model: the agents engine runs it")
}
