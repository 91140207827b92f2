package report_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/rendezvous"
	"github.com/herdguard/herdguard/internal/report"
)

// shards builds the reports of count shards of one storm, written and
// read back as devicesim merge reads them, each changed by change first.
func shards(t *testing.T, count int, change func(i int, r *report.Report)) []*report.Report {
	return timelineShards(t, count, nil, change)
}

// timelineShards is shards struck by a timeline's disruptions at at, each
// device back a second after each.
func timelineShards(t *testing.T, count int, at []time.Duration, change func(i int, r *report.Report)) []*report.Report {
	p := plan.Default()
	p.Broker, p.Devices, p.DisruptAt = "tcp://mqtt:1883", 10*count, plan.DisruptAt{After: time.Minute}
	var out []*report.Report
	for i := range count {
		p.Shard = plan.Shard{Index: i, Count: count}
		var records []attempt.Record
		starts := at
		if len(starts) == 0 {
			starts = []time.Duration{0}
		}
		for _, a := range starts {
			for d := i; d < p.Devices; d += count {
				records = append(records, attempt.Record{T: a + time.Second + time.Duration(d)*100*time.Millisecond, Lag: time.Millisecond,
					Device: int32(d), Outcome: fault.Accepted})
			}
		}
		r := buildBy(t, p.Devices, at, records, func(b *report.Builder, rs []attempt.Record) {
			for _, r := range rs {
				b.Add(r)
			}
		})
		fresh := report.New(p, plan.Agents, "external", 10, time.UnixMilli(1_795_466_393_000))
		r.Setup = fresh.Setup
		r.Sync.StrikeUnixMS = r.DisruptionUnixMS
		offset := 0.0
		r.Sync.ClockOffsetMS = &offset
		if change != nil {
			change(i, r)
		}
		dir := t.TempDir()
		require.NoError(t, r.WriteFiles(dir))
		back, err := report.ReadReport(dir)
		require.NoError(t, err)
		out = append(out, back)
	}
	return out
}

// Shards of one storm merge; shards that did not strike one storm
// together are refused, and the refusal names them.
func TestMergeRefusesShardsThatDisagree(t *testing.T) {
	m, err := report.Merge(shards(t, 3, nil))
	require.NoError(t, err)
	assert.Equal(t, 30, m.Devices)

	_, err = report.Merge(shards(t, 3, nil)[:2])
	assert.ErrorContains(t, err, "shards 2 of 3 are missing")

	_, err = report.Merge(shards(t, 3, func(i int, r *report.Report) {
		if i == 1 {
			other := plan.Default()
			other.Broker, other.Devices, other.Policy = "tcp://mqtt:1883", 30, "full"
			r.Sync.Plan = other.Shared()
			r.Sync.PlanHash = rendezvous.Hash(r.Sync.Plan)
		}
	}))
	assert.ErrorContains(t, err, "shard 1/3 ran another storm than shard 0/3")
	assert.ErrorContains(t, err, "Policy full, not iotcore")

	_, err = report.Merge(shards(t, 3, func(i int, r *report.Report) {
		offset := float64(i) * 200 // ms: shard 2's clock 400 ms ahead of shard 0's
		r.Sync.ClockOffsetMS = &offset
	}))
	assert.ErrorContains(t, err, "shard 2's is 400ms ahead of shard 0's")

	_, err = report.Merge(shards(t, 3, func(i int, r *report.Report) {
		if i == 2 {
			r.DisruptionUnixMS += 1500 // it named the same instant, but struck late
		}
	}))
	assert.ErrorIs(t, err, report.ErrDisagree)
	assert.ErrorContains(t, err, "shard 2/3 struck 1.5s after shard 0/3")

	_, err = report.Merge(shards(t, 3, func(i int, r *report.Report) {
		if i == 0 {
			r.Sync = nil // a report from before shards recorded their plans
		}
	}))
	assert.ErrorContains(t, err, "1 of 3 reports record no plan", "whichever report comes first")

	twice := shards(t, 2, nil)
	_, err = report.Merge([]*report.Report{twice[0], twice[0]})
	assert.ErrorContains(t, err, "shard 0/2 given twice")
}

// A timeline's shards merge into a report that judges each disruption on
// its own, as each shard did.
func TestMergeKeepsATimelinesDisruptions(t *testing.T) {
	parts := timelineShards(t, 2, []time.Duration{0, time.Minute}, nil)
	require.Len(t, parts[0].Disruptions, 2)
	m, err := report.Merge(parts)
	require.NoError(t, err)
	require.Len(t, m.Disruptions, 2)
	assert.Equal(t, 60.0, m.Disruptions[1].AtS)
	for k, d := range m.Disruptions {
		assert.True(t, d.Recovery.AllRecovered, "disruption %d", k)
		// device d back 1 s + d * 100 ms after each disruption: 20 devices
		assert.InDelta(t, 1.95, d.Recovery.P50S, 0.1, "disruption %d", k)
	}
}

// What each shard's host cost the fleet carries into the merge: the
// devices' memory and CPU weighed by their shards, and how late the
// slowest shard's devices noticed the disruption, which no events.csv
// holds, binds the merged run as it bound that shard.
func TestMergeKeepsWhatTheHostsCost(t *testing.T) {
	rs := shards(t, 2, func(i int, r *report.Report) {
		r.Host.ResidentPerDeviceKB, r.Host.CPUPerDeviceMS = float64(10*(i+1)), float64(i+1)
		if i == 1 {
			r.Host.NoticeP99S, r.Host.Bound = 5.3, true
		}
	})
	m, err := report.Merge(rs)
	require.NoError(t, err)
	assert.InDelta(t, 15, m.Host.ResidentPerDeviceKB, 1e-9, "10 and 20 KiB over equal shards")
	assert.InDelta(t, 1.5, m.Host.CPUPerDeviceMS, 1e-9)
	assert.Equal(t, 5.3, m.Host.NoticeP99S)
	assert.True(t, m.Host.Bound, "a shard's host bound the run")

	rs = shards(t, 2, nil)
	m, err = report.Merge(rs)
	require.NoError(t, err)
	assert.False(t, m.Host.Bound)
}
