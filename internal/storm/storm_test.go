package storm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/fileline"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/storm"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/reconnect"
)

func read(t *testing.T, text string) (*storm.File, error) {
	t.Helper()
	return storm.Read(strings.NewReader(text), nil)
}

// examples/default.yaml is devicesim run with no flags: the default plan,
// the formula against fleet-safe.
func TestTheDefaultExampleIsTheDefaultRun(t *testing.T) {
	b, err := os.ReadFile("../../examples/default.yaml")
	require.NoError(t, err)
	f, err := read(t, string(b))
	require.NoError(t, err)
	p, why, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, "the file names it", why)
	assert.Equal(t, plan.Default(), p)
	assert.Equal(t, []string{"iotcore", "fleet-safe"}, f.Compare)
}

func TestAFileMapsOntoThePlan(t *testing.T) {
	f, err := read(t, `
seed: 7
fleet:
  - name: field
    devices: 5000
    policy: full
    max_backoff: 64s
    retry_cap: 12
    boot_spread: 20s
    keepalive: 45s
    telemetry: 0.5
    transport: tcp
    labels: {firmware: "2.1"}
brokers:
  admission: {rate: 500, burst: 25, mode: pause}
timeline:
  - at: 0s
    disruption: throttled-restart
    outage: 2m
    watch: 20m
expect: {verdict: spread, recovery_p99: 5m, attempts_per_device: 8, broker_busiest_second: 2000, no_telemetry_lost: true}
`)
	require.NoError(t, err)
	p, why, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, plan.Agents, p.Engine, why)
	assert.Contains(t, why, "needs real devices", "telemetry and TCP")
	assert.Equal(t, 5000, p.Devices)
	assert.Equal(t, "full", p.Policy)
	assert.Equal(t, 64*time.Second, p.MaxBackoff)
	assert.Equal(t, 12, p.RetryCap)
	assert.Equal(t, 20*time.Second, p.BootSpread)
	assert.Equal(t, 45*time.Second, p.KeepAlive)
	assert.Equal(t, plan.TCP, p.Transport)
	assert.Equal(t, plan.ThrottledRestart, p.Scenario)
	assert.Equal(t, 2*time.Minute, p.Outage)
	assert.Equal(t, 20*time.Minute, p.Bound)
	assert.Equal(t, fault.Admission{Rate: 500, Burst: 25, Mode: fault.PauseOverLimit}, p.Admission())
	assert.Equal(t, uint64(7), p.Seed)
	assert.Equal(t, 1.0, p.TimeScale)
	assert.Equal(t, "2.1", f.Fleet[0].Labels["firmware"])

	f, err = read(t, "fleet: [{devices: 10, retry_cap: 0}]\ntimeline: [{disruption: drop-all}]")
	require.NoError(t, err)
	p, _, err = f.Plan()
	require.NoError(t, err)
	assert.Equal(t, 0, p.RetryCap, "no retries, as written: not the default forever")
}

func TestTheRunChoosesTheEngineAndSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		text   string
		engine plan.Engine
		why    string
	}{
		{"fleet: [{devices: 2000}]\ntimeline: [{disruption: drop-all}]", plan.Virtual, "the model runs all of this storm; engine: agents"},
		{"fleet: [{devices: 1000000}]\ntimeline: [{disruption: drop-all}]", plan.Virtual, "the model runs all"},
		{"fleet: [{devices: 100, telemetry: 1}]\ntimeline: [{disruption: drop-all}]", plan.Agents, "needs real devices: -broker, -shard, -telemetry"},
		{"fleet: [{devices: 100, transport: tcp}]\ntimeline: [{disruption: drop-all}]", plan.Agents, "needs real devices"},
		{"fleet: [{devices: 100}]\ntimeline: [{disruption: blackhole}]", plan.Agents, "needs real devices"},
		{"fleet: [{devices: 100, policy: paho-default}]\ntimeline: [{disruption: drop-all}]", plan.Agents, "paho-default runs real paho clients"},
		{"fleet: [{devices: 2000}]\nbrokers: {nodes: 3}\ntimeline: [{disruption: rolling-restart, gap: 1m}]", plan.Virtual, "the model runs all"},
		{"fleet: [{devices: 1000000}]\ntimeline: [{disruption: drop-all}, {at: 5m, disruption: latency, latency: 1s}]", plan.Agents,
			"the agents engine runs it"},
	} {
		f, err := read(t, tc.text)
		require.NoError(t, err)
		p, why, err := f.Plan()
		require.NoError(t, err, tc.text) // what the host holds is checked when the run starts
		assert.Equal(t, tc.engine, p.Engine, tc.text)
		assert.Contains(t, why, tc.why, tc.text)
	}
}

