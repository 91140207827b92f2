package report_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// build feeds records to a Builder of devices disrupted at t0, back at 30 s.
func build(t *testing.T, devices int, records []attempt.Record) *report.Report {
	t.Helper()
	return buildBy(t, devices, nil, records, func(b *report.Builder, rs []attempt.Record) {
		for _, r := range rs {
			b.Add(r)
		}
	})
}

// testPlan is the setup the tests' reports name.
func testPlan() plan.Plan {
	var p plan.Plan
	p.Scenario, p.Policy, p.TimeScale = plan.BrokerRestart, "full", 1
	return p
}

// buildBy is build with the records fed by add, the disruptions at at (a
// timeline's, if more than one).
func buildBy(t *testing.T, devices int, at []time.Duration, records []attempt.Record, add func(*report.Builder, []attempt.Record)) *report.Report {
	t.Helper()
	t0 := time.UnixMilli(1_795_466_393_000)
	b := report.NewBuilder(report.Run{Plan: testPlan(), Engine: plan.Virtual,
		Devices: devices, T0: t0, Returned: t0.Add(30 * time.Second), TimeScale: 1, FleetAt: "devices", BrokerAt: "broker",
		Disruptions: at})
	add(b, records)
	rep, err := b.Report(report.End{Until: t0.Add(5 * time.Minute)})
	require.NoError(t, err)
	return rep
}

// Rounds every 8 s refused by a broker that is down, then everyone back at
// once: waves, with the recovery and attempts the records say.
func TestBuilderFiguresComeFromTheRecords(t *testing.T) {
	const devices = 400
	var records []attempt.Record
	for round := range 4 {
		for d := range devices {
			records = append(records, attempt.Record{T: time.Duration(round)*8*time.Second + time.Duration(d)*time.Millisecond,
				Lag: -1, Device: int32(d), Outcome: fault.Dropped})
		}
	}
	for d := range devices {
		at := 32*time.Second + time.Duration(d)*time.Millisecond
		records = append(records,
			attempt.Record{T: at, Lag: -1, Device: int32(d), Outcome: fault.Accepted},
			attempt.Record{T: at, Lag: -1, Device: int32(d), Outcome: fault.Accepted, Seen: attempt.Broker})
	}
	rep := build(t, devices, records)
	assert.Equal(t, devices, rep.Recovered())
	assert.EqualValues(t, 5*devices, rep.Attempts.Total)
	assert.EqualValues(t, 4*devices, rep.Attempts.Refused)
	assert.EqualValues(t, 5, rep.Attempts.PerDeviceMax)
	assert.InDelta(t, 32.399, rep.Recovery.P99S, 0.01)
	lo, hi := rep.Recovery.Near99()
	assert.InDelta(t, 32.393, lo, 1e-9, "p98.5: the 394th of 400")
	assert.InDelta(t, 32.397, hi, 1e-9, "p99.5: the 398th of 400")
	assert.Equal(t, stormstats.Waves, rep.Verdict, "four rounds every 8 s")
	require.NotNil(t, rep.Broker)
	assert.EqualValues(t, devices, rep.Broker.Arrivals.Count, "the broker saw only the last round")
	assert.Len(t, rep.Events(), 5*devices, "the fleet's records are kept for events.csv; the broker's are not rows")
}

// A device that retries 70,000 times has every attempt counted, past what
// a device's two-byte counter holds; fed in batches (as the virtual engine
// feeds them, prefetching ahead), the records make the same report as one by
// one.
func TestAttemptsAreCountedPastTwoBytes(t *testing.T) {
	var records []attempt.Record
	for i := range 80_000 {
		records = append(records, attempt.Record{T: time.Duration(i) * time.Millisecond, Lag: -1, Device: int32(i % 8 / 7), Outcome: fault.Dropped})
	}
	for d := range 3 {
		records = append(records, attempt.Record{T: 81 * time.Second, Lag: -1, Device: int32(d), Outcome: fault.Accepted},
			attempt.Record{T: 81 * time.Second, Lag: -1, Device: int32(d), Outcome: fault.Accepted, Seen: attempt.Broker})
	}
	one := build(t, 3, records)
	assert.EqualValues(t, 80_003, one.Attempts.Total)
	assert.EqualValues(t, 70_001, one.Attempts.PerDeviceMax, "device 0: seven in eight of the retries, and its admission")
	assert.Equal(t, 3, one.Recovered())
	batched := buildBy(t, 3, nil, records, func(b *report.Builder, rs []attempt.Record) {
		for len(rs) > 0 {
			n := min(len(rs), 1000)
			b.AddBatch(rs[:n])
			rs = rs[n:]
		}
	})
	assert.Equal(t, one.Attempts, batched.Attempts)
	assert.Equal(t, one.Recovery, batched.Recovery)
	assert.Equal(t, one.Fleet, batched.Fleet)
}

