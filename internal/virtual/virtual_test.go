package virtual_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/virtual"
)

// run validates c, as every run does before anything starts, and runs it.
func run(p plan.Plan) (*report.Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return virtual.Run(context.Background(), p, virtual.Options{})
}

func model(scenario plan.Scenario, policy string, devices int) plan.Plan {
	p := plan.Default()
	p.Engine, p.Devices, p.Scenario, p.Policy = plan.Virtual, devices, scenario, policy
	return p
}

func TestVirtualEngineMatchesTheAgents(t *testing.T) {
	// The same restart as TestBrokerRestartWithoutJitterComesBackInWaves,
	// with each device's state machine in virtual time: 1, 2, 4, 8, 16 s
	// waits put every device back at exactly 31 s.
	r, err := run(model(plan.BrokerRestart, "exponential", 60))
	require.NoError(t, err)
	assert.Equal(t, plan.Virtual, r.Engine)
	assert.True(t, r.Recovery.AllRecovered)
	assert.InDelta(t, 31.0, r.Recovery.P50S, 0.001)
	assert.InDelta(t, 31.0, r.Recovery.MaxS, 0.001)
	assert.Equal(t, int64(5*60), r.Attempts.Total)
	assert.Equal(t, 1.0, r.Attempts.AfterReturnPerDeviceMean)
	assert.Equal(t, stormstats.Waves, r.Verdict)
	assert.InDelta(t, 30.0, r.BrokerBackS, 0.001)
	j := r.Fleet.Judgement
	require.Len(t, j.Bursts, 5, "rounds at exactly 1, 3, 7, 15 and 31 s, refused dials included")
	for i, at := range []float64{1, 3, 7, 15, 31} {
		assert.InDelta(t, at, j.Bursts[i].AtS, j.ResolutionS, "to the resolution")
		assert.EqualValues(t, 60, j.Bursts[i].Count)
	}
	assert.InDelta(t, 1.0, j.Synchrony, 0.001)
	assert.InDelta(t, 2.0, j.GapMinS, 2*j.ResolutionS)
	assert.InDelta(t, 16.0, j.GapMaxS, 2*j.ResolutionS)
}

func TestVirtualEngineIsReproducible(t *testing.T) {
	a, err := run(model(plan.BrokerRestart, "full", 5000))
	require.NoError(t, err)
	b, err := run(model(plan.BrokerRestart, "full", 5000))
	require.NoError(t, err)
	assert.Equal(t, a.Recovery, b.Recovery, "same seed, same draws, same virtual times")
	assert.Equal(t, a.Fleet, b.Fleet)
	p := model(plan.BrokerRestart, "full", 5000)
	p.Seed = 2
	d, err := run(p)
	require.NoError(t, err)
	assert.NotEqual(t, a.Recovery, d.Recovery)
}

func TestVirtualThrottledRestartRespectsTheLimit(t *testing.T) {
	for _, mode := range []fault.AdmissionMode{fault.RefuseOverLimit, fault.PauseOverLimit, fault.DisconnectOverLimit} {
		p := model(plan.ThrottledRestart, "full", 2000)
		p.AdmitRate, p.AdmitBurst, p.AdmitMode = 100, 10, mode // 20 s at best after the return
		r, err := run(p)
		require.NoError(t, err, mode)
		assert.True(t, r.Recovery.AllRecovered, mode)
		assert.GreaterOrEqual(t, r.Recovery.MaxS, 30.0+20-0.2, "%v: nobody beats the outage plus devices/rate", mode)
		require.NotNil(t, r.Limit)
		assert.Equal(t, 20.0, r.Limit.IdealRecoveryS)
		// No second admits more than the rate plus the burst.
		assert.EqualValues(t, 2000, r.Admitted.Count)
		assert.LessOrEqual(t, r.Admitted.PeakPerS1s, 100.0+10, mode)
	}
}