// Every mistake is an error that names where it is: an unknown key, a
// wrong type, a time without its unit, a value the plan refuses.
func TestMistakesNameTheLineAndTheField(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"fleet: [{devices: 10, polcy: full}]\ntimeline: [{disruption: drop-all}]", `line 1, column 23: unknown field "polcy"`},
		{"fleet:\n  - devices: ten\ntimeline: [{disruption: drop-all}]", "line 2, column 14"},
		{"fleet: [{devices: 10, max_backoff: 32}]\ntimeline: [{disruption: drop-all}]", "line 1, column 36"},
		{"fleet: [{devices: 10}]\ntimeline: [{disruption: reboot}]", `unknown scenario "reboot"`},
		{"fleet: [{devices: 10, retry_cap: sometimes}]\ntimeline: [{disruption: drop-all}]", "retry_cap: want a count >= 0 or forever"},
		{"fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all}]\nexpect: {verdict: calm}", ""},
	} {
		f, err := read(t, tc.text)
		if err == nil {
			_, _, err = f.Plan()
		}
		if tc.want == "" {
			assert.NoError(t, err, tc.text) // checked when the run compares it
			continue
		}
		require.Error(t, err, tc.text)
		assert.ErrorIs(t, err, storm.ErrInvalid, tc.text)
		assert.Contains(t, err.Error(), tc.want, tc.text)
		if strings.HasPrefix(tc.want, "line ") {
			var at *fileline.Error
			require.ErrorAs(t, err, &at, tc.text)
			assert.Positive(t, at.Line, tc.text)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"fleet: [{name: a, devices: 10}, {name: b, devices: 20, retry_after_jitter: 5s}]\ntimeline: [{disruption: drop-all}]", "retry_after_jitter is the fleet's"},
		{"fleet: [{name: a, devices: 10}, {name: b, devices: 20, transport: tcp}]\ntimeline: [{disruption: drop-all}]", "listens on one transport"},
		{"fleet: [{name: a, devices: 10}, {name: b, devices: 20, telemetry: 1}]\nengine: virtual\ntimeline: [{disruption: drop-all}]", "need real devices"},
		{"fleet: [{name: a, devices: 10}, {devices: 20}]\ntimeline: [{disruption: drop-all}]", "needs a name"},
		{"fleet: [{devices: 10}]\nengine: virtual\ntimeline: [{disruption: drop-all}, {at: 5m, disruption: latency}]", "the agents engine runs it"},
		{"fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all}, {at: 5m, disruption: failover}]", "failover cannot follow on a timeline"},
		{"fleet: [{devices: 10}]\ntimeline: [{at: 1m, disruption: drop-all}]", "the first disruption starts at 0s"},
		{"fleet: [{devices: 10, boot_window: 5s}]\ntimeline: [{disruption: drop-all}]", "fleet[0].boot_window is now boot_spread"},
		{"fleet: [{devices: 10, expect: {busiest_second: 9}}]\ntimeline: [{disruption: drop-all}]",
			"fleet[0].expect.busiest_second: say which side it bounds: broker_busiest_second"},
		{"timeline: [{disruption: drop-all}]", "fleet: name at least one group"},
		{"fleet: [{devices: 0}]\ntimeline: [{disruption: drop-all}]", "devices must be >= 1"},
		{"fleet: [{devices: 10}]\ntimeline: [{disruption: broker-restart, outage: 0s}]", "outage must be > 0"},
		{"fleet: [{devices: 10}]\nbrokers: {admission: {rate: 10, mode: hold}}\ntimeline: [{disruption: drop-all}]", `unknown admission mode "hold"`},
		{"fleet: [{devices: 10}]\ncompare: [iotcore, hope]\ntimeline: [{disruption: drop-all}]", `compare hope: unknown policy "hope"`},
	} {
		f, err := read(t, tc.text)
		require.NoError(t, err, tc.text)
		_, _, err = f.Plan()
		assert.ErrorIs(t, err, storm.ErrInvalid, tc.text)
		assert.ErrorContains(t, err, tc.want, tc.text)
	}
}

