package stormstats_test

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/stormstats"
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

// unix is a disruption's moment on a real clock, not on a whole second.
const unix = 1_700_000_000*time.Second + 123_456_789

// stamp writes times as a log on tick does (truncated), after unix.
func stamp(ts []float64, tick time.Duration) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, x := range ts {
		t := unix + time.Duration(x*float64(time.Second))
		out[i] = t - t%tick
	}
	return out
}

// formulaRounds is n devices retrying the mission's formula, wait_k =
// min(2^k s + U[0, 1 s), 32 s), attempts times each, from 0.
func formulaRounds(r *rand.Rand, n, attempts int) []float64 {
	var ts []float64
	for range n {
		t := 0.0
		for k := range attempts {
			t += math.Min(math.Pow(2, float64(k))+r.Float64(), 32)
			ts = append(ts, t)
		}
	}
	return ts
}

// exactly independent arrivals: a step up at 0 decaying with tau, n of them.
func decay(r *rand.Rand, n int, tau float64) []float64 {
	ts := make([]float64, n)
	for i := range ts {
		ts[i] = tau * r.ExpFloat64()
	}
	return ts
}

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

// seeds is how many seeds a statistical test runs: 20, or 3 under the race
// detector (which looks for races, not error rates). A test that calls it
// is named in make test's stats step, which runs it at 20.
func seeds() int {
	switch {
	case *statsSeeds > 0:
		return *statsSeeds
	case raceDetector:
		return 3
	}
	return 20
}

// statsSeeds runs the statistical tests at more seeds, as docs/verdict.md
// measures them: go test -run 'RestartedTwice|Newcomers|...' -args -stats.seeds 200.
var statsSeeds = flag.Int("stats.seeds", 0, "seeds a statistical test runs (0: 20, or 3 under the race detector)")

// Two independent outages ten minutes apart, each followed by a smooth
// recovery: judged by recovery, each is spread and so is the log; the
// formula's rounds after one of them are still waves. 20 seeds.
func TestEachRecoveryIsJudgedOnItsOwn(t *testing.T) {
	second := 600.0
	for seed := range uint64(seeds()) {
		r := rand.New(rand.NewPCG(seed, 23))
		ts := append(stamp(decay(r, 3000, 20), time.Second), stamp(shift(decay(r, 3000, 20), second), time.Second)...)
		// as a user names them from the log: on its whole seconds
		at := stamp([]float64{0, second}, time.Second)
		l := &stormstats.Log{Times: ts, Lines: make([]int32, len(ts))}
		recs, before, err := l.Recoveries(at)
		require.NoError(t, err)
		assert.Zero(t, before)
		require.Len(t, recs, 2)
		for _, rec := range recs {
			assert.Equal(t, stormstats.Spread, rec.Verdict, "seed %d: %s", seed, rec.Reason)
			assert.Equal(t, int64(3000), rec.Count)
		}
		assert.Equal(t, stormstats.Spread, stormstats.Overall(recs))

		storm := append(stamp(decay(r, 3000, 20), time.Second), stamp(shift(formulaRounds(r, 500, 14), second), time.Second)...)
		l = &stormstats.Log{Times: storm, Lines: make([]int32, len(storm))}
		recs, _, err = l.Recoveries(at)
		require.NoError(t, err)
		assert.Equal(t, stormstats.Spread, recs[0].Verdict, "seed %d: %s", seed, recs[0].Reason)
		assert.Equal(t, stormstats.Waves, recs[1].Verdict, "seed %d: %s", seed, recs[1].Reason)
		assert.Equal(t, stormstats.Waves, stormstats.Overall(recs))
	}
}

func shift(ts []float64, by float64) []float64 {
	for i := range ts {
		ts[i] += by
	}
	return ts
}

func TestParseDisruptions(t *testing.T) {
	at, err := stormstats.ParseDisruptions("1700000600, 1700000000.5,2023-11-14T22:13:20Z")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{1_700_000_000 * time.Second, 1_700_000_000*time.Second + 500*time.Millisecond,
		1_700_000_600 * time.Second}, at)
	for _, bad := range []string{"", "soon", "1,x"} {
		_, err := stormstats.ParseDisruptions(bad)
		assert.Error(t, err, bad)
	}
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
