package fleetsim_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

func TestMain(m *testing.M) {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	goleak.VerifyTestMain(m)
}

// modelled is a plan for the virtual engine.
func modelled(scenario plan.Scenario, policy string, devices int) plan.Plan {
	p := plan.Default()
	p.Engine, p.Devices, p.Scenario, p.Policy = plan.Virtual, devices, scenario, policy
	return p
}

func small(scenario plan.Scenario, policy string) plan.Plan {
	p := plan.Default()
	p.Devices, p.Scenario, p.Policy, p.TimeScale = 60, scenario, policy, 50
	return p
}

func TestBrokerRestartWithoutJitterComesBackInWaves(t *testing.T) {
	r, err := inVirtualTime(t, small(plan.BrokerRestart, "exponential"))
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	// Waits of 1, 2, 4, 8 and 16 s: rounds at 1, 3, 7, 15 and 31 s, the
	// broker back at 30 s, everyone back in the fifth round.
	assert.Equal(t, 31.0, r.Recovery.P50S)
	assert.Equal(t, 31.0, r.Recovery.MaxS)
	assert.Equal(t, int64(5*60), r.Attempts.Total, "without jitter every device makes the same 5 attempts")
	assert.Equal(t, 1.0, r.Attempts.AfterReturnPerDeviceMean)
	assert.Equal(t, stormstats.Waves, r.Verdict, r.Fleet.Judgement.Reason)
	require.Len(t, r.Fleet.Judgement.Bursts, 5, r.Fleet.Judgement.Reason)
	for i, at := range []float64{1, 3, 7, 15, 31} {
		assert.EqualValues(t, 60, r.Fleet.Judgement.Bursts[i].Count, "round %d: the whole fleet", i+1)
		assert.InDelta(t, at, r.Fleet.Judgement.Bursts[i].AtS, 0.01, "round %d", i+1)
	}
	assert.Greater(t, r.Fleet.Judgement.Synchrony, 0.5)
	assert.Zero(t, r.Host.LagP99S, "in virtual time every attempt leaves on schedule")
	require.NotNil(t, r.Broker)
	assert.EqualValues(t, 60, r.Broker.Arrivals.Count, "the broker saw only the round after its return")

	dir := t.TempDir()
	require.NoError(t, r.WriteFiles(dir))
	var doc map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	for _, k := range []string{"scenario", "policy", "engine", "transport", "devices", "seed", "time_scale",
		"recovery", "attempts", "fleet", "broker", "admitted", "verdict"} {
		assert.Contains(t, doc, k)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "events.csv"))
	require.NoError(t, err)
	assert.Equal(t, 1+300, strings.Count(string(csv), "\n"), "a header and one row per attempt the devices made")
	svg, err := os.ReadFile(filepath.Join(dir, "arrivals.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "exponential: waves, 5 bursts", "the panel's title names the policy, its verdict and its bursts")
	assert.Contains(t, string(svg), "what reached the broker", "and the broker's side is a line of its own")
	assert.Contains(t, string(svg), "the outage, until the broker was back", "the outage shaded")
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), "<svg", "the chart is inline")
	assert.NotContains(t, string(html), "<?xml")
	assert.Contains(t, string(html), `<td class="waves">waves</td>`)
	assert.Contains(t, string(html), "the broker came back at 30.0")
}

func TestCompareChartHasOneSeriesPerPolicy(t *testing.T) {
	var reports []*report.Report
	for _, p := range []string{"exponential", "full"} {
		r, err := fleetsim.Run(context.Background(), modelled(plan.DropAll, p, 200))
		require.NoError(t, err)
		reports = append(reports, r)
	}
	svg, err := report.ChartSVG(reports)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "exponential: spread", "a panel a policy, one above the other")
	assert.Contains(t, string(svg), "full: spread")
	assert.Contains(t, string(svg), "what reached the broker")
	assert.NotContains(t, string(svg), "the outage, until the broker was back", "drop-all has no outage to shade")
	dir := t.TempDir()
	require.NoError(t, report.WriteCharts(dir, reports))
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(html), "<tr><td>"), "one table row per policy")
	assert.Contains(t, string(html), "one burst, not repeated: 200 arrivals within", "the unjittered fleet's one burst, stated")

	// A compare run frees each run's events once written; the chart is
	// drawn from the histograms kept instead, to the same picture.
	for _, r := range reports {
		r.DropEvents()
	}
	after, err := report.ChartSVG(reports)
	require.NoError(t, err)
	assert.Equal(t, string(svg), string(after))
	assert.Error(t, reports[0].WriteFiles(t.TempDir()), "an events.csv without its events would be a lie")
}

func TestDropAllWithFullJitterRecovers(t *testing.T) {
	r, err := inVirtualTime(t, small(plan.DropAll, "full"))
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	assert.Equal(t, 1.0, r.Attempts.PerDeviceMean, "the broker stayed up: every first retry is admitted")
	assert.Less(t, r.Recovery.MaxS, 1.0, "the first retry waits U[0, 1 s)")
}

