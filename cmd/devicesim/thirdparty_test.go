package main

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/stormstatstest"
	"github.com/herdguard/herdguard/internal/thirdparty"
)

// thirdPartyFleet is 200 clients of a library written by others, on its
// own reconnect or with full jitter added by the test, and what devicesim
// proxy must say of them: the verdict, and the policy with its base and
// factor (read from each library's source: internal/thirdparty).
type thirdPartyFleet struct {
	name   string
	start  func(testing.TB, string, int, thirdparty.Options) *thirdparty.Fleet
	jitter thirdparty.Jitter
	want   stormstats.Verdict
	family string
	base   time.Duration
	factor float64
}

var thirdPartyFleets = []thirdPartyFleet{
	{"paho-python", thirdparty.StartPahoPython, thirdparty.Jitter{}, stormstats.Waves, "exponential", time.Second, 2},
	{"mqttjs", thirdparty.StartMQTTJS, thirdparty.Jitter{}, stormstats.Waves, "constant", time.Second, 0},
	{"paho-go", thirdparty.StartPahoGo, thirdparty.Jitter{}, stormstats.Waves, "exponential", time.Second, 2},
	{"paho-python/full-jitter", thirdparty.StartPahoPython, thirdparty.FullJitter, stormstats.Spread, "full", time.Second, 2},
	{"mqttjs/full-jitter", thirdparty.StartMQTTJS, thirdparty.FullJitter, stormstats.Spread, "full", time.Second, 2},
	{"paho-go/full-jitter", thirdparty.StartPahoGo, thirdparty.FullJitter, stormstats.Spread, "full", time.Second, 2},
}

// Fleets written by others, 200 clients each, through devicesim proxy to
// mosquitto, a 20 s restart: each library's own reconnect comes back in
// waves and its policy is named (its family, base and factor); the same
// clients with full jitter come back spread, their policy named full. The
// six storms run at once (they mostly wait): about a minute of wall time.
func TestThirdPartyFleetsThroughDevicesimProxy(t *testing.T) {
	if stormstatstest.RaceDetector {
		t.Skip("real-time storms: make test runs them without the race detector (make interop)")
	}
	t.Parallel() // beside the other real-time storms
	var storms sync.WaitGroup
	for _, tc := range thirdPartyFleets {
		storms.Go(func() { t.Run(tc.name, func(t *testing.T) { thirdPartyStorm(t, tc) }) })
	}
	storms.Wait()
}

func thirdPartyStorm(t *testing.T, tc thirdPartyFleet) {
	broker := mosquittotest.Start(t, "")
	dir := t.TempDir()
	addr, out, done := proxyRun(t, "-broker", broker.Addr(), "-await-sessions", "200", "-outage", "20s", "-identify",
		"-watch", "90s", "-out", dir)
	tc.start(t, addr, 200, thirdparty.Options{Jitter: tc.jitter})
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(3 * time.Minute):
		t.Fatal("the storm did not end")
	}
	r, err := report.ReadReport(dir)
	require.NoError(t, err)
	t.Logf("%s: %s; policy %+v", tc.name, r.Verdict, r.Inferred)
	assert.Equal(t, 200, r.Devices)
	assert.True(t, r.Recovery.AllRecovered, out.String())
	assert.Equal(t, tc.want, r.Verdict, out.String())
	require.NotNil(t, r.Inferred)
	if tc.family == "" {
		return
	}
	fit := r.Inferred.Fleet
	require.Empty(t, fit.CannotTell, out.String())
	assert.Equal(t, tc.family, fit.Family, out.String())
	assert.InEpsilon(t, tc.base.Seconds(), fit.BaseS, 0.2, "base")
	if tc.factor > 0 {
		assert.InEpsilon(t, tc.factor, fit.Factor, 0.1, "factor")
	}
}