func TestVirtualFlappingAndBootStorm(t *testing.T) {
	p := model(plan.Flapping, "iotcore", 1000)
	p.Outage, p.Flap = 20*time.Second, 2*time.Second
	r, err := run(p)
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	assert.GreaterOrEqual(t, r.Recovery.P50S, 18.0, "sessions admitted in the window were dropped")

	r, err = run(model(plan.BootStorm, "iotcore", 1000))
	require.NoError(t, err)
	assert.Equal(t, 1.0, r.Attempts.PerDeviceMean)
	assert.Less(t, r.Recovery.MaxS, 10.0, "inside the 10 s boot spread")
	assert.Equal(t, stormstats.Spread, r.Verdict, r.Fleet.Judgement.Reason)
}

func TestVirtualEngineRefusesWhatNeedsRealDevices(t *testing.T) {
	for name, c := range map[string]plan.Plan{
		"paho-default":  model(plan.BrokerRestart, plan.PahoDefault, 10),
		"config-outage": model(plan.ConfigOutage, "iotcore", 10),
		"tcp": func() plan.Plan {
			p := model(plan.DropAll, "iotcore", 10)
			p.Transport = plan.TCP
			return p
		}(),
	} {
		_, err := run(c)
		assert.ErrorContains(t, err, "agents", name)
	}
	p := model(plan.DropAll, "iotcore", 10)
	p.Engine = "quantum"
	_, err := run(p)
	assert.ErrorContains(t, err, "unknown engine")
}

// A mixed fleet: 70 % on the formula, 30 % on fleet-safe, behind one
// throttled broker. Each group is judged on its own, the groups' figures
// add up to the fleet's, and the fleet-safe devices come back in fewer
// attempts than the formula's.
func TestAMixedFleetReportsEachGroup(t *testing.T) {
	p := model(plan.ThrottledRestart, "iotcore", 10_000)
	p.AdmitRate, p.AdmitBurst = 500, 25
	p.Groups = []plan.Group{{Name: "old firmware", Devices: 7000, Policy: "iotcore"}, {Name: "new firmware", Devices: 3000, Policy: "fleet-safe"}}
	r, err := run(p)
	require.NoError(t, err)
	require.Len(t, r.Groups, 2)
	old, safe := r.Groups[0], r.Groups[1]
	assert.Equal(t, "old firmware", old.Name)
	assert.Equal(t, 7000, old.Devices)
	assert.Equal(t, "fleet-safe", safe.Policy)
	assert.Equal(t, r.Attempts.Total, old.Attempts.Total+safe.Attempts.Total)
	assert.True(t, old.Recovery.AllRecovered && safe.Recovery.AllRecovered)
	assert.Less(t, safe.Attempts.PerDeviceMean, old.Attempts.PerDeviceMean)

	p.Groups[1].Devices = 2000
	_, err = run(p)
	assert.ErrorContains(t, err, "add up to 9000, not the fleet's 10000")
}

// A broker restarted twice, ten minutes apart: each recovery is judged on
// its own, and a fleet on full jitter reads spread after both in every one
// of 20 seeds, where its whole series reads waves (two recoveries, two
// bursts); the formula's rounds read waves either way.
func TestATimelineJudgesEachRecovery(t *testing.T) {
	for seed := range uint64(20) {
		p := model(plan.BrokerRestart, "full", 2000)
		p.Seed = seed
		p.Then = []plan.Event{{At: 10 * time.Minute, Scenario: plan.BrokerRestart, Outage: 30 * time.Second}}
		r, err := run(p)
		require.NoError(t, err)
		require.Len(t, r.Disruptions, 2)
		for _, d := range r.Disruptions {
			assert.Equal(t, stormstats.Spread, d.Verdict, "seed %d, disruption at %v s", seed, d.AtS)
			assert.True(t, d.Recovery.AllRecovered)
			assert.Less(t, d.Recovery.P99S, 120.0)
		}
		assert.Equal(t, 600.0, r.Disruptions[1].AtS)
		assert.Equal(t, stormstats.Spread, r.Verdict, "seed %d: separate disruptions are not waves", seed)
		assert.Equal(t, stormstats.Waves, r.Fleet.Judgement.Verdict, "seed %d: as one series", seed)
	}
	p := model(plan.BrokerRestart, "iotcore", 2000)
	p.Then = []plan.Event{{At: 10 * time.Minute, Scenario: plan.DropAll}}
	r, err := run(p)
	require.NoError(t, err)
	assert.Equal(t, stormstats.Waves, r.Disruptions[0].Verdict, "the formula's rounds")
	assert.Equal(t, stormstats.Waves, r.Verdict)

	p.Then[0].Scenario = plan.Blackhole
	_, err = run(p)
	assert.ErrorContains(t, err, "timeline[1]: blackhole breaks the network path, which the virtual engine does not model: the agents engine runs it")
	p.Then[0].Scenario, p.Then[0].At = plan.DropAll, 0
	_, err = run(p)
	assert.ErrorContains(t, err, "not after the disruption before it")
}

