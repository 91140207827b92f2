package hostload_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/hostload"
)

func TestScaleFollowsTheShareAndTheFleet(t *testing.T) {
	for _, tc := range []struct {
		most, share float64
		devices     int
		want        float64
	}{
		{4, 1, 2000, 4},   // the default run on an idle host
		{4, 0.9, 2000, 4}, // an idle host reads a little under 1
		{4, 0.8, 2000, 2}, // a busy one: the next power of two down
		{4, 0.5, 2000, 2}, // one CPU-bound job beside it on two cores
		{4, 0.3, 2000, 1}, // most of the host taken
		{4, 1, 20_000, 1}, // ten times the fleet
		{4, 1, 4000, 2},   // twice the fleet
		{10, 1, 500, 8},   // a small fleet: never above most
		{3, 1, 100, 2},    // most need not be a power of two
		{4, 0, 2000, 1},   // a host that gives nothing: 1
		{4, 1, 0, 4},      // no devices: as one
	} {
		assert.Equal(t, tc.want, hostload.Scale(tc.most, tc.share, tc.devices), "%+v", tc)
	}
}

func TestSlowerHalvesDownToOne(t *testing.T) {
	for _, tc := range []struct {
		scale, want float64
		ok          bool
	}{{4, 2, true}, {2, 1, true}, {3, 1.5, true}, {1.5, 1, true}, {1, 1, false}} {
		got, ok := hostload.Slower(tc.scale)
		assert.Equal(t, tc.want, got, tc.scale)
		assert.Equal(t, tc.ok, ok, tc.scale)
	}
}

// Share is a fraction of the cores: never above 1, and above 0 for a
// process that spun on every core (it cannot be starved entirely for
// 50 ms by anything a test machine runs).
func TestShareIsAFractionOfTheCores(t *testing.T) {
	s := hostload.Share(50 * time.Millisecond)
	assert.Greater(t, s, 0.0)
	assert.LessOrEqual(t, s, 1.0)
}

func TestTheProcessKnowsWhatItHolds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	now, peak := hostload.Resident()
	assert.Positive(t, now)
	assert.GreaterOrEqual(t, peak, now, "the peak is at least what is held now")
	assert.Positive(t, hostload.CPU())
}