// Independent devices coming back over a minute: spread, across seeds.
func TestBuilderSpreadAcrossSeeds(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var records []attempt.Record
		for d := range 2000 {
			records = append(records, attempt.Record{T: 30*time.Second + time.Duration(rng.Int64N(int64(time.Minute))),
				Lag: -1, Device: int32(d), Outcome: fault.Accepted})
		}
		assert.Equal(t, stormstats.Spread, build(t, 2000, records).Verdict, "seed %d", seed)
	}
}

func TestWriteFilesThenReadReportThenMerge(t *testing.T) {
	var records []attempt.Record
	for d := range 100 {
		records = append(records, attempt.Record{T: time.Duration(d) * 100 * time.Millisecond, Lag: time.Millisecond, Device: int32(d), Outcome: fault.Accepted})
	}
	rep := build(t, 100, records)
	dir := t.TempDir()
	require.NoError(t, rep.WriteFiles(dir))
	back, err := report.ReadReport(dir)
	require.NoError(t, err)
	assert.Equal(t, rep.Events(), back.Events(), "events.csv reads back as it was written")
	assert.Equal(t, rep.Recovery, back.Recovery)

	rep.DropEvents()
	assert.Error(t, rep.WriteFiles(t.TempDir()), "no events.csv from a report whose events were dropped")
	_, err = report.Merge(nil)
	assert.Error(t, err)
}