// A run that judges only the fleet's side is the same run: the same
// recovery, attempts and verdicts, the disruptions' and the groups' too,
// with no broker's side to read.
func TestAFleetVerdictOnlyRunLeavesOnlyTheBrokerUnjudged(t *testing.T) {
	p := model(plan.ThrottledRestart, "equal", 2000)
	p.AdmitRate, p.AdmitBurst = 200, 10
	p.Then = []plan.Event{{At: 5 * time.Minute, Scenario: plan.BrokerRestart, Outage: 30 * time.Second}}
	p.Groups = []plan.Group{{Name: "old", Devices: 1500, Policy: "iotcore"}, {Name: "new", Devices: 500, Policy: "equal"}}
	require.NoError(t, p.Validate())
	whole, err := virtual.Run(context.Background(), p, virtual.Options{})
	require.NoError(t, err)
	brief, err := virtual.Run(context.Background(), p, virtual.Options{FleetVerdictOnly: true})
	require.NoError(t, err)
	require.NotNil(t, whole.Broker)
	assert.Nil(t, brief.Broker)
	assert.Equal(t, whole.Recovery, brief.Recovery)
	assert.Equal(t, whole.Attempts, brief.Attempts)
	assert.Equal(t, whole.Fleet, brief.Fleet)
	assert.Equal(t, whole.Verdict, brief.Verdict)
	require.Len(t, brief.Disruptions, 2)
	for k, d := range brief.Disruptions {
		assert.Nil(t, d.Broker)
		require.NotNil(t, whole.Disruptions[k].Broker)
		d.Broker = whole.Disruptions[k].Broker
		assert.Equal(t, whole.Disruptions[k], d)
	}
	require.Len(t, brief.Groups, 2)
	for k, g := range brief.Groups {
		assert.Nil(t, g.Broker)
		assert.Equal(t, whole.Groups[k].Recovery, g.Recovery)
		assert.Equal(t, whole.Groups[k].Verdict, g.Verdict)
		require.NotNil(t, whole.Groups[k].Broker)
	}
}

// A three-node cluster restarted node by node, a minute apart: each
// node's sessions fail over to the next node, so the fleet piles onto the
// survivors. Node 1 takes node 0's third; when node 1 restarts, node 2
// takes both; when node 2 restarts, node 0 (back by then) takes the whole
// fleet.
func TestARollingRestartPilesOntoTheSurvivors(t *testing.T) {
	p := model(plan.RollingRestart, "fleet-safe", 3000)
	p.Nodes, p.Gap, p.Outage = 3, time.Minute, 30*time.Second
	r, err := run(p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered)
	require.Len(t, r.Nodes, 3)
	assert.Equal(t, []int64{3000, 1000, 2000}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count})
	assert.Equal(t, int64(6000), r.Broker.Arrivals.Count, "every connect the cluster took, node by node")
	assert.InDelta(t, 150.0, r.BrokerBackS, 0.001, "the last node back at 2 gaps + the outage")

	p.Nodes = 1
	_, err = run(p)
	assert.ErrorContains(t, err, "needs a cluster")
}

