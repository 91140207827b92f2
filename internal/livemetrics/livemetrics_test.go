package livemetrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/livemetrics"
	"github.com/herdguard/herdguard/internal/plan"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scrape reads every metric the handler serves, by name (and outcome).
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(rec.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A real fleet through a broker restart, in virtual time, scraped through
// the server's handler: the counts agree with the run's own report.
func TestServesTheFleetsCountsAsItRuns(t *testing.T) {
	synctest.Test(t, testServesTheFleetsCounts)
}

func testServesTheFleetsCounts(t *testing.T) {
	fleet := livemetrics.NewFleet()
	h := fleet.Handler()
	p := plan.Default()
	p.Devices, p.TimeScale, p.Policy = 100, 1, "fleet-safe"
	p.Metrics = fleet
	var during map[string]float64
	p.Ready = func() { during = scrape(t, h) } // the fleet is up, the disruption next
	r, err := fleetsim.Run(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, 100.0, during["herdguard_devices_connected"])
	assert.Zero(t, during["herdguard_disruption_timestamp_seconds"])
	got := scrape(t, h)
	assert.Equal(t, 100.0, got["herdguard_devices"])
	assert.Zero(t, got["herdguard_devices_connected"], "the run stopped its agents")
	assert.Equal(t, 100.0, got["herdguard_devices_recovered"], "every device back since the disruption")
	assert.Equal(t, 100.0, got["herdguard_sessions_lost_total"], "the disruption's; a stop is not a loss")
	assert.InDelta(t, float64(r.DisruptionUnixMS)/1000, got["herdguard_disruption_timestamp_seconds"], 0.001)
	// The boot's attempts, then the run's: the report counts from the
	// disruption, every attempt a device made.
	total := got["herdguard_connect_attempts_total{accepted}"] + got["herdguard_connect_attempts_total{refused}"] +
		got["herdguard_connect_attempts_total{failed}"]
	assert.Equal(t, float64(during["herdguard_connect_attempts_total{accepted}"])+float64(r.Attempts.Total), total)
	assert.Equal(t, 200.0, got["herdguard_connect_attempts_total{accepted}"], "one session at boot and one after, each")
	assert.Equal(t, float64(r.Attempts.Refused), got["herdguard_connect_attempts_total{failed}"], "dials refused while the broker was down")
}

// Serve puts the handler on a real listener (real time: it asserts only
// that Prometheus can read it there).
func TestServeListensOverHTTP(t *testing.T) {
	fleet := livemetrics.NewFleet()
	fleet.Start(3)
	addr, stop, err := fleet.Serve("127.0.0.1:0")
	require.NoError(t, err)
	defer stop()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, 3.0, families["herdguard_devices"].GetMetric()[0].GetGauge().GetValue())
}
