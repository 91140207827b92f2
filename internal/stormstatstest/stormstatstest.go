// Package stormstatstest holds what the judgement's tests and the log
// reader's tests share. It holds the number of seeds a statistical test
// runs. It also holds series of arrivals whose verdict is known, stamped as
// a log writes them.
package stormstatstest

import (
	"flag"
	"math"
	"math/rand/v2"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// Seeds is how many seeds a statistical test runs: 20, or 1 under the race
// detector (which looks for races, not error rates: one seed takes every
// path the others do), or what -stats.seeds says. A test that calls it is
// named in make test's stats step, which runs it at 20.
func Seeds() int {
	switch {
	case *statsSeeds > 0:
		return *statsSeeds
	case RaceDetector:
		return 1
	}
	return 20
}

// statsSeeds runs the statistical tests at more seeds, as docs/verdict.md
// measures them: go test -run 'RestartedTwice|Newcomers|...' -args -stats.seeds 200.
var statsSeeds = flag.Int("stats.seeds", 0, "seeds a statistical test runs (0: 20, or 1 under the race detector)")

// Unix is a disruption's moment on a real clock, not on a whole second.
const Unix = 1_700_000_000*time.Second + 123_456_789

// Stamp writes times (seconds from Unix) as a log on tick does (truncated).
func Stamp(ts []float64, tick time.Duration) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, x := range ts {
		t := Unix + time.Duration(x*float64(time.Second))
		out[i] = t - t%tick
	}
	return out
}

// FormulaRounds is n devices retrying the mission's formula, wait_k =
// min(2^k s + U[0, 1 s), 32 s), attempts times each, from 0: waves.
func FormulaRounds(r *rand.Rand, n, attempts int) []float64 {
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

// Decay is n exactly independent arrivals, a step up at 0 decaying with
// tau seconds: spread.
func Decay(r *rand.Rand, n int, tau float64) []float64 {
	ts := make([]float64, n)
	for i := range ts {
		ts[i] = tau * r.ExpFloat64()
	}
	return ts
}

// Verdicts lists each recovery's verdict, in order.
func Verdicts(recs []stormstats.Recovery) []stormstats.Verdict {
	var v []stormstats.Verdict
	for _, r := range recs {
		v = append(v, r.Verdict)
	}
	return v
}