// A throttled restart later on the timeline is throttled, at the default
// 100/s where the plan names no rate; a timeline has a length it may not
// pass.
func TestALaterThrottledRestartIsThrottled(t *testing.T) {
	p := model(plan.BrokerRestart, "full", 2000)
	p.Then = []plan.Event{{At: 10 * time.Minute, Scenario: plan.ThrottledRestart, Outage: 30 * time.Second}}
	r, err := run(p)
	require.NoError(t, err)
	require.NotNil(t, r.Limit)
	assert.Equal(t, float64(plan.DefaultThrottle), r.Limit.AdmitRate)
	require.NotNil(t, r.Broker)
	assert.LessOrEqual(t, r.Admitted.PeakPerS1s, float64(plan.DefaultThrottle)+1, "no second admits more than the limit")

	p.Then = make([]plan.Event, 1001)
	for k := range p.Then {
		p.Then[k] = plan.Event{At: time.Duration(k+1) * time.Minute, Scenario: plan.DropAll}
	}
	_, err = run(p)
	assert.ErrorContains(t, err, "at most 1001")
}

// A flapping window on a timeline drops the sessions it admits a flap
// later: each disruption's recovery is the session that stayed, as the
// run's whole recovery counts it. A 20 s window read p50 0.5 s and p99
// 1 s (full jitter), 1.5 and 2 s (the formula) when each recovery took a
// device's first admission after it; the sessions that stayed came 27.2
// and 50.2 s (full) and 23.0 and 24.2 s (the formula) after it began.
func TestARecoveryAfterFlappingIsTheSessionThatStayed(t *testing.T) {
	for _, policy := range []string{"full", "iotcore"} {
		p := model(plan.BrokerRestart, policy, 2000)
		p.Then = []plan.Event{{At: 3 * time.Minute, Scenario: plan.Flapping, Outage: 20 * time.Second}}
		r, err := run(p)
		require.NoError(t, err)
		require.Len(t, r.Disruptions, 2)
		flap := r.Disruptions[1].Recovery
		assert.True(t, flap.AllRecovered)
		assert.GreaterOrEqual(t, flap.P50S, 18.0, "%s: sessions admitted in the window were dropped", policy)
		assert.InDelta(t, r.Recovery.P50S, 180+flap.P50S, 1e-6, "%s: the run's recovery, from the first disruption", policy)
		assert.InDelta(t, r.Recovery.P99S, 180+flap.P99S, 1e-6, policy)
	}
}

// node is a pointer to node k, as a plan's event names one.
func node(k int) *int { return &k }

// A cluster takes a timeline: a rolling restart, then node 0 restarted
// alone, then every node's sessions dropped at once. The rolling restart
// piles the fleet onto node 0 (TestARollingRestartPilesOntoTheSurvivors);
// node 0's restart sends all of it to node 1, and the drop to node 2, the
// next node of every device's list: each node takes exactly that.
func TestAClusterTakesATimeline(t *testing.T) {
	p := model(plan.RollingRestart, "fleet-safe", 3000)
	p.Nodes, p.Gap, p.Outage = 3, time.Minute, 30*time.Second
	p.Then = []plan.Event{
		{At: 5 * time.Minute, Scenario: plan.BrokerRestart, Outage: 30 * time.Second, Node: node(0)},
		{At: 8 * time.Minute, Scenario: plan.DropAll},
	}
	r, err := run(p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered)
	require.Len(t, r.Nodes, 3)
	assert.Equal(t, []int64{3000, 1000 + 3000, 2000 + 3000}, []int64{r.Nodes[0].Arrivals.Count, r.Nodes[1].Arrivals.Count, r.Nodes[2].Arrivals.Count})
	require.Len(t, r.Disruptions, 5, "each node's restart of the rolling restart, node 0's own, the drop")
	for k, at := range []float64{0, 60, 120, 300, 480} {
		d := r.Disruptions[k]
		assert.Equal(t, at, d.AtS)
		assert.True(t, d.Recovery.AllRecovered, "disruption at %v s", at)
	}
	assert.InDelta(t, 150.0, r.BrokerBackS, 0.001, "the rolling restart's last node back")
	assert.Less(t, r.Disruptions[4].Recovery.MaxS, 3.0, "a drop: every device back at its next node within fleet-safe's first wait")
}

