package fleetsim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
)

// A short soak: 1,000 devices with telemetry through a drop-all, a broker
// restart and a throttled restart (make soak runs 10,000 through ten).
// Under the race detector, 200 devices.
func TestSoakReturnsToItsBaseline(t *testing.T) {
	sc := fleetsim.DefaultSoak()
	sc.Devices, sc.Storms, sc.Outage, sc.TimeScale, sc.Telemetry, sc.AdmitRate = 1000, 3, 10*time.Second, 10, 0.5, 200
	if raceDetector {
		sc.Devices, sc.AdmitRate = 200, 50
	}
	var progress strings.Builder
	sc.Progress = &progress
	rep, err := fleetsim.Soak(context.Background(), sc)
	require.NoError(t, err, progress.String())
	var sb strings.Builder
	rep.Summary(&sb)
	t.Log("\n" + progress.String() + sb.String())
	require.Len(t, rep.Storms, 3)
	for i, kind := range []string{fleetsim.DropAll, fleetsim.BrokerRestart, fleetsim.ThrottledRestart} {
		assert.Equal(t, kind, rep.Storms[i].Kind)
		assert.Equal(t, sc.Devices, rep.Storms[i].SessionsLost, "%s: every session ended once", kind)
	}
	assert.True(t, rep.Pass, rep.Problems)
	assert.Zero(t, rep.Telemetry.Lost)
	assert.Greater(t, rep.Telemetry.Enqueued, uint64(sc.Devices), "telemetry flowed")
	assert.Equal(t, int64(rep.Telemetry.Enqueued), rep.Telemetry.ReceivedUnique)
	assert.Contains(t, sb.String(), "pass")
}

func TestSoakRejectsBadConfig(t *testing.T) {
	for name, mod := range map[string]func(*fleetsim.SoakConfig){
		"no storms":    func(c *fleetsim.SoakConfig) { c.Storms = 0 },
		"no telemetry": func(c *fleetsim.SoakConfig) { c.Telemetry = 0 },
		"no admission": func(c *fleetsim.SoakConfig) { c.AdmitRate = 0 },
		"no devices":   func(c *fleetsim.SoakConfig) { c.Devices = 0 },
	} {
		sc := fleetsim.DefaultSoak()
		mod(&sc)
		_, err := fleetsim.Soak(context.Background(), sc)
		assert.Error(t, err, name)
	}
}
