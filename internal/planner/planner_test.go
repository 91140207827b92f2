package planner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/experiment"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/planner"
	"github.com/herdguard/herdguard/internal/storm"
	"github.com/herdguard/herdguard/remoteconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// few is a small search: three families at two caps.
func few() []planner.Candidate {
	var cs []planner.Candidate
	for _, c := range []time.Duration{16 * time.Second, 64 * time.Second} {
		for _, f := range []string{"iotcore", "full", "fleet-safe"} {
			cs = append(cs, planner.Candidate{Policy: f, MaxBackoff: c})
		}
	}
	return cs
}

// small is a question the model answers in a moment: 1,000 devices behind
// 10 connects a second, screened on 500.
func small() (planner.Question, planner.Options) {
	return planner.Question{Devices: 1000, AdmitRate: 10, Seeds: 2},
		planner.Options{Candidates: few(), ScreenDevices: 500, Confirm: 2}
}

// tiny is a question the refusals are asked of: 500 devices behind 5
// connects a second, two policies, one seed.
func tiny() (planner.Question, planner.Options) {
	return planner.Question{Devices: 500, AdmitRate: 5, Seeds: 1}, planner.Options{ScreenDevices: 250, Confirm: 1,
		Candidates: []planner.Candidate{{Policy: "full", MaxBackoff: 16 * time.Second}, {Policy: "fleet-safe", MaxBackoff: time.Minute}}}
}

// smallAnswer is small's answer, asked once for the tests that read it.
var smallAnswer = sync.OnceValues(func() (*planner.Answer, error) {
	q, o := small()
	return planner.Plan(context.Background(), q, o)
})

// A question that cannot be asked is refused before anything runs, with
// the reason.
func TestQuestionsItCannotAskAreRefused(t *testing.T) {
	for want, q := range map[string]planner.Question{
		"devices must be at least 1":   {AdmitRate: 10},
		"admission rate must be > 0":   {Devices: 10},
		"must be >= 0":                 {Devices: 10, AdmitRate: 10, Outage: -time.Second},
		"peak bound and max attempts":  {Devices: 10, AdmitRate: 10, PeakBound: -1},
		"is below 1":                   {Devices: 10, AdmitRate: 10, MaxAttempts: 0.5},
		"share must be within 0 and 1": {Devices: 10, AdmitRate: 10, Current: "iotcore", CurrentShare: 2},
		"needs the policy it runs":     {Devices: 10, AdmitRate: 10, CurrentShare: 0.5},
		// a cap past a day would wrap the run's sums
		"its cap after @ must be a duration within": {Devices: 10, AdmitRate: 10, Current: "iotcore@2000000h"},
	} {
		_, err := planner.Plan(context.Background(), q, planner.Options{Candidates: few()})
		require.ErrorIs(t, err, planner.ErrInvalid, want)
		assert.ErrorContains(t, err, want)
	}
	_, err := planner.Plan(context.Background(), planner.Question{Devices: 10, AdmitRate: 10},
		planner.Options{Candidates: []planner.Candidate{{Policy: "no-such", MaxBackoff: time.Minute}}})
	require.ErrorIs(t, err, planner.ErrInvalid)
	assert.ErrorContains(t, err, `unknown policy "no-such"`)
}

// A target no policy meets is refused with the closest policy and what
// would have to change: the fleet cannot be back before the broker has
// admitted it, so the admission rate it would take.
func TestATargetNoPolicyMeetsIsRefusedWithTheClosest(t *testing.T) {
	q, o := tiny()
	q.TargetP99 = 30 * time.Second // the broker alone needs 100 s
	a, err := planner.Plan(context.Background(), q, o)
	require.ErrorIs(t, err, planner.ErrNoPolicy)
	require.NotNil(t, a)
	assert.Nil(t, a.Recommendation)
	require.NotNil(t, a.Closest)
	assert.Regexp(t, `recovery p99 \d+ s, over the 30 s target; the closest, .*, needs a \d+ s target, or a broker admitting about \d+ connects/s$`, err.Error())
	assert.Greater(t, a.Closest.P99.Max, 100.0, "not before the broker admitted the fleet")
	assert.Equal(t, 30*time.Second, a.Question.TargetP99)
	var sum strings.Builder
	a.Summary(&sum)
	assert.Contains(t, sum.String(), "none of those met the bounds, so none ran again at", "not \"the best 0 of those\"")
}