func TestInvalidConfigIsAnError(t *testing.T) {
	for name, mod := range map[string]func(*plan.Plan){
		"no devices":     func(p *plan.Plan) { p.Devices = 0 },
		"scenario":       func(p *plan.Plan) { p.Scenario = "meteor" },
		"policy":         func(p *plan.Plan) { p.Policy = "hope" },
		"time scale":     func(p *plan.Plan) { p.TimeScale = 0 },
		"outage":         func(p *plan.Plan) { p.Outage = 0 },
		"max backoff":    func(p *plan.Plan) { p.MaxBackoff = time.Millisecond },
		"negative retry": func(p *plan.Plan) { p.RetryCap = -5 },
		"keepalive under a second": func(p *plan.Plan) {
			p.Scenario, p.KeepAlive = plan.Blackhole, 500*time.Millisecond
		},
		"no latency": func(p *plan.Plan) { p.Scenario, p.Latency, p.LatencyJitter = plan.Latency, 0, 0 },
		"the proxy in the virtual engine": func(p *plan.Plan) {
			p.Scenario, p.Engine = plan.Blackhole, plan.Virtual
		},
		"more descriptors than the machine has": func(p *plan.Plan) {
			p.Scenario, p.Broker, p.Devices = plan.DropAll, "tcp://127.0.0.1:1883", 7000
		},
		"a broker URL the proxy cannot stand in front of": func(p *plan.Plan) {
			p.Scenario, p.Broker = plan.DropAll, "ws://127.0.0.1:8080"
		},
		"config-outage against an external broker": func(p *plan.Plan) {
			p.Scenario, p.Broker = plan.ConfigOutage, "tcp://127.0.0.1:1883"
		},
	} {
		p := plan.Default()
		mod(&p)
		_, err := fleetsim.Run(context.Background(), p)
		assert.Error(t, err, name)
	}
}

func TestThrottledRestartReportsTheLimit(t *testing.T) {
	p := small(plan.ThrottledRestart, "full")
	p.AdmitRate = 20 // 60 devices: 3 s at best once the broker is back
	r, err := inVirtualTime(t, p)
	require.NoError(t, err)
	require.NotNil(t, r.Limit)
	assert.Equal(t, 20.0, r.Limit.AdmitRate)
	assert.Equal(t, 3.0, r.Limit.IdealRecoveryS)
	assert.GreaterOrEqual(t, r.Recovery.MaxS, 30.0+59.0/20, "nobody beats the outage plus (devices-1)/rate")
	assert.Positive(t, r.Attempts.Refused)
	var sb strings.Builder
	r.Summary(&sb)
	assert.Contains(t, sb.String(), "ideal recovery 3.0 s")
}

func TestBootStormSpreadsOverTheBootSpread(t *testing.T) {
	p := small(plan.BootStorm, "iotcore")
	p.Devices = 200
	r, err := inVirtualTime(t, p)
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	assert.Less(t, r.Recovery.MaxS, 10.0, "everyone connects inside the 10 s boot spread")
	assert.Equal(t, 1.0, r.Attempts.PerDeviceMean, "an unthrottled broker takes each device's first attempt")
	assert.Equal(t, stormstats.Spread, r.Verdict, r.Fleet.Judgement.Reason)
}

func TestCompareTable(t *testing.T) {
	var sb strings.Builder
	report.CompareTable(&sb, []*report.Report{{Setup: report.Setup{Policy: "iotcore"}, Findings: report.Findings{Verdict: stormstats.Waves}}})
	assert.Contains(t, sb.String(), "recovery p99")
	assert.Contains(t, sb.String(), "iotcore")
}

// Real agents in a mixed fleet: each group runs its own policy and is
// reported on its own; the unjittered group comes back in lock-step
// rounds, the fleet-safe one spread.
func TestRealAgentsInAMixedFleet(t *testing.T) {
	p := small(plan.BrokerRestart, "exponential")
	p.Devices = 300
	p.Groups = []plan.Group{{Name: "old", Devices: 150, Policy: "exponential"}, {Name: "new", Devices: 150, Policy: "fleet-safe"}}
	r, err := inVirtualTime(t, p)
	require.NoError(t, err)
	require.Len(t, r.Groups, 2)
	assert.Equal(t, stormstats.Waves, r.Groups[0].Verdict)
	assert.InDelta(t, 31.0, r.Groups[0].Recovery.MaxS, 0.001, "1, 2, 4, 8, 16 s waits: everyone back at 31 s")
	assert.Equal(t, "fleet-safe", r.Groups[1].Policy)
	assert.NotEqual(t, 31.0, r.Groups[1].Recovery.MaxS)
	assert.Equal(t, r.Attempts.Total, r.Groups[0].Attempts.Total+r.Groups[1].Attempts.Total)
}
