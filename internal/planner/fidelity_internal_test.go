package planner

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsimtest"
)

// A storm screened on a fleet scaled down, its broker with it, predicts
// the full fleet's recovery p99 and attempts a device: each candidate,
// seed by seed, at the question's outage. make test's stats step runs
// 100,000 devices screened on 5,000 (a twentieth), seeds 1 to 3: p99 off
// by 11.3 % at most, attempts by 1.5 %. HERDGUARD_PLAN_FIDELITY=
// DEVICES,SCREEN,SEEDS runs another: docs/plan.md has a million on 10,000.
func TestAScaledDownFleetPredictsTheFullOne(t *testing.T) {
	if fleetsimtest.RaceDetector {
		t.Skip("the model alone, 72 runs: make test's stats step runs it")
	}
	devices, screen, seeds := 100_000, 5_000, uint64(3)
	if v := os.Getenv("HERDGUARD_PLAN_FIDELITY"); v != "" {
		_, err := fmt.Sscanf(v, "%d,%d,%d", &devices, &screen, &seeds)
		require.NoError(t, err)
	}
	q := Question{Devices: devices, AdmitRate: float64(devices) / 100, Seeds: seeds}.withDefaults()
	var worstP99, worstAtt, sumP99, sumAtt float64
	n := 0
	for _, f := range []string{"full", "equal", "decorrelated", "fleet-safe"} {
		for _, c := range []time.Duration{16 * time.Second, 64 * time.Second, 256 * time.Second} {
			cand := Candidate{Policy: f, MaxBackoff: c}
			for s := range seeds {
				small, err := measure(context.Background(), q, stormPlan(q, cand, screen, q.Seed+s, q.Outage), false)
				require.NoError(t, err)
				full, err := measure(context.Background(), q, stormPlan(q, cand, devices, q.Seed+s, q.Outage), false)
				require.NoError(t, err)
				dp, da := math.Abs(small.p99-full.p99)/full.p99, math.Abs(small.attempts-full.attempts)/full.attempts
				worstP99, worstAtt = max(worstP99, dp), max(worstAtt, da)
				sumP99, sumAtt = sumP99+dp, sumAtt+da
				n++
				t.Logf("%-24s seed %d  p99 %7.1f / %7.1f  attempts %5.2f / %5.2f  peak %8.0f / %8.0f", cand, q.Seed+s,
					small.p99, full.p99, small.attempts, full.attempts, small.peak, full.peak)
			}
		}
	}
	t.Logf("%s devices on %s: p99 off by %.1f %% at most (%.1f %% on average), attempts by %.1f %% (%.1f %%), over %d runs",
		strconv.Itoa(devices), strconv.Itoa(screen), 100*worstP99, 100*sumP99/float64(n), 100*worstAtt, 100*sumAtt/float64(n), n)
	assert.Less(t, worstP99, 0.15, "p99")
	assert.Less(t, worstAtt, 0.05, "attempts")
}
