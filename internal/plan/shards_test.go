package plan_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/plan"
)

func TestParseDisruptAt(t *testing.T) {
	for in, want := range map[string]plan.DisruptAt{
		"+30s":                      {After: 30 * time.Second},
		"+2m":                       {After: 2 * time.Minute},
		"2026-11-27T15:04:05Z":      {At: time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC)},
		"2026-11-27T16:04:05+01:00": {At: time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC)},
	} {
		got, err := plan.ParseDisruptAt(in)
		require.NoError(t, err, in)
		assert.True(t, got.At.Equal(want.At) && got.After == want.After, "%s: %v", in, got)
		back, err := plan.ParseDisruptAt(got.String())
		require.NoError(t, err)
		assert.Equal(t, got.String(), back.String())
	}
	for _, in := range []string{"+0s", "+-5s", "30s", "tomorrow", "15:04", "+"} {
		_, err := plan.ParseDisruptAt(in)
		assert.Error(t, err, in)
	}
}

// Shards of one storm share every setting but which slice they run; any
// other setting tells them apart.
func TestShardsShareTheirPlan(t *testing.T) {
	p := plan.Default()
	p.Broker, p.Shard, p.ReadyDir = "tcp://mqtt:1883", plan.Shard{Index: 0, Count: 4}, "/a/ready"
	q := p
	q.Shard.Index, q.ReadyDir = 3, "/b/ready"
	assert.Equal(t, p.Shared(), q.Shared())
	for _, change := range []func(*plan.Plan){
		func(p *plan.Plan) { p.Policy = "full" },
		func(p *plan.Plan) { p.Shard.Count = 5 },
		func(p *plan.Plan) { p.TimeScale = 2 },
		func(p *plan.Plan) { p.DisruptAt = plan.DisruptAt{After: time.Minute} },
		func(p *plan.Plan) { p.Then = []plan.Event{{At: time.Minute, Scenario: plan.DropAll}} },
		func(p *plan.Plan) { p.Seed++ },
	} {
		r := p
		change(&r)
		assert.NotEqual(t, p.Shared(), r.Shared())
	}
}

// A shard's children split its devices, each once, and run none of
// another shard's.
func TestAShardsChildrenSplitItsDevices(t *testing.T) {
	for _, s := range []plan.Shard{{}, {Index: 0, Count: 1}, {Index: 2, Count: 3}, {Index: 6, Count: 10}} {
		for _, k := range []int{1, 2, 4} {
			var got []int
			for i := range k {
				part := s.Split(i, k)
				ids := part.IDs(1000)
				assert.Equal(t, len(ids), part.Size(1000))
				got = append(got, ids...)
			}
			slices.Sort(got)
			assert.Equal(t, s.IDs(1000), got, "shard %v in %d children", s, k)
		}
	}
}

// What follows from what was asked: a broker list is a cluster, a named
// scale is kept, an observed disruption runs in real time, shards and a
// timed strike share the plan's scale, and shards that wait for each
// other meet beside their reports.
func TestSettleAppliesWhatFollowsFromTheAsking(t *testing.T) {
	p := plan.Default()
	p.Broker = "tcp://a:1883,tcp://b:1883,tcp://c:1883"
	s := p.Settle(false, "out/shard-0")
	assert.Equal(t, "tcp://a:1883", s.Broker)
	assert.Equal(t, []string{"tcp://b:1883", "tcp://c:1883"}, s.Peers)
	assert.True(t, s.AutoScale, "the host's to choose")
	assert.False(t, p.Settle(true, "").AutoScale, "a named scale is kept")

	o := plan.Default()
	o.Scenario = plan.Observe
	assert.Equal(t, 1.0, o.Settle(false, "").TimeScale, "someone else's disruption, in real time")
	o.TimeScale = 8
	assert.Equal(t, 8.0, o.Settle(true, "").TimeScale, "unless a scale is named")

	sh := plan.Default()
	sh.Shard = plan.Shard{Index: 1, Count: 4}
	sh.DisruptAt.After = time.Minute
	got := sh.Settle(false, filepath.Join("runs", "shard-1"))
	assert.False(t, got.AutoScale, "every shard at the plan's scale")
	assert.Equal(t, filepath.Join("runs", "ready"), got.ReadyDir)
	assert.Equal(t, filepath.Join("runs", "shard-1"), sh.Shard.Dir("runs"))
	assert.Equal(t, []string{filepath.Join("runs", "shard-0"), filepath.Join("runs", "shard-1")}, plan.Dirs("runs", 2))
}