// After a flapping window a device's first session is dropped a flap
// later: each disruption's recovery is the admission that stayed, the
// last before the next disruption, as the run's own recovery counts.
func TestEachRecoveryIsTheAdmissionThatStayed(t *testing.T) {
	t0 := time.UnixMilli(1_795_466_393_000)
	// the devices' word for admissions
	b := report.NewBuilder(report.Run{Devices: 4, T0: t0, Returned: t0.Add(30 * time.Second), TimeScale: 1, FleetAt: "devices",
		Disruptions: []time.Duration{0, time.Minute}})
	for _, r := range []attempt.Record{
		{T: 31 * time.Second, Device: 0, Outcome: fault.Accepted},
		{T: 33 * time.Second, Device: 1, Outcome: fault.Accepted},
		// a flapping window from 60 s: admitted at once, dropped 2 s later
		{T: 61 * time.Second, Device: 0, Outcome: fault.Accepted},
		{T: 62 * time.Second, Device: 1, Outcome: fault.Accepted},
		{T: 80 * time.Second, Device: 0, Outcome: fault.Accepted},
		{T: 84 * time.Second, Device: 1, Outcome: fault.Accepted},
		// device 2 never left; device 3 never came back
		{T: 90 * time.Second, Device: 3, Outcome: fault.Dropped},
	} {
		r.Lag = -1
		b.Add(r)
	}
	rep, err := b.Report(report.End{Until: t0.Add(3 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Recovered())
	assert.Equal(t, 1, rep.Stranded(), "device 3 tried and never came back; device 2 had no reason to")
	require.Len(t, rep.Disruptions, 2)
	assert.Equal(t, 33.0, rep.Disruptions[0].Recovery.MaxS)
	assert.Equal(t, 24.0, rep.Disruptions[1].Recovery.MaxS, "84 s, not the session at 62 s that the window dropped")
	assert.Equal(t, 84.0, rep.Recovery.MaxS, "the run's: the last session admitted")
}

// Through a proxy, which sees connections and not CONNACKs, a device is
// back when it heard its CONNACK, however long the proxy held its attempt
// first; the broker's side is what the proxy passed on.
func TestBehindAProxyRecoveryIsWhenTheDeviceHeard(t *testing.T) {
	t0 := time.UnixMilli(1_795_466_393_000)
	b := report.NewBuilder(report.Run{Devices: 2, T0: t0, Returned: t0.Add(30 * time.Second), TimeScale: 1, FleetAt: "devices",
		BrokerAt: "proxy", FleetAdmits: true})
	for _, r := range []attempt.Record{
		{T: 31 * time.Second, Device: 0, Outcome: fault.Accepted},
		{T: 31 * time.Second, Device: 1, Outcome: fault.Accepted},
		{T: 31 * time.Second, Device: 0, Outcome: fault.Accepted, Seen: attempt.Broker},
		{T: 35 * time.Second, Device: 1, Outcome: fault.Accepted, Seen: attempt.Broker}, // held 4 s
	} {
		r.Lag = -1
		b.Add(r)
	}
	b.Heard(0, 31*time.Second+time.Millisecond)
	b.Heard(1, 35*time.Second+time.Millisecond)
	rep, err := b.Report(report.End{Until: t0.Add(time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Recovered())
	assert.Equal(t, 31.001, rep.Recovery.P50S)
	assert.Equal(t, 35.001, rep.Recovery.MaxS, "the held device, when it heard, not when it dialled")
	assert.EqualValues(t, 2, rep.Broker.Arrivals.Count)
}

// A timeline's summary leads with each disruption's recovery; the whole
// run's, which spans every outage, comes after them and says so.
func TestATimelinesSummaryLeadsWithEachRecovery(t *testing.T) {
	r := &report.Report{Setup: report.Setup{Scenario: plan.BrokerRestart, Devices: 100, Policy: "full", TimeScale: 1},
		Findings: report.Findings{Recovery: report.Recovery{P50S: 344.5, P99S: 360.5, AllRecovered: true}},
		Parts: report.Parts{Disruptions: []report.DisruptionReport{
			{AtS: 0, Recovery: report.Recovery{P99S: 60.5, AllRecovered: true}, Verdict: stormstats.Spread},
			{AtS: 300, Recovery: report.Recovery{P99S: 60.4, AllRecovered: true}, Verdict: stormstats.Spread},
		}}}
	var out strings.Builder
	r.Summary(&out)
	lines := strings.Split(out.String(), "\n")
	require.Greater(t, len(lines), 4)
	assert.Equal(t, "disruption at 0 s: recovery p99 60.5 s after it, all back: true; verdict spread", lines[1])
	assert.Equal(t, "disruption at 300 s: recovery p99 60.4 s after it, all back: true; verdict spread", lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "the whole run, from the first disruption: p50 344.5 s"), lines[3])
	assert.Equal(t, 1, strings.Count(out.String(), "disruption at 300 s"), "once")
}

// A report is made whole from the run's end: every device back only where
// the run finished and none it disrupted is stranded; the proxies' counts,
// each node's among them; the TLS cost of the broker's arrivals; the
// strike of a timed run; and why it stopped early.
func TestAReportIsMadeWholeFromTheRunsEnd(t *testing.T) {
	t0 := time.UnixMilli(1_795_466_393_000)
	p := plan.Default()
	p.DisruptAt = plan.DisruptAt{At: t0}
	offset := 3 * time.Millisecond
	build := func(stranded bool, end report.End) *report.Report {
		b := report.NewBuilder(report.Run{Plan: p, Devices: 2, T0: t0, Returned: t0, TimeScale: 1, FleetAt: "devices",
			BrokerAt: "broker", Nodes: 2})
		b.Add(attempt.Record{T: time.Second, Lag: -1, Device: 0, Outcome: fault.Accepted})
		b.Add(attempt.Record{T: time.Second, Lag: -1, Device: 0, Outcome: fault.Accepted, Seen: attempt.Broker, Node: 1})
		if stranded {
			b.Add(attempt.Record{T: 2 * time.Second, Lag: -1, Device: 1, Outcome: fault.Refused})
		} else {
			b.Add(attempt.Record{T: 2 * time.Second, Lag: -1, Device: 1, Outcome: fault.Accepted})
			b.Add(attempt.Record{T: 2 * time.Second, Lag: -1, Device: 1, Outcome: fault.Accepted, Seen: attempt.Broker})
		}
		end.Until = t0.Add(time.Minute)
		rep, err := b.Report(end)
		require.NoError(t, err)
		return rep
	}
	assert.True(t, build(false, report.End{Finished: true}).Recovery.AllRecovered)
	assert.False(t, build(true, report.End{Finished: true}).Recovery.AllRecovered, "device 1 is stranded")
	assert.False(t, build(false, report.End{}).Recovery.AllRecovered, "the run did not see every device up")

	handshake := 2 * time.Millisecond
	rep := build(false, report.End{Proxy: &report.ProxyCounts{Admitted: 1}, ProxyByNode: []report.ProxyCounts{{}, {Admitted: 1}},
		Handshake: &handshake, Struck: t0.Add(offset), ClockOffset: &offset, Incomplete: "interrupted",
		Host: report.Host{MemoryPerDeviceKB: 4}})
	assert.Equal(t, 1, rep.Proxy.Admitted)
	require.Len(t, rep.Nodes, 2)
	assert.Equal(t, 1, rep.Nodes[1].Proxy.Admitted, "node 1's own proxy")
	require.NotNil(t, rep.TLS)
	assert.EqualValues(t, 2, rep.TLS.Handshakes, "the broker's arrivals")
	require.NotNil(t, rep.Sync)
	assert.Equal(t, t0.Add(offset).UnixMilli(), rep.Sync.StrikeUnixMS)
	assert.Equal(t, 3.0, *rep.Sync.ClockOffsetMS)
	assert.Equal(t, "interrupted", rep.Incomplete)
	assert.Equal(t, 4.0, rep.Host.MemoryPerDeviceKB)

	// what the run measured of its host, and how late its records say the
	// devices left: both
	b := report.NewBuilder(report.Run{Devices: 1, T0: t0, Returned: t0, TimeScale: 1, FleetAt: "devices"})
	b.Add(attempt.Record{T: time.Second, Lag: 2 * time.Second, Device: 0, Outcome: fault.Accepted})
	rep, err := b.Report(report.End{Until: t0.Add(time.Minute), Host: report.Host{MemoryPerDeviceKB: 4}})
	require.NoError(t, err)
	assert.Equal(t, 4.0, rep.Host.MemoryPerDeviceKB)
	assert.Equal(t, 2.0, rep.Host.LagP99S)
	assert.True(t, rep.Host.Bound, "2 s late")
}
