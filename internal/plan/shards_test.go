package plan_test

import (
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