func TestExpectationsHoldOrFail(t *testing.T) {
	r := &report.Report{Setup: report.Setup{Policy: "full"}, Findings: report.Findings{Verdict: stormstats.Spread,
		Recovery: report.Recovery{P99S: 61, AllRecovered: true}, Attempts: report.Attempts{PerDeviceMean: 3.5},
		Fleet:  report.Side{Arrivals: stormstats.Arrivals{PeakPerS1s: 900}},
		Broker: &report.Side{Arrivals: stormstats.Arrivals{PeakPerS1s: 480}}}, Measures: report.Measures{Telemetry: &report.Telemetry{Lost: 2}}}
	e := storm.Expect{Verdict: "spread", RecoveryP99: time.Minute, AttemptsPerDevice: 4, BrokerBusiestSecond: 500,
		FleetBusiestSecond: 800, NoTelemetryLost: true}
	got := e.Check(r)
	var pass []bool
	for _, x := range got {
		pass = append(pass, x.Pass)
	}
	assert.Equal(t, []bool{true, false, true, true, false, false}, pass, "%+v", got)
	assert.False(t, storm.Passed(got))
	var table bytes.Buffer
	storm.Table(&table, "full", got)
	assert.Contains(t, table.String(), "FAIL  recovery p99")
	assert.Contains(t, table.String(), "pass  busiest second at the broker (connects that reached it) want <= 500")
	assert.Contains(t, table.String(), "FAIL  busiest second of the fleet (every dial) want <= 800")

	r.Broker = nil // a run that did not see the broker's side fails a bound on it
	got = storm.Expect{BrokerBusiestSecond: 500}.Check(r)
	require.Len(t, got, 1)
	assert.False(t, got[0].Pass)
	assert.Equal(t, "this run did not see the broker's side", got[0].Got)
	assert.Empty(t, storm.Expect{}.Check(r), "no expectation, nothing checked")
	assert.True(t, storm.Passed(nil))
}

// The JSON Schema editors use says what the decoder takes: every example
// validates against it, and it names every key the decoder knows.
func TestTheSchemaMatchesTheDecoder(t *testing.T) {
	schemaFile, err := os.Open("../../docs/storm.schema.json")
	require.NoError(t, err)
	defer schemaFile.Close()
	doc, err := jsonschema.UnmarshalJSON(schemaFile)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("storm.schema.json", doc))
	schema, err := c.Compile("storm.schema.json")
	require.NoError(t, err)

	examples, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	for _, path := range append(examples, "../../deploy/storm.yaml", "../../examples/wire-100k/storm.yaml") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		js, err := yaml.YAMLToJSON(b)
		require.NoError(t, err)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
		require.NoError(t, err)
		assert.NoError(t, schema.Validate(v), path)
	}
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"fleet":[{"devices":10,"max_backoff":32}],"timeline":[{"disruption":"drop-all"}]}`))
	assert.Error(t, schema.Validate(bad), "a time without its unit")

	raw, err := os.ReadFile("../../docs/storm.schema.json")
	require.NoError(t, err)
	for _, key := range yamlKeys(reflect.TypeFor[storm.File]()) {
		if key == "busiest_second" || key == "boot_window" { // read only to be refused, naming the new
			assert.NotContains(t, string(raw), `"`+key+`"`)
			continue
		}
		assert.Contains(t, string(raw), `"`+key+`"`, "the schema names %s", key)
	}
}

// yamlKeys lists every yaml key of t's fields, nested structs included.
func yamlKeys(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if k := f.Tag.Get("yaml"); k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		keys = append(keys, yamlKeys(f.Type)...)
	}
	return keys
}

// Groups make a mixed fleet: the plan's groups add up to the fleet, and
// each group's expectations are checked against its own figures.
func TestAMixedFleetAndItsGroupsExpectations(t *testing.T) {
	f, err := read(t, `
fleet:
  - {name: old, devices: 700, policy: iotcore, expect: {verdict: waves}}
  - {name: new, devices: 300, policy: fleet-safe, max_backoff: 64s, expect: {verdict: spread, attempts_per_device: 3}}
