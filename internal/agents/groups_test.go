package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/reconnect"
)

// onBothEngines runs c on real agents in virtual time and on the model.
func onBothEngines(t *testing.T, p plan.Plan) map[plan.Engine]*report.Report {
	out := map[plan.Engine]*report.Report{}
	for _, e := range []plan.Engine{plan.Agents, plan.Virtual} {
		p.Engine = e
		var r *report.Report
		var err error
		if e == plan.Agents {
			r, err = fleetsimtest.InVirtualTime(t, p)
		} else {
			r, err = fleetsim.Run(context.Background(), p)
		}
		require.NotNil(t, r, "%s: %v", e, err)
		out[e] = r
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// Groups may differ in more than their policy, and both engines honour
// what they can: each group's boot spread and retry cap.
func TestGroupsDifferInBootSpreadAndRetryCapOnBothEngines(t *testing.T) {
	p := fleetsimtest.Plan(plan.BootStorm, "full", 200)
	p.Groups = []plan.Group{{Name: "quick", Devices: 100, BootSpread: 5 * time.Second},
		{Name: "slow", Devices: 100, BootSpread: 20 * time.Second}}
	for e, r := range onBothEngines(t, p) {
		require.Len(t, r.Groups, 2, e)
		assert.Less(t, r.Groups[0].Recovery.MaxS, 5.0, "%s: inside its own 5 s", e)
		assert.Greater(t, r.Groups[1].Recovery.MaxS, 5.0, "%s: beyond the other group's", e)
		assert.Less(t, r.Groups[1].Recovery.MaxS, 20.0, e)
	}

	p = fleetsimtest.Plan(plan.BrokerRestart, "iotcore", 200)
	p.Outage = time.Minute
	p.Groups = []plan.Group{{Name: "gives up", Devices: 100, RetryCap: ptr(3)}, {Name: "forever", Devices: 100, RetryCap: ptr(reconnect.RetryForever)}}
	for e, r := range onBothEngines(t, p) {
		require.Len(t, r.Groups, 2, e)
		assert.Zero(t, r.Groups[0].Recovery.P99S, "%s: gave up after 1, 2 and 4 s, inside the outage", e)
		assert.False(t, r.Groups[0].Recovery.AllRecovered, e)
		assert.EqualValues(t, 3*100, r.Groups[0].Attempts.Total, "%s: three attempts after the lost session, at 1, 3 and 7 s", e)
		assert.True(t, r.Groups[1].Recovery.AllRecovered, e)
	}
}

// On real agents a group also keeps its own keepalive and telemetry; the
// model refuses a group's telemetry, which needs real devices.
func TestGroupsKeepTheirOwnKeepaliveAndTelemetryOnRealAgents(t *testing.T) {
	p := fleetsimtest.Plan(plan.Blackhole, "fleet-safe", 200)
	p.Outage = 2 * time.Minute
	p.Groups = []plan.Group{{Name: "chatty", Devices: 100, KeepAlive: 10 * time.Second, PingTimeout: 5 * time.Second, Telemetry: ptr(1.0)},
		{Name: "quiet", Devices: 100, KeepAlive: 60 * time.Second}}
	r, err := fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	require.NotNil(t, r.Noticed)
	assert.Equal(t, 200, r.Noticed.Devices)
	assert.LessOrEqual(t, r.Noticed.P50S, 10+5+2.5, "the chatty half within its keepalive, ping timeout and a check")
	assert.Greater(t, r.Noticed.MaxS, 30+10+7.5, "only the quiet group's 60 s keepalive explains a notice this late")
	require.NotNil(t, r.Telemetry)
	assert.Equal(t, 0.5, r.Telemetry.RatePerDevice, "half the fleet at one a second")
	assert.Positive(t, r.Telemetry.Enqueued)
	assert.Equal(t, int(r.Telemetry.Enqueued), r.Telemetry.ReceivedUnique)
	assert.Zero(t, r.Telemetry.Lost)

	p.Engine = plan.Virtual
	p.Scenario = plan.BrokerRestart
	assert.ErrorContains(t, p.Validate(), "need real devices")
}
