package fleetsim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/testbroker"
)

// The engines agree on a few of make calibrate's cells at 300 devices, and
// the test fails when they drift apart. (Under the race detector, one.)
func TestEnginesAgree(t *testing.T) {
	cells := []fleetsim.CalibrationCell{
		{Scenario: fleetsim.BrokerRestart, Policy: "iotcore"},
		{Scenario: fleetsim.ThrottledRestart, Policy: "full", Mode: testbroker.PauseAccepting, AdmitRate: 30},
		// Not disconnect mode: the broker does a whole session's work for
		// every refused attempt, and at 10x on a busy host its backlog hands
		// the devices their disconnects together, which moved even full
		// jitter's p99 by 11 % at 300 devices (README: the calibration).
		{Scenario: fleetsim.ThrottledRestart, Policy: "full", Mode: testbroker.RefuseOverLimit, AdmitRate: 30},
		{Scenario: fleetsim.Flapping, Policy: "full"},
	}
	if raceDetector {
		cells = cells[:1]
	}
	var progress strings.Builder
	cal, err := fleetsim.Calibrate(context.Background(), cells, 300, 10, []uint64{1}, &progress)
	require.NoError(t, err)
	var table strings.Builder
	cal.Table(&table)
	t.Log("\n" + table.String())
	require.Len(t, cal.Rows, len(cells))
	for _, r := range cal.Rows {
		if raceDetector && r.Bound {
			// Under -race, beside the other packages' tests, the host is
			// often the bound: the race step runs this for its data races;
			// make test's stats step (no race detector, one package at a
			// time) holds the engines to agreement.
			t.Logf("%s: host-bound under the race detector; agreement not asserted here", r.Cell)
			continue
		}
		assert.True(t, r.Agree, "%s: %v", r.Cell, r.Apart)
		assert.False(t, r.Bound, "%s: the agents' run was host-bound", r.Cell)
	}
}

// The comparison itself: within 10 %, or 1 s and 0.1 attempts.
func TestCalibrationBounds(t *testing.T) {
	b := fleetsim.DefaultCalibrationBounds
	near := fleetsim.EngineFigures{P50S: 40, P99S: 60, AttemptsPerDevice: 6, AttemptsAfterReturn: 1}
	assert.Empty(t, b.Apart(near, fleetsim.EngineFigures{P50S: 43.9, P99S: 66, AttemptsPerDevice: 5.5, AttemptsAfterReturn: 1.1}))
	assert.Empty(t, b.Apart(fleetsim.EngineFigures{P50S: 1.5}, fleetsim.EngineFigures{P50S: 2.4}), "1 s floor for times")
	assert.Len(t, b.Apart(near, fleetsim.EngineFigures{P50S: 45, P99S: 60, AttemptsPerDevice: 6, AttemptsAfterReturn: 1.2}), 2)
}