// Disruptions of the whole cluster: every node down at once for 30 s
// (nobody back before the cluster), then a rolling restart at 5 minutes,
// then every node flapping for 20 s; each recovery judged on its own, the
// flapping one from the session that stayed, and each reads spread on
// full jitter in every one of 20 seeds (3 under the race detector, which
// slows the judge tenfold; make test's stats step runs all 20).
func TestEveryNodeAtOnceAndARollingRestartLater(t *testing.T) {
	seeds := uint64(20)
	if raceDetector {
		seeds = 3
	}
	for seed := range seeds {
		p := model(plan.BrokerRestart, "full", 1000)
		p.Nodes, p.Seed = 3, seed
		p.Then = []plan.Event{
			{At: 5 * time.Minute, Scenario: plan.RollingRestart, Outage: 30 * time.Second, Gap: time.Minute},
			{At: 9 * time.Minute, Scenario: plan.Flapping, Outage: 20 * time.Second},
		}
		r, err := run(p)
		require.NoError(t, err)
		require.True(t, r.Recovery.AllRecovered)
		require.Len(t, r.Disruptions, 5)
		assert.Equal(t, []float64{0, 300, 360, 420, 540}, []float64{r.Disruptions[0].AtS, r.Disruptions[1].AtS, r.Disruptions[2].AtS,
			r.Disruptions[3].AtS, r.Disruptions[4].AtS})
		assert.GreaterOrEqual(t, r.Disruptions[0].Recovery.P50S, 30.0, "nobody back before the cluster")
		assert.InDelta(t, 30.0, r.BrokerBackS, 0.001, "every node back after the first disruption")
		assert.GreaterOrEqual(t, r.Disruptions[4].Recovery.P50S, 18.0, "the sessions the flapping window admitted were dropped")
		for _, d := range r.Disruptions {
			assert.True(t, d.Recovery.AllRecovered, "seed %d, disruption at %v s", seed, d.AtS)
			assert.Equal(t, stormstats.Spread, d.Verdict, "seed %d, disruption at %v s: %s", seed, d.AtS, d.Fleet.Judgement.Reason)
		}
		for k, n := range r.Nodes {
			assert.Positive(t, n.Arrivals.Count, "node %d", k)
		}
	}
}

// What a cluster's timeline cannot say is refused, naming why.
func TestAClusterTimelineRefusesWhatItCannotRun(t *testing.T) {
	for _, tc := range []struct {
		change func(*plan.Plan)
		want   string
	}{
		{func(p *plan.Plan) { p.Nodes = 1 }, "timeline[1]: node 0: one node's disruption needs a cluster"},
		{func(p *plan.Plan) { p.Then[0].Node = node(3) }, "timeline[1]: node 3: the cluster's nodes are 0 to 2"},
		{func(p *plan.Plan) { p.Then[0].Scenario = plan.RollingRestart; p.Then[0].Gap = time.Minute }, "rolling-restart takes no node"},
		{func(p *plan.Plan) { p.Then[0].Gap = time.Minute }, "timeline[1]: gap 1m0s: a gap is a rolling restart's"},
		{func(p *plan.Plan) {
			p.Then = append([]plan.Event{{At: 3 * time.Minute, Scenario: plan.RollingRestart, Outage: time.Second, Gap: time.Minute}}, p.Then...)
		}, "timeline[1] and timeline[2]: two disruptions begin at 5m0s, which makes them one recovery"},
		{func(p *plan.Plan) { p.Then[0].Scenario = plan.Latency }, "latency breaks the network path, which the virtual engine does not model"},
	} {
		p := model(plan.BrokerRestart, "full", 300)
		p.Nodes = 3
		p.Then = []plan.Event{{At: 5 * time.Minute, Scenario: plan.BrokerRestart, Outage: time.Second, Node: node(0)}}
		require.NoError(t, p.Validate())
		tc.change(&p)
		_, err := run(p)
		assert.ErrorContains(t, err, tc.want)
	}
}

