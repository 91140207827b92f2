package agents_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/agents"
	"github.com/herdguard/herdguard/internal/plan"
)

// -disrupt-at strikes at the instant it names, on the wall clock: an
// instant, or a span after the fleet is up; one already past when the
// fleet is up is refused, and nothing is struck.
func TestTheStormStrikesWhenDisruptAtSays(t *testing.T) {
	run := func(at plan.DisruptAt) (*plan.Plan, int64, error) {
		var strike int64
		var err error
		p := plan.Default()
		synctest.Test(t, func(t *testing.T) {
			p.Scenario, p.Policy, p.Devices, p.TimeScale = plan.DropAll, "full", 40, 1
			if !at.At.IsZero() {
				at.At = time.Now().Add(time.Duration(at.At.Unix()) * time.Second) // bubble time: its epoch, 2000
			}
			p.DisruptAt = at
			require.NoError(t, p.Validate())
			r, runErr := agents.Run(context.Background(), p)
			if err = runErr; err == nil {
				assert.Equal(t, at.String(), r.Sync.DisruptAt)
				assert.Equal(t, r.Sync.StrikeUnixMS, r.DisruptionUnixMS, "struck at the instant")
				strike = r.Sync.StrikeUnixMS
			}
		})
		return &p, strike, err
	}

	p, strike, err := run(plan.DisruptAt{At: time.Unix(600, 0)}) // ten minutes after the test begins
	require.NoError(t, err)
	assert.Equal(t, p.DisruptAt.At.UnixMilli(), strike)

	_, strike, err = run(plan.DisruptAt{After: 5 * time.Minute})
	require.NoError(t, err)
	up := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(10 * time.Second).UnixMilli() // the boot spread, at most
	assert.InDelta(t, float64(up+5*60_000), float64(strike), 10_000, "five minutes after the fleet was up")

	_, _, err = run(plan.DisruptAt{At: time.Unix(-1, 0)}) // a second before the test began
	assert.ErrorContains(t, err, "had passed")
}
