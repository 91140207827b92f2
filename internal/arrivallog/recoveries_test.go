package arrivallog_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/stormstatstest"
)

// The series with a known verdict, stamped as logs write them, and the
// seeds a statistical test runs, as the judgement's own tests have them.
var (
	stamp         = stormstatstest.Stamp
	formulaRounds = stormstatstest.FormulaRounds
	decay         = stormstatstest.Decay
	seeds         = stormstatstest.Seeds
)

const unix = stormstatstest.Unix

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
		l := &arrivallog.Log{Times: ts, Lines: make([]int32, len(ts))}
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
		l = &arrivallog.Log{Times: storm, Lines: make([]int32, len(storm))}
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