// A throttled restart of a whole cluster brings every node back admitting
// the limit on its own: three nodes behind 100 connects a second each
// admit up to three times that in a second, and 3,000 devices take at
// least 10 s after the outage, not the 30 s one node's limit would take.
// Node 0 restarted alone, throttled, sends its devices to the nodes still
// up, which admit them before the limit holds (from node 0's return): a
// device the disruption left alone is not one the run waits for.
func TestAThrottledClusterAdmitsAtEachNode(t *testing.T) {
	p := model(plan.ThrottledRestart, "full", 3000)
	p.Nodes, p.AdmitRate, p.AdmitBurst = 3, 100, 10
	r, err := run(p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered)
	assert.LessOrEqual(t, r.Admitted.PeakPerS1s, 3*(100.0+10), "no node admits beyond its limit")
	assert.Greater(t, r.Admitted.PeakPerS1s, 100.0+10, "the nodes admit side by side, not one limit between them")
	assert.GreaterOrEqual(t, r.Recovery.MaxS, 30.0+10-0.2, "nobody beats the outage plus devices / (nodes x rate)")

	p.Node = node(0)
	r, err = run(p)
	require.NoError(t, err)
	require.True(t, r.Recovery.AllRecovered, "node 0's 1,000 back; the other 2,000 never left")
	assert.Equal(t, 1000, r.Recovered())
	assert.Less(t, r.Recovery.MaxS, 5.0, "node 0's devices fail over to node 1 at once")
	assert.EqualValues(t, 1000, r.Nodes[1].Arrivals.Count)
}

// A grid cell's run ends once it cannot reach 99 % back by the time its
// p99 is due, whatever the policy: every cell so cut, run again to the end,
// misses its p99 bound (the cut is certain, never a guess), and the cut
// comes for the fleets that come back in waves, well before the bound.
// The cells are the grid's largest, a million devices behind 500 connects
// a second, at 1/250 of the fleet and of the rate.
func TestACellCutEarlyMissesItsP99RunToTheEnd(t *testing.T) {
	if raceDetector {
		t.Skip("42 runs of a model on one goroutine: the stats step runs them without the race detector")
	}
	const devices, rate, capS = 4000, 2.0, 32.0
	ideal := devices / rate
	p99By := time.Duration((60 + 1.2*ideal + capS) * float64(time.Second))
	cell := func(policy string, seed uint64) plan.Plan {
		p := model(plan.ThrottledRestart, policy, devices)
		p.Seed, p.MaxBackoff, p.AdmitRate, p.AdmitBurst = seed, capS*time.Second, rate, 1
		p.Bound = 2*p99By + capS*time.Second
		return p
	}
	cut := 0
	for _, policy := range plan.PolicyNames() {
		if policy == plan.PahoDefault {
			continue
		}
		for seed := uint64(1); seed <= 3; seed++ {
			c := cell(policy, seed)
			require.NoError(t, c.Validate())
			giveUp := &virtual.GiveUp{MaxAfterReturn: math.MaxInt64, P99By: p99By, P99Count: devices * 99 / 100}
			r, _ := virtual.Run(context.Background(), c, virtual.Options{GiveUp: giveUp})
			require.NotNil(t, r)
			if r.Recovery.AllRecovered || r.WatchedS >= p99By.Seconds() {
				continue // not cut before the bound
			}
			t.Logf("%s seed %d: cut at %.0f s, %d up", policy, seed, r.WatchedS, r.Recovered())
			cut++
			c.Bound = p99By + time.Second // far enough to see whether its p99 was met
			whole, _ := virtual.Run(context.Background(), c, virtual.Options{})
			require.NotNil(t, whole)
			met := whole.Recovered() >= giveUp.P99Count && whole.Recovery.P99S <= p99By.Seconds()
			assert.False(t, met, "%s seed %d: cut at %.0f s with %d up, but run to the end its p99 is %.0f s (bound %.0f s)",
				policy, seed, r.WatchedS, r.Recovered(), whole.Recovery.P99S, p99By.Seconds())
			assert.Less(t, r.WatchedS, 0.75*p99By.Seconds(), "%s seed %d: cut late", policy, seed)
		}
	}
	assert.GreaterOrEqual(t, cut, 3*3, "the formula, exponential and constant retry in waves: each is cut")
	t.Logf("%d of the cells cut before their p99 was due", cut)
}

