package cluster_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
)

func node(k int) *int { return &k }

// A cluster of real in-process brokers takes a timeline, exactly as the
// model does (TestAClusterTakesATimeline): a rolling restart piles the
// fleet onto node 0, node 0 restarted alone sends all of it to node 1, and
// a drop of every node's sessions sends it to node 2, the next node of
// every device's list; each node takes exactly that on every seed.
func TestAClusterTakesATimelineOnRealAgents(t *testing.T) {
	for seed := uint64(1); seed <= fleetsimtest.Seeds(); seed++ {
		p := fleetsimtest.Plan(plan.RollingRestart, "fleet-safe", 300)
		p.Seed, p.Nodes, p.Gap, p.Outage = seed, 3, time.Minute, 30*time.Second
		p.Then = []plan.Event{
			{At: 5 * time.Minute, Scenario: plan.BrokerRestart, Outage: 30 * time.Second, Node: node(0)},
			{At: 8 * time.Minute, Scenario: plan.DropAll},
		}
		r, err := fleetsimtest.InVirtualTime(t, p)
		require.NoError(t, err)
		require.True(t, r.Recovery.AllRecovered)
		require.Len(t, r.Nodes, 3)
		assert.Equal(t, []int64{300, 100 + 300, 200 + 300}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count},
			"seed %d", seed)
		require.Len(t, r.Disruptions, 5, "each node's restart of the rolling restart, node 0's own, the drop")
		for k, at := range []float64{0, 60, 120, 300, 480} {
			assert.Equal(t, at, r.Disruptions[k].AtS)
			assert.True(t, r.Disruptions[k].Recovery.AllRecovered, "seed %d, disruption at %v s", seed, at)
		}
		assert.InDelta(t, 150.0, r.BrokerBackS, 0.001, "the rolling restart's last node back")
		assert.Less(t, r.Disruptions[4].Recovery.MaxS, 3.0, "a drop: every device back at its next node within fleet-safe's first wait")
		// Each device noticed each disruption that ended its session at
		// once, from that disruption's start: measured from the first, the
		// last node's devices would read two gaps late, the host bound.
		assert.Zero(t, r.Host.NoticeP99S, "seed %d", seed)
		assert.False(t, r.Host.Bound, "seed %d", seed)
	}
}

// Only real agents break a cluster's paths: node 1 behind a black hole
// for a minute, then every node's path slow for 30 s, a fault proxy in
// front of each node. Node 1's devices notice through their keepalive and
// fail over to node 2; the slow paths drop every session, and each device
// goes on to its next node: node 0's to node 1, node 2's (its own and node
// 1's) to node 0. Each node's proxy counts what its node took.
func TestAClusterBehindAFaultProxyANode(t *testing.T) {
	p := fleetsimtest.Plan(plan.Blackhole, "fleet-safe", 300)
	p.Nodes, p.Outage, p.Node = 3, time.Minute, node(1)
	p.Then = []plan.Event{{At: 3 * time.Minute, Scenario: plan.Latency, Outage: 30 * time.Second, Latency: 2 * time.Second}}
	r, err := fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered)
	require.Len(t, r.Disruptions, 2)
	for _, d := range r.Disruptions {
		assert.True(t, d.Recovery.AllRecovered, "disruption at %v s", d.AtS)
	}
	require.NotNil(t, r.Noticed)
	assert.Equal(t, 100, r.Noticed.Devices+r.Noticed.AtEnd, "node 1's devices, and only they, noticed the black hole")
	assert.GreaterOrEqual(t, r.Disruptions[1].Recovery.MaxS, 1.5+2.0, "the slow path: fleet-safe's first wait and the latency")
	require.Len(t, r.Nodes, 3)
	assert.Equal(t, []int64{200, 100, 100}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count})
	require.NotNil(t, r.Proxy)
	for k, n := range r.Nodes {
		require.NotNil(t, n.Proxy, "node %d's own proxy", k)
		assert.EqualValues(t, n.Arrivals.Count, n.Proxy.Answered, "node %d: every connection its proxy saw answered, and no other, reached it", k)
	}

	p.Engine = plan.Virtual
	assert.ErrorContains(t, p.Validate(), "latency breaks the network path, which the virtual engine does not model: the agents engine runs it")
}

// A throttled restart of every node of a cluster of real brokers, as in
// the model (TestAThrottledClusterAdmitsAtEachNode): each node admits the
// limit on its own, 10 connects a second each, so the cluster admits up to
// three times that and 300 devices need 10 s after the outage at least;
// node 0 restarted alone sends its 100 devices to node 1, and the run
// waits for them alone.
func TestAThrottledClusterAdmitsAtEachNodeOnRealAgents(t *testing.T) {
	p := fleetsimtest.Plan(plan.ThrottledRestart, "full", 300)
	p.Nodes, p.AdmitRate, p.AdmitBurst = 3, 10, 1
	r, err := fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered)
	assert.LessOrEqual(t, r.Admitted.PeakPerS1s, 3*(10.0+1), "no node admits beyond its limit")
	assert.Greater(t, r.Admitted.PeakPerS1s, 10.0+1, "the nodes admit side by side, not one limit between them")
	assert.GreaterOrEqual(t, r.Recovery.MaxS, 30.0+10-0.2, "nobody beats the outage plus devices / (nodes x rate)")

	p.Node = node(0)
	r, err = fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered, "node 0's 100 back; the other 200 never left")
	assert.Equal(t, 100, r.Recovered())
	assert.EqualValues(t, 100, r.Nodes[1].Arrivals.Count)
}

// A boot storm on a cluster boots each device at its home node, its index
// modulo the nodes, on both engines.
func TestABootStormOnAClusterBootsAtHome(t *testing.T) {
	p := fleetsimtest.Plan(plan.BootStorm, "fleet-safe", 300)
	p.Nodes = 3
	for _, engine := range []plan.Engine{plan.Agents, plan.Virtual} {
		p.Engine = engine
		r, err := fleetsimtest.InVirtualTime(t, p)
		require.NoError(t, err, engine)
		require.Len(t, r.Nodes, 3, engine)
		assert.Equal(t, []int64{100, 100, 100}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count}, engine)
	}
}
