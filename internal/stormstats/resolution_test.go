package stormstats_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/stormstatstest"
)

func TestDetectTick(t *testing.T) {
	s := func(xs ...float64) []time.Duration {
		var ts []time.Duration
		for _, x := range xs {
			ts = append(ts, time.Duration(math.Round(x*1e9)))
		}
		return ts
	}
	for want, ts := range map[time.Duration][]time.Duration{
		time.Second:            s(1700000000, 1700000003, 1700000003),
		100 * time.Millisecond: s(12.3, 12.4, 15),
		10 * time.Millisecond:  s(0.01, 0.02, 7.35),
		time.Millisecond:       s(1.001, 2.5, 3),
		0:                      s(1.0001, 2),
	} {
		assert.Equal(t, want, stormstats.DetectTick(ts), "%v", ts)
	}
}

// The series with a known verdict, stamped as logs write them, and the
// seeds a statistical test runs: internal/arrivallog's tests use them too.
var (
	stamp         = stormstatstest.Stamp
	formulaRounds = stormstatstest.FormulaRounds
	decay         = stormstatstest.Decay
	seeds         = stormstatstest.Seeds
)

const (
	unix         = stormstatstest.Unix
	raceDetector = stormstatstest.RaceDetector
)

func constant(r *rand.Rand, n int, span float64) []float64 {
	ts := make([]float64, n)
	for i := range ts {
		ts[i] = span * r.Float64()
	}
	return ts
}

// The logs people have, each over 20 seeds: whole-second and tenth-second
// stamps, and a stray line, no longer turn the verdict.
func TestLogsAsTheyAreWritten(t *testing.T) {
	for name, c := range map[string]struct {
		gen    func(r *rand.Rand) []time.Duration
		truth  stormstats.Verdict
		period float64 // of the waves, if any
	}{
		"a restart's recovery (40 s decay) in whole seconds": {func(r *rand.Rand) []time.Duration {
			return stamp(decay(r, 20_000, 40), time.Second)
		}, stormstats.Spread, 0},
		"50 a second for 10 minutes in whole seconds": {func(r *rand.Rand) []time.Duration {
			return stamp(constant(r, 30_000, 600), time.Second)
		}, stormstats.Spread, 0},
		"167 a second stamped to 0.1 s": {func(r *rand.Rand) []time.Duration {
			return stamp(constant(r, 50_000, 300), 100*time.Millisecond)
		}, stormstats.Spread, 0},
		"the formula's rounds at its cap in whole seconds": {func(r *rand.Rand) []time.Duration {
			return stamp(formulaRounds(r, 1000, 14), time.Second)
		}, stormstats.Waves, 32},
		"28,000 formula attempts and one line at time 0": {func(r *rand.Rand) []time.Duration {
			return append(stamp(formulaRounds(r, 2000, 14), time.Millisecond), 0)
		}, stormstats.Waves, 32},
		"a spread recovery and a line from 30 days before": {func(r *rand.Rand) []time.Duration {
			return append(stamp(decay(r, 5000, 20), time.Millisecond), unix-30*24*time.Hour)
		}, stormstats.Spread, 0},
	} {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(seeds()) {
				r := rand.New(rand.NewPCG(seed, 19))
				h, m, p := stormstats.Prepare(c.gen(r), nil, stormstats.DefaultMethod)
				j, err := stormstats.Judge(h, m)
				require.NoError(t, err)
				j = p.Qualify(j)
				require.Equal(t, c.truth, j.Verdict, "seed %d: %s", seed, j.Reason)
				if c.period > 0 {
					assert.InDelta(t, c.period, j.PeriodS, 1.5, "seed %d: the rounds' period, not the tick", seed)
				}
				if strings.Contains(name, "line") {
					require.Len(t, p.SetAside, 1, "seed %d", seed)
					assert.Equal(t, 1, p.SetAside[0].Count)
					if seed == 0 {
						t.Log(p.SetAside[0].Why)
					}
				}
			}
		})
	}
}

