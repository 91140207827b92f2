package proxystorm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/proxystorm"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/testbroker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is the real-time bound on a storm these tests make.
const bound = time.Minute

// fleetOf starts n device agents (the firmware's own, with the mission's
// formula) against addr, stopped when the test ends.
func fleetOf(t *testing.T, addr string, n int) {
	t.Helper()
	for i := range n {
		tm := device.DefaultTiming()
		tm.BootSpread = 200 * time.Millisecond
		a, err := device.New(device.Config{Broker: "tcp://" + addr, ClientID: fmt.Sprintf("dev-%d", i), Timing: &tm,
			Source: rand.NewPCG(uint64(i), 1)})
		require.NoError(t, err)
		require.NoError(t, a.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			_ = a.Stop(ctx)
		})
	}
}

func newBroker(t *testing.T) string {
	t.Helper()
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b.URL()[len("tcp://"):]
}

// stormOf runs p through the proxy in front of a test broker against n
// agents the storm did not start, once they are all connected, and
// returns its report; every attempt is identified by its client ID.
func stormOf(t *testing.T, p plan.Plan, n int) *report.Report {
	t.Helper()
	s, err := proxystorm.New(proxystorm.Config{Plan: p, Brokers: []string{newBroker(t)}, AwaitSessions: n, Identify: true,
		Watch: bound})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	fleetOf(t, s.Addrs()[0], n)
	rep, err := s.Run(context.Background())
	require.NoError(t, err)
	return rep
}

// A fleet the storm did not start, pointed at the proxy, is struck once
// it is all connected: the proxy restarts its broker for 3 s. The report
// names every device by its client ID, counts its refused attempts, and
// sees it all back.
func TestAFleetThroughTheProxyIsStruckAndSeenBack(t *testing.T) {
	p := plan.Default()
	p.Scenario, p.Outage = plan.BrokerRestart, 3*time.Second
	rep := stormOf(t, p, 20)
	var sum strings.Builder
	rep.Summary(&sum)
	t.Log(sum.String())
	assert.Equal(t, 20, rep.Devices)
	require.NotNil(t, rep.External)
	assert.Equal(t, 20, rep.External.ByClientID)
	assert.Zero(t, rep.External.NeverBackCount)
	assert.True(t, rep.Recovery.AllRecovered)
	assert.GreaterOrEqual(t, rep.Recovery.P50S, 3.0, "none back before the broker")
	require.NotNil(t, rep.Proxy)
	assert.Positive(t, rep.Proxy.Refused, "the attempts during the outage")
	assert.Equal(t, rep.Proxy.Admitted+rep.Proxy.Refused, int(rep.Attempts.Total))
	assert.Zero(t, rep.Stranded())
}

// A connection the proxy holds for a token reaches the broker when the
// proxy passes it on: 20 devices back from a 3 s outage into a limit of 5
// connects a second, held over it, come back over at least 3.8 s after the
// broker's return, not at their arrival at the proxy. A busy host can only
// make that later.
func TestAHeldConnectionReachesTheBrokerWhenPassedOn(t *testing.T) {
	p := plan.Default()
	p.Scenario, p.Outage = plan.ThrottledRestart, 3*time.Second
	p.AdmitRate, p.AdmitBurst, p.AdmitMode = 5, 1, fault.PauseOverLimit
	rep := stormOf(t, p, 20)
	assert.True(t, rep.Recovery.AllRecovered)
	assert.GreaterOrEqual(t, rep.Recovery.MaxS-rep.BrokerBackS, 3.8*0.95, "19 held devices at 5 a second")
	require.NotNil(t, rep.Broker)
	assert.GreaterOrEqual(t, rep.Broker.Arrivals.SpanS, 3.8*0.95, "the broker took them as the proxy passed them")
}

