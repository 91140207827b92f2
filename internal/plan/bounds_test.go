package plan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/plan"
)

// A duration over its bound is an error naming the setting and the bound;
// the bound itself is taken.
func TestCheckDurationNamesTheSettingAndTheBound(t *testing.T) {
	assert.NoError(t, plan.CheckDuration("-max-backoff", plan.MaxWait, plan.MaxWait))
	assert.EqualError(t, plan.CheckDuration("-max-backoff", 2_000_000*time.Hour, plan.MaxWait), "-max-backoff 2000000h0m0s: at most 24h0m0s")
}

// At every bound at once the recovery bound stays a positive sum; an
// admission too slow to let the fleet in within what a run watches is
// refused, where its share of that sum wrapped round (a rate of 1e-10 a
// second read "0 of 10 within -2562047h").
func TestTheBoundsKeepTheRecoveryBoundPositive(t *testing.T) {
	p := plan.Default()
	p.Engine, p.MaxBackoff, p.Outage = plan.Virtual, plan.MaxWait, plan.MaxDisruption
	p.AdmitRate = float64(p.Devices) / plan.MaxSpan.Seconds()
	require.NoError(t, p.Validate())
	assert.Equal(t, plan.MaxDisruption+20*plan.MaxWait+time.Minute+3*plan.MaxSpan, p.RecoveryBound(p.Devices).Round(time.Second))

	p.AdmitRate = 1e-10
	assert.EqualError(t, p.Validate(), "admission rate 1e-10 a second lets 2000 devices in over 5.56e+09 h: at most 168h0m0s")
}