func TestStraysAreNamedWithTheirLines(t *testing.T) {
	ts := stamp(constant(rand.New(rand.NewPCG(1, 1)), 1000, 60), time.Millisecond)
	lines := make([]int32, len(ts))
	for i := range lines {
		lines[i] = int32(i + 3) // a header and a comment first
	}
	ts = append(ts, 0, unix+48*time.Hour)
	lines = append(lines, 1003, 1004)
	_, _, p := stormstats.Prepare(ts, lines, stormstats.DefaultMethod)
	require.Len(t, p.SetAside, 2)
	assert.Equal(t, []int32{1003}, p.SetAside[0].Lines)
	assert.Contains(t, p.SetAside[0].Why, "a clock not yet set")
	assert.Equal(t, []int32{1004}, p.SetAside[1].Lines)
	assert.Contains(t, p.SetAside[1].Why, "48 hours after the rest")
	assert.Equal(t, 0.001, p.TickS)

	// several disruptions hours apart each keep their arrivals
	two := append(stamp(constant(rand.New(rand.NewPCG(2, 2)), 500, 60), time.Millisecond),
		stamp(constant(rand.New(rand.NewPCG(3, 3)), 500, 60), time.Millisecond)...)
	for i := 500; i < 1000; i++ {
		two[i] += 6 * time.Hour
	}
	h, _, p := stormstats.Prepare(two, nil, stormstats.DefaultMethod)
	assert.Empty(t, p.SetAside)
	assert.Equal(t, int64(1000), h.Count())

	// a clock stepped by minutes: two lines a quarter of an hour after a
	// minute's storm are set aside; a second recovery as far away is not
	stepped := append(stamp(constant(rand.New(rand.NewPCG(4, 4)), 1000, 60), time.Second),
		unix+16*time.Minute, unix+16*time.Minute+2*time.Second)
	h, _, p = stormstats.Prepare(stepped, nil, stormstats.DefaultMethod)
	require.Len(t, p.SetAside, 1)
	assert.Equal(t, 2, p.SetAside[0].Count)
	assert.Contains(t, p.SetAside[0].Why, "15 minutes after the rest: a clock jump")
	assert.Equal(t, int64(1000), h.Count())
	for i := range 100 {
		stepped[1000+i%2] = unix + 16*time.Minute + time.Duration(i)*time.Second
		if i >= 2 {
			stepped = append(stepped, unix+16*time.Minute+time.Duration(i)*time.Second)
		}
	}
	h, _, p = stormstats.Prepare(stepped, nil, stormstats.DefaultMethod)
	assert.Empty(t, p.SetAside, "100 arrivals of 1,100 are a recovery, not strays")
	assert.Equal(t, int64(1100), h.Count())
}

// Two lines a few minutes to an hour from a storm, before or after it (a
// clock stepped by that much), move no verdict, whether they are set aside
// (ten minutes and more) or judged with the rest.
func TestAStrayUnderAnHourMovesNoVerdict(t *testing.T) {
	for _, away := range []time.Duration{2 * time.Minute, 9 * time.Minute, 20 * time.Minute, 59 * time.Minute, -5 * time.Minute, -40 * time.Minute} {
		for name, c := range map[string]struct {
			gen   func(r *rand.Rand) []time.Duration
			truth stormstats.Verdict
		}{
			"the formula's rounds in whole seconds": {func(r *rand.Rand) []time.Duration { return stamp(formulaRounds(r, 200, 8), time.Second) }, stormstats.Waves},
			"a recovery in ms":                      {func(r *rand.Rand) []time.Duration { return stamp(decay(r, 2000, 20), time.Millisecond) }, stormstats.Spread},
		} {
			for seed := range uint64(seeds()) {
				ts := c.gen(rand.New(rand.NewPCG(seed, 47)))
				edge := slices.Max(ts)
				if away < 0 {
					edge = slices.Min(ts)
				}
				ts = append(ts, edge+away, edge+away+3*time.Second)
				h, m, p := stormstats.Prepare(ts, nil, stormstats.DefaultMethod)
				j, err := stormstats.Judge(h, m)
				require.NoError(t, err)
				assert.Equal(t, c.truth, p.Qualify(j).Verdict, "%s, two lines %v away, seed %d", name, away, seed)
				assert.Equal(t, away.Abs() >= 10*time.Minute, len(p.SetAside) == 1, "%s, %v away: set aside", name, away)
			}
		}
	}
}
