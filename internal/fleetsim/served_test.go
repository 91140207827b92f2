package fleetsim_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// boundAbove is a run whose host binds it at every scale above limit.
func boundAbove(limit float64, scales *[]float64) func(plan.Plan) (*report.Report, error) {
	return func(p plan.Plan) (*report.Report, error) {
		*scales = append(*scales, p.TimeScale)
		r := &report.Report{Setup: report.Setup{Policy: p.Policy}}
		if p.TimeScale > limit {
			r.Host = report.Host{Bound: true, NoticeP99S: 0.644}
		}
		return r, nil
	}
}

// A run that leaves its scale to the host runs again at half the scale
// while the host binds it; one given its scale runs once, and reports it.
func TestARunTheHostBoundRunsAgainSlower(t *testing.T) {
	p := plan.Default()
	var scales []float64
	var out bytes.Buffer
	r, served, err := fleetsim.SlowerWhileBound(context.Background(), p, &out, boundAbove(1, &scales))
	require.NoError(t, err)
	assert.Equal(t, []float64{4, 2, 1}, scales)
	assert.Equal(t, 1.0, served.TimeScale)
	assert.False(t, r.Host.Bound)
	assert.Contains(t, out.String(), "the host set this run's times at 4x (644 ms late at the 99th percentile): running it again at 2x")

	scales = nil
	p.AutoScale = false // -time-scale 4
	r, served, err = fleetsim.SlowerWhileBound(context.Background(), p, &out, boundAbove(1, &scales))
	require.NoError(t, err)
	assert.Equal(t, []float64{4}, scales)
	assert.Equal(t, 4.0, served.TimeScale)
	assert.True(t, r.Host.Bound, "reported as the host bound it")
}