// A grid cell's run also ends once the attempts its devices still down
// are certain to make would take it past its bound: every cell so cut,
// run again to the end, makes more attempts than its bound (the cut is
// certain, never a guess). The cells are the grid's a million devices
// behind 500 connects a second, at 1/250 of the fleet and of the rate,
// whose bound is 1.5 times the attempts a device would make retrying at
// the cap while it waits for its turn; refused over the limit at three
// seeds, held (pause) or accepted and dropped (disconnect) at one.
func TestACellCutOnItsAttemptsMakesMoreRunToTheEnd(t *testing.T) {
	if raceDetector {
		t.Skip("90 runs of a model on one goroutine: the stats step runs them without the race detector")
	}
	const devices, rate, capS = 4000, 2.0, 32.0
	ideal := devices / rate
	budget := int64(1.5 * (1 + ideal/(2*capS)) * devices)
	cut := 0
	for _, mode := range []fault.AdmissionMode{fault.RefuseOverLimit, fault.PauseOverLimit, fault.DisconnectOverLimit} {
		seeds := uint64(1)
		if mode == fault.RefuseOverLimit {
			seeds = 3
		}
		for _, policy := range plan.PolicyNames() {
			if policy == plan.PahoDefault {
				continue
			}
			for seed := uint64(1); seed <= seeds; seed++ {
				cut += cutOnAttempts(t, mode, policy, seed, devices, rate, capS, budget)
			}
		}
	}
	assert.GreaterOrEqual(t, cut, 2*3, "full and decorrelated jitter retry too often for the bound: each is cut")
	t.Logf("%d of the cells cut on attempts still to come", cut)
}

// cutOnAttempts runs one cell of TestACellCutOnItsAttemptsMakesMoreRunToTheEnd
// and, if it was cut on the attempts still to come, again to the end; it
// returns 1 if it was cut.
func cutOnAttempts(t *testing.T, mode fault.AdmissionMode, policy string, seed uint64, devices int, rate, capS float64, budget int64) int {
	t.Helper()
	p := model(plan.ThrottledRestart, policy, devices)
	p.Seed, p.MaxBackoff, p.AdmitRate, p.AdmitBurst, p.AdmitMode = seed, time.Duration(capS)*time.Second, rate, 1, mode
	p.Bound = 3 * time.Duration(float64(devices)/rate) * time.Second
	require.NoError(t, p.Validate())
	giveUp := &virtual.GiveUp{MaxAfterReturn: budget}
	r, _ := virtual.Run(context.Background(), p, virtual.Options{GiveUp: giveUp})
	require.NotNil(t, r)
	if giveUp.Certain == 0 {
		return 0 // not cut on attempts still to come
	}
	made := int64(r.Attempts.AfterReturnPerDeviceMean * float64(devices))
	t.Logf("%v %s seed %d: cut at %.0f s, %d attempts made, at least %d certain, %d up", mode, policy, seed, r.WatchedS, made, giveUp.Certain, r.Recovered())
	assert.LessOrEqual(t, made, budget, "%v %s seed %d: past the bound already, cut for what was certain", mode, policy, seed)
	whole, _ := virtual.Run(context.Background(), p, virtual.Options{})
	require.NotNil(t, whole)
	all := int64(math.Round(whole.Attempts.AfterReturnPerDeviceMean * float64(devices)))
	assert.Greater(t, all, budget, "%v %s seed %d: cut with %d certain, but run to the end it made %d (bound %d)",
		mode, policy, seed, giveUp.Certain, all, budget)
	if whole.Recovery.AllRecovered { // else it made more after its bound
		assert.GreaterOrEqual(t, all, giveUp.Certain, "%v %s seed %d: fewer attempts than were certain", mode, policy, seed)
	}
	return 1
}
