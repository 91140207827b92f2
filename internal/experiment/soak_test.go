package experiment_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/experiment"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
)

// A short soak in virtual time: 1,000 devices with telemetry through a
// drop-all, a broker restart and a throttled restart (make soak runs 10,000
// through ten, in wall-clock time, where it also holds the live heap to its
// baseline). Under the race detector, 200 devices.
func TestSoakReturnsToItsBaseline(t *testing.T) {
	sc := experiment.DefaultSoak()
	sc.Devices, sc.Storms, sc.Outage, sc.TimeScale, sc.Telemetry, sc.AdmitRate = 1000, 3, 10*time.Second, 1, 0.5, 200
	if fleetsimtest.RaceDetector {
		sc.Devices, sc.AdmitRate = 200, 50
	}
	var progress strings.Builder
	sc.Progress = &progress
	var rep *experiment.SoakReport
	var err error
	synctest.Test(t, func(*testing.T) { rep, err = experiment.Soak(context.Background(), sc) })
	require.NoError(t, err, progress.String())
	var sb strings.Builder
	rep.Summary(&sb)
	t.Log("\n" + progress.String() + sb.String())
	require.Len(t, rep.Storms, 3)
	for i, kind := range []string{string(plan.DropAll), string(plan.BrokerRestart), string(plan.ThrottledRestart)} {
		assert.Equal(t, kind, rep.Storms[i].Kind)
		assert.Equal(t, sc.Devices, rep.Storms[i].SessionsLost, "%s: every session ended once", kind)
		assert.Equal(t, rep.Baseline.Goroutines, rep.Storms[i].Goroutines, "%s: every goroutine a storm started has ended", kind)
	}
	// The live heap is not held to the baseline here: in a bubble it ends
	// a quarter above it after the first storm and stays there (27-34 MiB
	// against 24 at 1,000 devices), which make soak's wall-clock run does
	// not show; see docs/simulator.md's soak section.
	for _, p := range rep.Problems {
		if !strings.HasPrefix(p, "heap ") {
			t.Errorf("soak problem: %s", p)
		}
	}
	assert.Zero(t, rep.Telemetry.Lost)
	assert.LessOrEqual(t, rep.Telemetry.Duplicates, int64(rep.Telemetry.SessionsLost))
	assert.Greater(t, rep.Telemetry.Enqueued, uint64(sc.Devices), "telemetry flowed")
	assert.Equal(t, int64(rep.Telemetry.Enqueued), rep.Telemetry.ReceivedUnique)
}

func TestSoakRejectsBadConfig(t *testing.T) {
	for name, mod := range map[string]func(*experiment.SoakConfig){
		"no storms":    func(c *experiment.SoakConfig) { c.Storms = 0 },
		"no telemetry": func(c *experiment.SoakConfig) { c.Telemetry = 0 },
		"no admission": func(c *experiment.SoakConfig) { c.AdmitRate = 0 },
		"no devices":   func(c *experiment.SoakConfig) { c.Devices = 0 },
	} {
		sc := experiment.DefaultSoak()
		mod(&sc)
		_, err := experiment.Soak(context.Background(), sc)
		assert.Error(t, err, name)
	}
}
