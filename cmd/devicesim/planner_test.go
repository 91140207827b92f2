package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/planner"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstatstest"
	"github.com/herdguard/herdguard/remoteconfig"
)

// planArgs is a question the model answers in a second: 2,000 devices
// behind 20 connects a second, one seed, screened on 500, three families
// at two caps.
var planArgs = []string{"plan", "-devices", "2000", "-admit-rate", "20", "-outage", "30s", "-seeds", "1", "-screen-devices", "500",
	"-policies", "iotcore,full,fleet-safe,iotcore:jitter=10s", "-caps", "16s,1m"}

// devicesim plan answers with a recommendation and writes what puts it
// to use: the answer, a storm file that checks it, the firmware's Go, and
// for the formula a fleet in the field can take, its remote
// configuration and deviceagent flags.
func TestPlanWritesWhatPutsTheAnswerToUse(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), append(planArgs, "-check-devices", "200", "-target-p99", "5m", "-out", dir), noenv, nil, &out, &out)
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "recommendation: ")
	assert.Contains(t, out.String(), "frontier")
	assert.Contains(t, out.String(), "rejected:")
	assert.Contains(t, out.String(), "devicesim run -f "+filepath.Join(dir, "check.yaml"))

	var a planner.Answer
	b, err := os.ReadFile(filepath.Join(dir, "answer.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &a))
	require.NotNil(t, a.Recommendation)
	require.NotNil(t, a.Field, "the best formula a remote configuration can set")
	doc, err := os.ReadFile(filepath.Join(dir, "remote-config.json"))
	require.NoError(t, err)
	var d remoteconfig.Document
	require.NoError(t, json.Unmarshal(doc, &d))
	assert.NoError(t, remoteconfig.DefaultBounds.Check(d))
	flags, err := os.ReadFile(filepath.Join(dir, "deviceagent.flags"))
	require.NoError(t, err)
	assert.Regexp(t, `^-reconnect-base \S+ -reconnect-jitter \S+ -max-backoff \S+\n$`, string(flags))
	code, err := os.ReadFile(filepath.Join(dir, "policy.go.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(code), "reconnect.New(")
	frontier, err := os.ReadFile(filepath.Join(dir, "frontier.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(frontier), "the recommendation: ")
	assert.Contains(t, string(frontier), "the frontier: none beats these on both")
	check, err := os.ReadFile(filepath.Join(dir, "check.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(check), "devices: 200")
	assert.Contains(t, string(check), `external: {url: "${MQTT_BROKER}"}`)
	assert.Regexp(t, `\n  fleet_busiest_second: \d+\n`, string(check), "the predicted dials bound the fleet's side, which the proxy sees")
}

// A question no policy answers is refused with the closest and what
// would have to change; one that cannot be asked is refused before
// anything runs; -f takes only the flags that do not describe the storm.
func TestPlanRefusesWhatItCannotAnswer(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), append(planArgs, "-target-p99", "20s", "-out", t.TempDir()), noenv, nil, &out, &out)
	require.ErrorIs(t, err, planner.ErrNoPolicy)
	assert.Contains(t, out.String(), "no policy meets the bounds; the closest: ")
	assert.Regexp(t, `needs a \d+ s target, or a broker admitting about \d+ connects/s`, err.Error())

	err = run(context.Background(), []string{"plan", "-devices", "0", "-admit-rate", "20"}, noenv, nil, &out, &out)
	assert.ErrorIs(t, err, planner.ErrInvalid)
	err = run(context.Background(), []string{"plan", "-devices", "10", "-admit-rate", "20", "-mix", "iotcore@32s=2"}, noenv, nil, &out, &out)
	assert.ErrorContains(t, err, "within 0 and 1")
	err = run(context.Background(), []string{"plan", "-f", "x.yaml", "-devices", "10"}, noenv, nil, &out, &out)
	assert.ErrorContains(t, err, "-devices: with -f, the file says it")
}

// A storm file's plan: section asks the same question as the flags, of
// the file's fleet, admission and outage.
func TestPlanReadsAStormFilesPlanSection(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`engine: virtual
fleet:
  - devices: 2000
    policy: iotcore
brokers:
  admission: {rate: 20, burst: 1, mode: refuse}
timeline:
  - disruption: throttled-restart
    outage: 30s
plan:
  target_p99: 3m
  max_attempts: 6
  current: iotcore@32s
  current_share: 0.5
  seeds: 1
`), 0o644))
	var out bytes.Buffer
	err := run(context.Background(), []string{"plan", "-f", file, "-screen-devices", "500", "-out", dir, "-json",
		"-policies", "iotcore,full,fleet-safe", "-caps", "16s,1m"}, noenv, nil, &out, &out)
	require.NoError(t, err, out.String())
	var a planner.Answer
	require.NoError(t, json.Unmarshal(out.Bytes(), &a))
	assert.Equal(t, 2000, a.Question.Devices)
	assert.Equal(t, 20.0, a.Question.AdmitRate)
	assert.Equal(t, 6.0, a.Question.MaxAttempts)
	require.NotNil(t, a.Current, "today's policy on its own")
	require.NotNil(t, a.Move)
	assert.NotEmpty(t, a.Move.Rows)
}

// The check the planner writes, run as it says against a real broker:
// mosquitto, through the fault proxy, which admits the question's rate
// scaled to the check's devices. The run meets the expectations the
// planner wrote, its prediction with margins. In real time at 10x: a busy
// host may bind the run, which then says so and asserts nothing.
func TestPlansCheckPassesAgainstMosquitto(t *testing.T) {
	if stormstatstest.RaceDetector {
		t.Skip("a real-time storm: make test runs it without the race detector (make interop)")
	}
	t.Parallel() // beside the other real-time storms of make interop, which mostly wait
	m := mosquittotest.Start(t, "")
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), append(planArgs, "-check-devices", "300", "-out", dir), noenv, nil, &out, &out)
	require.NoError(t, err, out.String())
	check := filepath.Join(dir, "check.yaml")
	b, err := os.ReadFile(check)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(check, []byte(strings.Replace(string(b), "time_scale: 1\n", "time_scale: 10\n", 1)), 0o644))

	env := func(k string) string { return map[string]string{"MQTT_BROKER": m.URL()}[k] }
	runDir := filepath.Join(dir, "run")
	out.Reset()
	err = run(context.Background(), []string{"run", "-f", check, "-out", runDir}, env, nil, &out, &out)
	t.Log(out.String())
	servedOrBound(t, err, out.String())
	r, err := report.ReadReport(runDir)
	require.NoError(t, err)
	require.NotNil(t, r.Broker)
	assert.Equal(t, "proxy", r.Broker.MeasuredAt)
	if !r.Host.Bound {
		for _, e := range r.Expectations {
			assert.True(t, e.Pass, "%s: want %s, got %s", e.What, e.Want, e.Got)
		}
	}
}