timeline: [{disruption: drop-all}]
expect: {verdict: waves}
`)
	require.NoError(t, err)
	p, _, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, 1000, p.Devices)
	require.Len(t, p.Groups, 2)
	assert.Equal(t, []string{"old", "new"}, []string{p.Groups[0].Name, p.Groups[1].Name})
	assert.Equal(t, []string{"iotcore", "fleet-safe"}, []string{p.Groups[0].Policy, p.Groups[1].Policy})
	assert.Equal(t, []time.Duration{32 * time.Second, 64 * time.Second}, []time.Duration{p.Groups[0].MaxBackoff, p.Groups[1].MaxBackoff})
	assert.Equal(t, []int{700, 300}, []int{p.Groups[0].Devices, p.Groups[1].Devices})
	r := &report.Report{Findings: report.Findings{Verdict: stormstats.Waves}, Parts: report.Parts{Groups: []report.GroupReport{
		{Name: "old", Verdict: stormstats.Waves}, {Name: "new", Verdict: stormstats.Spread, Attempts: report.Attempts{PerDeviceMean: 4}}}}}
	got := f.CheckAll(r)
	require.Len(t, got, 4)
	assert.Equal(t, "new: attempts per device", got[3].What)
	assert.False(t, got[3].Pass)
	assert.True(t, got[0].Pass && got[1].Pass && got[2].Pass, "%+v", got)
}

// A pipeline names its own broker through the environment; a name it does
// not set is an error, never an empty setting.
func TestTheEnvironmentNamesTheBroker(t *testing.T) {
	text := "fleet: [{devices: 10}]\nbrokers: {external: {url: \"${MQTT_BROKER}\"}}\ntimeline: [{disruption: drop-all}]"
	f, err := storm.Read(strings.NewReader(text), func(k string) string { return map[string]string{"MQTT_BROKER": "tcp://10.0.0.9:1883"}[k] })
	require.NoError(t, err)
	assert.Equal(t, "tcp://10.0.0.9:1883", f.Brokers.External.URL)
	_, err = storm.Read(strings.NewReader(text), nil)
	assert.ErrorContains(t, err, "names ${MQTT_BROKER}, which the environment does not set")
}

// A shard of an Indexed Job reads its slice from the environment, and
// when to strike, and where to meet the others, from the file.
func TestAShardReadsItsSliceAndItsStrikeFromTheFile(t *testing.T) {
	text := "fleet: [{devices: 100000}]\nbrokers: {external: {url: tcp://mqtt:1883, shard: \"${JOB_COMPLETION_INDEX}/10\", " +
		"ready_dir: /reports/ready}}\ndisrupt_at: +90s\ntimeline: [{disruption: broker-restart, outage: 30s}]"
	f, err := storm.Read(strings.NewReader(text), func(k string) string { return map[string]string{"JOB_COMPLETION_INDEX": "7"}[k] })
	require.NoError(t, err)
	p, _, err := f.Plan()
	require.NoError(t, err, "10,000 agents a shard: the host is the pod's, checked when it runs")
	assert.Equal(t, plan.Shard{Index: 7, Count: 10}, p.Shard)
	assert.Equal(t, 90*time.Second, p.DisruptAt.After)
	assert.Equal(t, "/reports/ready", p.ReadyDir)

	f, err = storm.Read(strings.NewReader(strings.Replace(text, "+90s", "soon", 1)), func(string) string { return "7" })
	require.NoError(t, err)
	_, _, err = f.Plan()
	assert.ErrorContains(t, err, "disrupt_at")
	f, err = storm.Read(strings.NewReader(strings.Replace(text, "disrupt_at: +90s\n", "", 1)), func(string) string { return "7" })
	require.NoError(t, err)
	_, _, err = f.Plan()
	assert.ErrorContains(t, err, "each of 10 shards would strike broker-restart when its own fleet is up")
}

// A mixed fleet's groups differ in everything the agent's configuration
// has: each group takes what it writes, and the key's default (not the
// first group's) where it writes nothing.
func TestGroupsDifferInEverythingTheAgentHas(t *testing.T) {
	f, err := read(t, `
fleet:
  - {name: old, devices: 700, policy: iotcore, retry_cap: 5, boot_spread: 30s, keepalive: 60s, ping_timeout: 20s, telemetry: 0.5,
     labels: {firmware: "1.9"}}
  - {name: new, devices: 300, policy: fleet-safe, labels: {firmware: "2.1"}}
