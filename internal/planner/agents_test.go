package planner_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/planner"
)

// Four recommendations, each run again on real agents (paho, the agent,
// the in-process broker) in a testing/synctest bubble, on the seeds the
// planner ran: the agents' recovery p99, attempts a device and busiest
// second (the median over the seeds) fall within the spread the answer
// states, widened by the engines' Agreement, and every seed meets the
// question's bounds. The planner screened each on a fleet half the size,
// its broker scaled with it.
//
// Measured over seeds 1 to 60 (HERDGUARD_PLAN_BASES=20: twenty runs of
// the four questions, three seeds each), none failed; make test runs
// seeds 1 to 3.
func TestRecommendationsHoldOnRealAgents(t *testing.T) {
	if fleetsimtest.RaceDetector {
		t.Skip("a statistical check of many runs: make test's stats step runs it without the race detector")
	}
	bases, _ := strconv.Atoi(os.Getenv("HERDGUARD_PLAN_BASES"))
	for b := range max(bases, 1) {
		t.Run(fmt.Sprintf("seeds %d to %d", 3*b+1, 3*b+3), func(t *testing.T) { recommendationsHold(t, uint64(3*b+1)) })
	}
}

func recommendationsHold(t *testing.T, firstSeed uint64) {
	const devices = 200
	questions := map[string]planner.Question{
		"refused over the limit": {Devices: devices, AdmitRate: 4, AdmitMode: fault.RefuseOverLimit, Outage: 30 * time.Second},
		"a bound on the busiest second": {Devices: devices, AdmitRate: 10, AdmitMode: fault.RefuseOverLimit,
			Outage: 20 * time.Second, PeakBound: 50},
		"MQTT 5, told to wait": {Devices: devices, AdmitRate: 5, AdmitMode: fault.RefuseOverLimit, Outage: 30 * time.Second, MQTT5: true,
			TargetP99: 2 * time.Minute},
		guardedQuestion: {Devices: devices, AdmitRate: 4, AdmitMode: fault.RefuseOverLimit, Outage: 30 * time.Second, TargetP99: 3 * time.Minute},
	}
	for name, q := range questions {
		t.Run(name, func(t *testing.T) {
			q.Seeds = 3
			q.Seed = firstSeed
			candidates := few()
			if name == guardedQuestion {
				candidates = guardedOnly()
			}
			a, err := planner.Plan(context.Background(), q, planner.Options{Candidates: candidates, ScreenDevices: devices / 2})
			require.NoError(t, err)
			rec := a.Recommendation
			require.NotNil(t, rec)
			t.Logf("%s: %s", name, rec.Candidate)
			var p99s, atts, peaks []float64
			for s := range q.Seeds {
				p := a.StormPlan(rec.Candidate, devices, a.Question.Seed+s)
				p.Engine = plan.Agents
				r, err := fleetsimtest.InVirtualTime(t, p)
				require.NoError(t, err)
				require.NotNil(t, r.Broker)
				assert.True(t, r.Recovery.AllRecovered)
				p99s = append(p99s, r.Recovery.P99S-p.Outage.Seconds())
				atts = append(atts, r.Attempts.AfterReturnPerDeviceMean)
				peaks = append(peaks, r.Broker.Arrivals.PeakPerS1s)
			}
			// A guard that binds puts a device's attempts on its slots (15 s
			// apart at 4 a minute, a slot's jitter on top), and a fleet of
			// 200's p99 is its second-latest device: one slot more or less,
			// seed by seed. The model agrees with the agents where the guard
			// binds over many seeds (TestEnginesAgree); three seeds of 200
			// devices are held to a slot.
			slack := 0.5
			if g := plan.Guard(rec.Candidate.Policy); g != nil {
				slack = (g.Window / time.Duration(g.Requests)).Seconds()
			}
			within(t, median(p99s), rec.P99.Widen(slack), "%s: p99 %v", rec.Candidate, p99s)
			within(t, median(atts), rec.Attempts.Widen(0.05), "%s: attempts %v", rec.Candidate, atts)
			within(t, median(peaks), rec.Peak.Widen(2), "%s: busiest second %v", rec.Candidate, peaks)
			assert.LessOrEqual(t, slices.Max(p99s), a.Question.TargetP99.Seconds(), "the target holds on real agents, every seed")
			if q.PeakBound > 0 {
				assert.LessOrEqual(t, slices.Max(peaks), q.PeakBound, "the bound holds on real agents, every seed")
			}
		})
	}
}

// guardedQuestion is the check's question whose candidates all have a
// flood guard of their own: its recommendation is a guarded one.
const guardedQuestion = "a guard of 4 a minute"

// guardedOnly is few's families with a flood guard that binds.
func guardedOnly() []planner.Candidate {
	var cs []planner.Candidate
	for _, c := range few() {
		if c.Policy != "iotcore" {
			c.Policy = fmt.Sprintf("%s:guard=%d", c.Policy, planner.GuardedRate)
			cs = append(cs, c)
		}
	}
	return cs
}

func within(t *testing.T, v float64, f planner.Figure, msgAndArgs ...any) {
	t.Helper()
	assert.GreaterOrEqual(t, v, f.Min, msgAndArgs...)
	assert.LessOrEqual(t, v, f.Max, msgAndArgs...)
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