// What a proxy cannot make is refused up front, naming why.
func TestWhatAProxyCannotMakeIsRefused(t *testing.T) {
	for sc, want := range map[plan.Scenario]string{
		plan.BootStorm:    "boots a fleet of devicesim's own agents",
		plan.ConfigOutage: "needs devicesim's own agents or broker",
		plan.BusyNode:     "the broker's own doing",
	} {
		p := plan.Default()
		p.Scenario = sc
		_, err := proxystorm.New(proxystorm.Config{Plan: p, Brokers: []string{"127.0.0.1:1"}, AwaitSessions: 1})
		require.ErrorIs(t, err, proxystorm.ErrInvalid, sc)
		assert.ErrorContains(t, err, want)
	}
	_, err := proxystorm.New(proxystorm.Config{Plan: plan.Default(), Brokers: []string{"127.0.0.1:1"}})
	assert.ErrorContains(t, err, "nothing would start the storm")
	_, err = proxystorm.New(proxystorm.Config{Plan: plan.Default(), Brokers: []string{"localhost"}, Manual: true})
	assert.ErrorContains(t, err, "is not HOST:PORT")
}

// The control API drives a storm from any language: a disruption begun
// with no outage lasts until DELETE, POST /finish ends the watch, and the
// report is there once written. Bodies are strict and a token, if set, is
// required.
func TestTheControlAPIDrivesAStorm(t *testing.T) {
	p := plan.Default()
	s, err := proxystorm.New(proxystorm.Config{Plan: p, Brokers: []string{newBroker(t)}, Manual: true, Identify: true, Watch: bound})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	api := httptest.NewServer(s.Handler("s3cret"))
	defer api.Close()
	schema := apiSchema(t)
	call := func(method, path, body string, token bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, api.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if token {
			req.Header.Set("Authorization", "Bearer s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		switch {
		case resp.StatusCode >= 400:
			schema(t, "error", b)
		case path == "/status" || path == "/disruptions" || path == "/finish":
			schema(t, "status", b)
		}
		return resp.StatusCode, string(b)
	}
	code, _ := call("GET", "/status", "", false)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body := call("GET", "/status", "", true)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"state": "waiting"`)

	for bad, want := range map[string]string{
		`{"scenario":"broker-restart","outage":"5s","nope":1}`: "unknown field",
		`{"scenario":"broker-restart","scenario":"drop-all"}`:  "twice",
		`{"scenario":"boot-storm"}`:                            "boots a fleet",
		`{"scenario":"broker-restart","outage":"forever"}`:     "a duration such as 30s",
		`{"scenario":"broker-restart"} {}`:                     "after the JSON object",
		`[]`:                                                   "one JSON object",
		`{"scenario":"broker-restart","node":3}`:               "no node 3",
	} {
		code, body := call("POST", "/disruptions", bad, true)
		assert.Equal(t, http.StatusBadRequest, code, bad)
		assert.Contains(t, body, want, bad)
	}

	fleetOf(t, s.Addrs()[0], 10)
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background())
		done <- err
	}()
	awaitSessions(t, s, 10)
	code, body = call("POST", "/disruptions", `{"scenario":"broker-restart"}`, true)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Contains(t, body, `"open": {`)
	code, body = call("POST", "/disruptions", `{"scenario":"drop-all"}`, true)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "still in force")
	code, _ = call("GET", "/report", "", true)
	assert.Equal(t, http.StatusConflict, code, "no report while the storm runs")
	code, _ = call("DELETE", "/disruptions/open", "", true)
	assert.Equal(t, http.StatusNoContent, code)
	awaitSessions(t, s, 10)
	code, _ = call("POST", "/finish", "", true)
	assert.Equal(t, http.StatusAccepted, code)
	require.NoError(t, <-done)
	s.Wrote("report.json", []byte(`{"devices": 10}`))
	code, body = call("GET", "/report", "", true)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, `{"devices": 10}`, body)
}

func awaitSessions(t *testing.T, s *proxystorm.Storm, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	require.NoError(t, s.AwaitSessions(ctx, n))
}

// apiSchema checks a body against docs/proxy-api.schema.json's definition
// of it.
func apiSchema(t *testing.T) func(t *testing.T, def string, body []byte) {
	raw, err := os.Open("../../docs/proxy-api.schema.json")
	require.NoError(t, err)
	defer raw.Close()
	doc, err := jsonschema.UnmarshalJSON(raw)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("proxy-api.schema.json", doc))
	return func(t *testing.T, def string, body []byte) {
		t.Helper()
		sch, err := c.Compile("proxy-api.schema.json#/$defs/" + def)
		require.NoError(t, err)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		require.NoError(t, err, string(body))
		assert.NoError(t, sch.Validate(v), string(body))
	}
}