timeline: [{disruption: drop-all}]
`)
	require.NoError(t, err)
	p, why, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, plan.Agents, p.Engine, "telemetry needs real devices: "+why)
	old, young := p.Groups[0], p.Groups[1]
	assert.Equal(t, 5, *old.RetryCap)
	assert.Equal(t, reconnect.RetryForever, *young.RetryCap, "the default, not the first group's")
	assert.Equal(t, []time.Duration{30 * time.Second, 60 * time.Second, 20 * time.Second}, []time.Duration{old.BootSpread, old.KeepAlive, old.PingTimeout})
	assert.Equal(t, []time.Duration{0, 30 * time.Second, 10 * time.Second}, []time.Duration{young.BootSpread, young.KeepAlive, young.PingTimeout})
	assert.Equal(t, []float64{0.5, 0}, []float64{*old.Telemetry, *young.Telemetry})
	assert.Equal(t, "2.1", young.Labels["firmware"])
	assert.True(t, p.HasTelemetry())
	assert.InDelta(t, 0.35, p.TelemetryRate(), 1e-9)
}

// A group may speak MQTT 5 and honour or ignore what the broker says; the
// admission's refusals and a busy node's answer carry their reason codes.
func TestAFleetSpeaksMQTT5FromTheFile(t *testing.T) {
	f, err := read(t, `
fleet:
  - {name: listens, devices: 100, mqtt: "5"}
  - {name: deaf, devices: 100, mqtt: "5", server_signals: ignore}
  - {name: old, devices: 100}
brokers: {nodes: 3, admission: {rate: 50, code: 0x97}}
timeline: [{disruption: busy-node, node: 1, code: 0x89}]
`)
	require.NoError(t, err)
	p, _, err := f.Plan()
	require.NoError(t, err)
	var protocols []device.Protocol
	var deaf []bool
	for _, g := range p.GroupsOrWhole() {
		protocols, deaf = append(protocols, g.Protocol()), append(deaf, *g.IgnoreServerSignals)
	}
	assert.Equal(t, []device.Protocol{device.MQTT5, device.MQTT5, device.MQTT311}, protocols)
	assert.Equal(t, []bool{false, true, false}, deaf)
	assert.Equal(t, byte(0x97), p.Admission().RefusalCode())
	assert.Equal(t, byte(0x89), p.Busy())
	assert.Equal(t, 1, *p.Node)

	for _, tc := range []struct{ text, want string }{
		{"fleet: [{devices: 10, mqtt: 4}]\ntimeline: [{disruption: drop-all}]", `mqtt: want "3.1.1" or "5", got 4`},
		{"fleet: [{devices: 10}]\nbrokers: {admission: {rate: 5, code: 3}}\ntimeline: [{disruption: rate-limited}]", "code: want an MQTT 5 refusal's reason code"},
		{"fleet: [{devices: 10, server_signals: ignore}]\ntimeline: [{disruption: drop-all}]", "only MQTT 5 devices read them"},
		{"fleet: [{devices: 10, mqtt: \"5\", server_signals: maybe}]\ntimeline: [{disruption: drop-all}]", "honour or ignore"},
		{"fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all, code: 0x89}]", "a code is a busy-node's"},
	} {
		f, err := read(t, tc.text)
		if err == nil {
			_, _, err = f.Plan()
		}
		assert.ErrorIs(t, err, storm.ErrInvalid, tc.text)
		assert.ErrorContains(t, err, tc.want, tc.text)
	}
}

// A cluster takes a timeline: every node restarted at once, node 1 alone,
// a rolling restart among the rest, every node flapping; each disruption
// (the rolling restart's node by node) is a recovery of its own.
func TestAClusterTimelineFromTheFile(t *testing.T) {
	f, err := read(t, `
fleet: [{devices: 3000, policy: fleet-safe}]
brokers: {nodes: 3}
timeline:
  - {disruption: broker-restart, outage: 30s}
  - {at: 3m, disruption: broker-restart, node: 1, outage: 30s}
  - {at: 5m, disruption: rolling-restart, gap: 1m, outage: 30s}
  - {at: 9m, disruption: flapping, outage: 20s}