// A bound on the broker's busiest second below what any policy's return
// makes, and one on attempts below any policy's, are refused the same way.
func TestBoundsNoPolicyMeetsAreRefused(t *testing.T) {
	q, o := tiny()
	q.PeakBound = 5
	_, err := planner.Plan(context.Background(), q, o)
	require.ErrorIs(t, err, planner.ErrNoPolicy)
	assert.Regexp(t, `busiest second \d+ connects, over the 5 bound.*needs .*a bound of \d+ connects in the broker's busiest second$`, err.Error())

	q, o = tiny()
	q.MaxAttempts = 1.01
	_, err = planner.Plan(context.Background(), q, o)
	require.ErrorIs(t, err, planner.ErrNoPolicy)
	assert.Regexp(t, `[\d.]+ attempts a device, over the 1.0 bound; the closest, .*, needs .*[\d.]+ attempts a device$`, err.Error())
}

// The recommendation meets every bound on every run, at full scale, and
// has the fewest attempts of those that do; the formula without jitter
// is rejected for its waves.
func TestTheRecommendationMeetsTheBoundsWithTheFewestAttempts(t *testing.T) {
	a, err := smallAnswer()
	require.NoError(t, err)
	r := a.Recommendation
	require.NotNil(t, r)
	assert.True(t, r.Pass())
	assert.Equal(t, a.Question.Devices, r.Devices)
	assert.LessOrEqual(t, r.P99.Max, a.Question.TargetP99.Seconds())
	for _, s := range a.Screened {
		if s.Pass() && s.Margin >= 0.1 {
			assert.GreaterOrEqual(t, s.Attempts.Median, 0.98*r.Attempts.Median, "%s has fewer attempts", s.Candidate)
		}
	}
	var waves []string
	for _, g := range a.Rejected {
		if g.Reason == "the fleet came back in waves" {
			waves = g.Examples
		}
	}
	assert.NotEmpty(t, waves)
	for _, w := range waves {
		assert.True(t, strings.HasPrefix(w, "iotcore,"), w)
	}
}

// Where the planner and the policy grid ask the same question (the grid's
// bounds on a cell's p99 and attempts, its storm, its seed), they pass and
// fail the same policies.
func TestThePlannerAgreesWithTheGrid(t *testing.T) {
	if fleetsimtest.RaceDetector {
		t.Skip("the model alone, many runs: make test's stats step runs it without the race detector")
	}
	gc := experiment.DefaultGrid()
	gc.Devices, gc.AdmitRates, gc.Policies = []int{10_000}, []float64{500, 5000}, []string{"iotcore", "full", "equal", "fleet-safe", "decorrelated", "exponential"}
	gc.Full = true
	g, err := experiment.RunGrid(context.Background(), gc)
	require.NoError(t, err)
	checked := 0
	for _, rate := range gc.AdmitRates {
		ideal := 10_000 / rate
		capS := gc.MaxBackoff.Seconds()
		q := planner.Question{Devices: 10_000, AdmitRate: rate, AdmitMode: fault.RefuseOverLimit, Outage: gc.Outage, Seeds: 1, Seed: gc.Seed,
			TargetP99: time.Duration((1.2*ideal + capS) * float64(time.Second)), MaxAttempts: 1.5 * (1 + ideal/(2*capS))}
		var cands []planner.Candidate
		for _, p := range gc.Policies {
			cands = append(cands, planner.Candidate{Policy: p, MaxBackoff: gc.MaxBackoff})
		}
		a, err := planner.Plan(context.Background(), q, planner.Options{Candidates: cands, ScreenDevices: 10_000,
			Outages: []time.Duration{gc.Outage}, Confirm: 1})
		if err != nil {
			require.ErrorIs(t, err, planner.ErrNoPolicy)
		}
		for _, s := range a.Screened {
			for _, c := range g.Cells {
				if c.Policy != s.Policy || c.AdmitRate != rate || c.Scenario != "throttled-restart" || c.Verdict == "inconclusive" {
					continue
				}
				assert.Equal(t, c.Pass, s.Pass(), "%s at %g/s: grid %q, planner %q", c.Policy, rate, c.Why, s.Why)
				checked++
			}
		}
	}
	assert.GreaterOrEqual(t, checked, 10)
}

