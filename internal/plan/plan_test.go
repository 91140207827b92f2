package plan_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// A child process receives its plan as JSON: everything but the outputs
// comes back as it was.
func TestPlanRoundTripsThroughJSON(t *testing.T) {
	p := plan.Default()
	p.Scenario, p.Transport, p.Engine = plan.ThrottledRestart, plan.TCP, plan.Agents
	p.AdmitRate, p.AdmitBurst, p.AdmitMode = 500, 25, fault.PauseOverLimit
	p.Shard, p.Broker, p.TLSCAKey = plan.Shard{Index: 1, Count: 3}, "tcp://127.0.0.1:1883", "ca.key"
	p.BootSpread = 1500 * time.Millisecond
	p.DisruptAt, p.ReadyDir = plan.DisruptAt{At: time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC)}, "/reports/ready"
	node := 2
	p.Peers, p.Then = []string{"tcp://127.0.0.1:1884"}, []plan.Event{{At: time.Minute, Scenario: plan.RollingRestart, Gap: time.Minute, Node: &node}}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var q plan.Plan
	require.NoError(t, json.Unmarshal(b, &q))
	assert.Equal(t, p, q)

	var bad plan.Plan
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"Scenario":"reboot"}`), &bad), `unknown scenario "reboot"`)
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"Engine":"quantum"}`), &bad), `unknown engine "quantum"`)
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"Transport":"udp"}`), &bad), `unknown transport "udp"`)
}

func TestScenariosSayWhatTheyNeed(t *testing.T) {
	for _, s := range plan.Scenarios {
		_, err := plan.ParseScenario(string(s))
		require.NoError(t, err)
		assert.False(t, s.BreaksPath() && s.BreaksBroker(), s)
		assert.Equal(t, s.Modelled(), s == plan.BootStorm || s == plan.RollingRestart || s.BreaksBroker() || s.Speaks(), s)
		assert.False(t, s.Speaks() && (s.BreaksBroker() || s.BreaksPath()), "%s: what only the in-process broker can say is no fault proxy's", s)
	}
	assert.True(t, plan.Blackhole.BreaksPath())
	assert.True(t, plan.Flapping.BreaksBroker())
	assert.False(t, plan.ConfigOutage.Modelled(), "the config fetch needs real devices")
	assert.False(t, plan.DropAll.HasOutage())
}

func TestProxiedAndItsDescriptors(t *testing.T) {
	p := plan.Default()
	assert.False(t, p.Proxied(), "the in-process broker breaks itself")
	p.Scenario = plan.Blackhole
	assert.True(t, p.Proxied(), "the path's own faults need the proxy")
	assert.Zero(t, p.ProxyDescriptors(), "in memory")
	p.Transport, p.Devices = plan.TCP, 4750
	assert.Equal(t, 4, p.ProxyDescriptors())
	assert.False(t, p.NeedsChildren())
	p.Devices++
	assert.True(t, p.NeedsChildren(), "one more than 19,000 descriptors hold, four a device")
	assert.ErrorContains(t, p.Validate(), "set Plan.Exe")
	p.Exe = "devicesim"
	assert.NoError(t, p.Validate())
}

func TestValidateNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		change func(*plan.Plan)
		want   string
	}{
		{func(p *plan.Plan) { p.Devices = 0 }, "devices must be >= 1"},
		{func(p *plan.Plan) { p.Policy = "hope" }, `unknown policy "hope"`},
		{func(p *plan.Plan) { p.Scenario = "reboot" }, `unknown scenario "reboot"`},
		{func(p *plan.Plan) { p.Engine = plan.Virtual; p.Policy = plan.PahoDefault }, "paho-default runs real paho clients"},
		{func(p *plan.Plan) { p.Engine = plan.Virtual; p.Scenario = plan.Failover }, "failover needs real agents"},
		{func(p *plan.Plan) { p.Scenario = plan.Observe }, "observe records an external broker"},
		{func(p *plan.Plan) { p.AdmitRate, p.AdmitMode = 10, 7 }, "fault: invalid input: mode AdmissionMode(7)"},
		{func(p *plan.Plan) { p.TimeScale = 0.5 }, "time scale must be in [1, 1000]"},
		{func(p *plan.Plan) { p.Outage = 0 }, "outage must be > 0"},
		{func(p *plan.Plan) { p.KeepAlive = 500 * time.Millisecond }, "keepalive must be at least 1s"},
		{func(p *plan.Plan) { p.Shard = plan.Shard{Index: 0, Count: 2} }, "a shard runs part of a fleet against a shared external broker"},
		{func(p *plan.Plan) { p.MQTT5, p.Policy = true, plan.PahoDefault }, "paho-default is paho's 3.1.1 client"},
		{func(p *plan.Plan) { p.Scenario, p.BusyCode = plan.BusyNode, 0x05 }, "busy code: an MQTT 5 refusal's code is 0x80 or more"},
		{func(p *plan.Plan) { p.Scenario, p.AdmitRate, p.AdmitCode = plan.RateLimited, 10, 0x03 }, "an MQTT 5 refusal's code is 0x80 or more"},
		{func(p *plan.Plan) { p.Scenario, p.Broker = plan.RateLimited, "tcp://127.0.0.1:1883" }, "only the in-process broker sends"},
		{func(p *plan.Plan) { p.Scenario, p.Nodes, p.Gap = plan.RollingDrain, 3, 0 }, "rolling-drain: the gap between nodes must be > 0"},
		{func(p *plan.Plan) { p.Scenario, p.Gap = plan.RollingDrain, time.Minute }, "a rolling-drain needs a cluster: nodes >= 2, got 1"},
	} {
		p := plan.Default()
		require.NoError(t, p.Validate())
		tc.change(&p)
		assert.ErrorContains(t, p.Validate(), tc.want)
	}
}

func TestShardSizesAddUp(t *testing.T) {
	for _, devices := range []int{0, 1, 7, 1000, 1001} {
		total := 0
		for i := range 3 {
			s := plan.Shard{Index: i, Count: 3}
			assert.Len(t, s.IDs(devices), s.Size(devices))
			total += s.Size(devices)
		}
		assert.Equal(t, devices, total)
	}
}

func ExamplePlan() {
	p := plan.Default()
	p.Engine, p.Devices, p.Policy = plan.Virtual, 1_000_000, "fleet-safe"
	p.Scenario, p.AdmitRate, p.AdmitBurst = plan.ThrottledRestart, 10_000, 500
	fmt.Println(p.Validate(), p.Scenario, p.Admission())
	need, fit, _ := strings.Cut(p.CheckFits(300<<20).Error(), "; ")
	fmt.Println(need)
	fmt.Println(fit)
	// Output:
	// <nil> throttled-restart {10000 500 refuse 0}
	// 1,000,000 devices on the virtual engine need about 363 MiB (about 112 bytes a device)
	// this machine has 300 MiB available: at most 411,940 fit
}

// A group takes the fleet's settings where it names none, and is held to
// the same rules; every group takes the fleet's transport.
func TestGroupsResolveToTheFleetsSettings(t *testing.T) {
	p := plan.Default()
	p.Devices, p.KeepAlive, p.Telemetry = 30, 20*time.Second, 0.5
	none := 0
	p.Groups = []plan.Group{{Name: "a", Devices: 10}, {Name: "b", Devices: 20, RetryCap: &none, KeepAlive: 45 * time.Second}}
	require.NoError(t, p.Validate())
	g := p.GroupsOrWhole()
	assert.Equal(t, "iotcore", g[0].Policy)
	assert.Equal(t, []time.Duration{20 * time.Second, 45 * time.Second}, []time.Duration{g[0].KeepAlive, g[1].KeepAlive})
	assert.Equal(t, []int{-1, 0}, []int{*g[0].RetryCap, *g[1].RetryCap}, "forever, the fleet's; none, its own")
	assert.Equal(t, []float64{0.5, 0.5}, []float64{*g[0].Telemetry, *g[1].Telemetry})
	assert.True(t, p.HasTelemetry())

	bad := -3
	for _, tc := range []struct {
		change func(*plan.Group)
		want   string
	}{
		{func(g *plan.Group) { g.RetryCap = &bad }, "group 1 (b): retry cap must be >= 0 or forever"},
		{func(g *plan.Group) { g.KeepAlive = time.Millisecond }, "group 1 (b): keepalive must be at least 1s"},
		{func(g *plan.Group) { g.Transport = plan.TCP }, "group 1 (b): transport tcp beside the fleet's mem"},
		{func(g *plan.Group) { g.Telemetry = new(float64); *g.Telemetry = 5000 }, "group 1 (b): telemetry rate must be 0 to 1000"},
	} {
		q := p
		q.Groups = []plan.Group{p.Groups[0], p.Groups[1]}
		tc.change(&q.Groups[1])
		assert.ErrorContains(t, q.Validate(), tc.want)
	}
}

// A cluster's timeline as the engines make it: a rolling restart is its
// nodes' restarts one gap apart, each a disruption of its own, in order of
// time among the timeline's others.
func TestStrikesAreTheTimelineNodeByNode(t *testing.T) {
	one := 1
	p := plan.Default()
	p.Nodes, p.Scenario, p.Gap = 3, plan.RollingRestart, time.Minute
	p.Then = []plan.Event{
		{At: 90 * time.Second, Scenario: plan.DropAll},
		{At: 5 * time.Minute, Scenario: plan.BrokerRestart, Outage: 10 * time.Second, Node: &one},
	}
	require.NoError(t, p.Validate())
	var got []string
	for _, s := range p.Strikes() {
		got = append(got, fmt.Sprintf("%v %s node %d of %d", s.At, s.Event.Scenario, s.Node, s.Of))
	}
	assert.Equal(t, []string{"0s broker-restart node 0 of 0", "1m0s broker-restart node 1 of 0", "1m30s drop-all node -1 of 1",
		"2m0s broker-restart node 2 of 0", "5m0s broker-restart node 1 of 2"}, got)
	assert.Equal(t, 2*time.Minute+30*time.Second, p.FirstReturn(), "the rolling restart's last node back")
	assert.Equal(t, 5*time.Minute, p.LastStrike())

	q := plan.Default()
	q.Then = []plan.Event{{At: time.Minute, Scenario: plan.DropAll}}
	assert.Equal(t, 30*time.Second, q.FirstReturn())
	assert.Len(t, q.Strikes(), 2)
	assert.Equal(t, plan.AllNodes, q.Strikes()[1].Node)
}

func TestAClusterSaysWhatItCannotRun(t *testing.T) {
	zero := 0
	for _, tc := range []struct {
		change func(*plan.Plan)
		want   string
	}{
		{func(p *plan.Plan) { p.Nodes, p.Scenario = 3, plan.Failover }, "failover is not a cluster's disruption"},
		{func(p *plan.Plan) { p.Node = &zero }, "timeline[0]: node 0: one node's disruption needs a cluster"},
		{func(p *plan.Plan) { p.Nodes, p.Broker = 3, "tcp://127.0.0.1:1883" }, "an external cluster names each node's URL instead"},
		{func(p *plan.Plan) {
			p.Broker, p.Peers = "tcp://127.0.0.1:1883", []string{"ssl://127.0.0.1:8883"}
		}, "an external cluster's nodes are all over TLS or all not"},
		{func(p *plan.Plan) { p.Broker, p.Peers = "tcp://127.0.0.1:1883", []string{"127.0.0.1:1884"} }, `broker "127.0.0.1:1884": the fault proxy takes`},
		{func(p *plan.Plan) { p.Then = []plan.Event{{At: time.Minute, Scenario: plan.DropAll, Gap: time.Minute}} }, "timeline[1]: gap 1m0s: a gap is a rolling restart's"},
	} {
		p := plan.Default()
		require.NoError(t, p.Validate())
		tc.change(&p)
		assert.ErrorContains(t, p.Validate(), tc.want)
	}
	p := plan.Default()
	p.Broker, p.Peers, p.Scenario, p.Gap = "tcp://127.0.0.1:1883", []string{"tcp://127.0.0.1:1884", "tcp://127.0.0.1:1885"}, plan.RollingRestart, time.Minute
	require.NoError(t, p.Validate())
	assert.True(t, p.Proxied(), "an external cluster's rolling restart is its nodes' proxies' outages")
	assert.Equal(t, 3, p.ClusterNodes())
	assert.Equal(t, []string{"tcp://127.0.0.1:1883", "tcp://127.0.0.1:1884", "tcp://127.0.0.1:1885"}, p.Brokers())
}

// What one process holds follows the host's descriptors: 95 % of them,
// two a TCP device; 20,000 where none were read.
func TestTheDescriptorBudgetIsTheHosts(t *testing.T) {
	p := plan.Default()
	assert.Equal(t, 19_000, p.DescriptorBudget())
	assert.Equal(t, 9_500, p.MaxTCPDevices())
	p.Descriptors = 1 << 20
	assert.Equal(t, 996_147, p.DescriptorBudget())
	p.Transport, p.Devices, p.Exe = plan.TCP, 20_000, ""
	assert.False(t, p.NeedsChildren(), "a million descriptors hold 20,000 devices in one process")
	p.Descriptors = 4096
	assert.True(t, p.NeedsChildren())
	assert.ErrorContains(t, p.Validate(), "more descriptors than this process may use (3891)")
}