`)
	require.NoError(t, err)
	p, why, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, plan.Virtual, p.Engine, why)
	require.Len(t, p.Then, 3)
	require.NotNil(t, p.Then[0].Node)
	assert.Equal(t, 1, *p.Then[0].Node)
	assert.Nil(t, p.Then[2].Node, "every node")
	assert.Equal(t, time.Minute, p.Then[1].Gap)
	assert.Len(t, p.Strikes(), 6)

	for _, tc := range []struct{ text, want string }{
		{"fleet: [{devices: 10}]\nbrokers: {nodes: 3}\ntimeline: [{disruption: drop-all}, {at: 1m, disruption: broker-restart, node: 3}]",
			"timeline[1]: node 3: the cluster's nodes are 0 to 2"},
		{"fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all, node: 0}]", "timeline[0]: node 0: one node's disruption needs a cluster"},
		{"fleet: [{devices: 10}]\nbrokers: {nodes: 3}\ntimeline: [{disruption: drop-all}, {at: 1m, disruption: drop-all, gap: 1m}]",
			"timeline[1]: gap 1m0s: a gap is a rolling restart's"},
		{"fleet: [{devices: 10}]\nbrokers: {nodes: 3}\ntimeline: [{disruption: rolling-restart, gap: 1m}, {at: 2m, disruption: drop-all}]",
			"timeline[0] and timeline[1]: two disruptions begin at 2m0s"},
		{"fleet: [{devices: 10}]\nbrokers: {nodes: 3}\ntimeline: [{disruption: config-outage}]", "config-outage is not a cluster's disruption"},
	} {
		f, err := read(t, tc.text)
		require.NoError(t, err, tc.text)
		_, _, err = f.Plan()
		assert.ErrorIs(t, err, storm.ErrInvalid, tc.text)
		assert.ErrorContains(t, err, tc.want, tc.text)
	}
}

// brokers.external.urls names a cluster you run, node 0 first: each node
// behind a fault proxy of its own, a pipeline naming each through the
// environment; url and urls are one broker or a cluster, not both.
func TestAnExternalClusterFromTheFile(t *testing.T) {
	text := `fleet: [{devices: 300}]
brokers: {external: {urls: ["${MQTT_NODE_0}", "${MQTT_NODE_1}", "tcp://10.0.0.11:1883"]}}
timeline: [{disruption: rolling-restart, gap: 1m}, {at: 5m, disruption: broker-restart, node: 2}]`
	env := map[string]string{"MQTT_NODE_0": "tcp://10.0.0.9:1883", "MQTT_NODE_1": "tcp://10.0.0.10:1883"}
	f, err := storm.Read(strings.NewReader(text), func(k string) string { return env[k] })
	require.NoError(t, err)
	p, why, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, plan.Agents, p.Engine, why)
	assert.Equal(t, []string{"tcp://10.0.0.9:1883", "tcp://10.0.0.10:1883", "tcp://10.0.0.11:1883"}, p.Brokers())
	assert.Equal(t, 3, p.ClusterNodes())
	assert.True(t, p.Proxied(), "each node's restart is its proxy's outage")

	for _, tc := range []struct{ text, want string }{
		{`fleet: [{devices: 10}]
brokers: {external: {url: "tcp://10.0.0.9:1883", urls: ["tcp://10.0.0.10:1883"]}}
timeline: [{disruption: drop-all}]`, "url names one broker and urls a cluster's nodes"},
		{`fleet: [{devices: 10}]
brokers: {nodes: 3, external: {urls: ["tcp://10.0.0.9:1883", "tcp://10.0.0.10:1883"]}}
timeline: [{disruption: drop-all}]`, "an external cluster names each node's URL instead"},
		{`fleet: [{devices: 10}]
brokers: {external: {urls: ["tcp://10.0.0.9:1883", "ssl://10.0.0.10:8883"]}}
timeline: [{disruption: drop-all}]`, "all over TLS or all not"},
	} {
		f, err := read(t, tc.text)
		require.NoError(t, err, tc.text)
		_, _, err = f.Plan()
		assert.ErrorIs(t, err, storm.ErrInvalid, tc.text)
		assert.ErrorContains(t, err, tc.want, tc.text)
	}
}

// A duration written without its unit says how to write one, where yaml
// alone says it cannot unmarshal a number into time.Duration.
func TestADurationWithoutItsUnitSaysHowToWriteOne(t *testing.T) {
	_, err := read(t, "fleet: [{devices: 10}]\ntimeline: [{disruption: broker-restart, outage: 30}]")
	require.Error(t, err)
	assert.ErrorContains(t, err, "line 2, column 49: 30 is not a duration: write it with its unit, such as 30s")
}

// A name the file uses twice and the environment lacks is named once.
func TestAnUnsetNameIsNamedOnce(t *testing.T) {
	_, err := storm.Read(strings.NewReader("# ${MQTT_BROKER}\nbrokers: {external: {url: \"${MQTT_BROKER}\"}}\n"), func(string) string { return "" })
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(err.Error(), "MQTT_BROKER"), err.Error())
}
