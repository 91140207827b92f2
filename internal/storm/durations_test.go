package storm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/storm"
)

// A duration past its bound is refused, naming its key and the bound,
// before a plan is made: a 2,000,000 h cap wrapped the recovery bound
// round to -992,764 h, and an outage that long kept the model busy for
// ever. The bounds themselves are taken.
func TestDurationsPastTheirBoundsAreRefusedByKey(t *testing.T) {
	const fleet, timeline = "fleet: [{devices: 10}]\n", "timeline: [{disruption: drop-all}]\n"
	for _, tc := range []struct{ text, want string }{
		{"engine: virtual\nfleet: [{devices: 10, max_backoff: 2000000h}]\n" + timeline,
			"fleet[0].max_backoff 2000000h0m0s: at most 24h0m0s"},
		{"engine: virtual\n" + fleet + "timeline: [{disruption: broker-restart, outage: 2000000h}]\n",
			"timeline[0].outage 2000000h0m0s: at most 24h0m0s"},
		{fleet + "timeline: [{disruption: drop-all}, {at: 2000000h, disruption: drop-all}]\n",
			"timeline[1].at 2000000h0m0s: at most 168h0m0s"},
		{fleet + "timeline: [{disruption: flapping, flap: 25h}]\n", "timeline[0].flap 25h0m0s: at most 24h0m0s"},
		{fleet + "timeline: [{disruption: drop-all, watch: 2000000h}]\n", "timeline[0].watch 2000000h0m0s: at most 168h0m0s"},
		{"fleet: [{devices: 10, keepalive: 65536s}]\n" + timeline, "fleet[0].keepalive 18h12m16s: at most 18h12m15s"},
		{"fleet: [{name: a, devices: 5}, {name: b, devices: 5, boot_spread: 2000000h}]\n" + timeline,
			"fleet[1].boot_spread 2000000h0m0s: at most 24h0m0s"},
		{fleet + timeline + "expect: {recovery_p99: 2000000h}\n", "expect.recovery_p99 2000000h0m0s: at most 168h0m0s"},
		{fleet + timeline + "plan: {target_p99: 2000000h}\n", "plan.target_p99 2000000h0m0s: at most 168h0m0s"},
	} {
		f, err := read(t, tc.text)
		require.NoError(t, err, tc.text)
		_, _, err = f.Plan()
		assert.ErrorIs(t, err, storm.ErrInvalid, tc.text)
		assert.ErrorContains(t, err, tc.want, tc.text)
	}
	f, err := read(t, "engine: virtual\nfleet: [{devices: 10, max_backoff: 24h, keepalive: 65535s}]\n"+
		"timeline: [{disruption: broker-restart, outage: 24h}, {at: 168h, disruption: drop-all}]\n")
	require.NoError(t, err)
	p, _, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour+20*24*time.Hour+time.Minute, p.RecoveryBound(p.Devices), "no sum of the bounds wraps round")
}