// What the answer writes puts the recommendation to use as it says: the
// storm file reads as a storm file and checks the recommendation, the
// remote configuration passes the firmware's bounds, and the Go parses.
func TestTheAnswersArtifactsAreUsable(t *testing.T) {
	_, o := small()
	a, err := smallAnswer()
	require.NoError(t, err)
	check, err := a.NewCheck(context.Background(), 250, o)
	require.NoError(t, err)
	env := func(k string) string { return map[string]string{"MQTT_BROKER": "tcp://127.0.0.1:1883"}[k] }
	f, err := storm.Read(strings.NewReader(check.StormFile()), env)
	require.NoError(t, err)
	p, _, err := f.Plan()
	require.NoError(t, err)
	assert.Equal(t, a.Recommendation.Policy, p.Policy)
	assert.Equal(t, a.Recommendation.MaxBackoff, p.MaxBackoff)
	assert.Equal(t, 250, p.Devices)
	assert.InDelta(t, 2.5, p.AdmitRate, 1e-9, "the question's 10/s scaled to 250 of 1,000 devices")
	assert.Equal(t, "tcp://127.0.0.1:1883", p.Broker)
	assert.Equal(t, "spread", f.Expect.Verdict)
	assert.Greater(t, f.Expect.RecoveryP99, time.Minute, "p99 from the disruption, the outage in it")

	// The schema editors use takes it too, a policy spec with parameters
	// included.
	check.Candidate = planner.Candidate{Policy: "iotcore:base=2s,jitter=4s", MaxBackoff: time.Minute}
	validates(t, check.StormFile())

	snippet, err := planner.GoSnippet(a.Recommendation.Candidate)
	require.NoError(t, err)
	_, err = parser.ParseFile(token.NewFileSet(), "x.go", "package x\nfunc f() error {\n"+snippet+"return nil\n}\n", 0)
	require.NoError(t, err, snippet)

	formula := planner.Candidate{Policy: "iotcore:base=2s,jitter=4s", MaxBackoff: time.Minute}
	doc, err := planner.RemoteConfig(formula)
	require.NoError(t, err)
	var d remoteconfig.Document
	require.NoError(t, json.Unmarshal(doc, &d))
	require.NoError(t, remoteconfig.DefaultBounds.Check(d))
	assert.Equal(t, remoteconfig.Duration(4*time.Second), d.Reconnect.Jitter)
	flags, err := planner.AgentFlags(formula)
	require.NoError(t, err)
	assert.Equal(t, "-reconnect-base 2s -reconnect-jitter 4s -max-backoff 1m0s", flags)

	_, err = planner.RemoteConfig(planner.Candidate{Policy: "fleet-safe", MaxBackoff: time.Minute})
	assert.ErrorContains(t, err, "takes new firmware")

	// A flood guard of its own is the firmware's to set, in Go.
	guarded := planner.Candidate{Policy: "iotcore:base=2s,guard=4", MaxBackoff: time.Minute}
	snippet, err = planner.GoSnippet(guarded)
	require.NoError(t, err)
	assert.Contains(t, snippet, "timing.Guard = &reconnect.FloodGuardConfig{Requests: 4, Window: time.Minute, Burst: 5}")
	_, err = parser.ParseFile(token.NewFileSet(), "x.go", "package x\nfunc f() error {\n"+snippet+"return nil\n}\n", 0)
	require.NoError(t, err, snippet)
	_, err = planner.RemoteConfig(guarded)
	assert.ErrorContains(t, err, "does not set the flood guard")
	_, err = planner.AgentFlags(guarded)
	assert.ErrorContains(t, err, "keeps the firmware's flood guard")
	_, err = planner.RemoteConfig(planner.Candidate{Policy: "iotcore", MaxBackoff: 8 * time.Second})
	assert.ErrorContains(t, err, "outside the firmware's bounds")
	assert.False(t, errors.Is(err, planner.ErrInvalid))
}

// validates checks a storm file against docs/storm.schema.json.
func validates(t *testing.T, file string) {
	t.Helper()
	raw, err := os.Open("../../docs/storm.schema.json")
	require.NoError(t, err)
	defer raw.Close()
	doc, err := jsonschema.UnmarshalJSON(raw)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("storm.schema.json", doc))
	schema, err := c.Compile("storm.schema.json")
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON([]byte(strings.ReplaceAll(file, "${MQTT_BROKER}", "tcp://b:1883")))
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	require.NoError(t, err)
	assert.NoError(t, schema.Validate(v), file)
}
