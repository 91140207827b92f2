package fleetsim_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// In virtual time a seed is a run: every scenario that runs in a bubble
// writes the same report.json (the host section aside) and the same
// events.csv, byte for byte, run after run; attempts at one instant are in
// device order, and the last boot connect, which lands on the disruption's
// instant, is the boot's.
func TestVirtualTimeRunsRepeatExactly(t *testing.T) {
	type mod func(*plan.Plan)
	cases := map[string]mod{
		"boot-storm":     func(p *plan.Plan) { p.Scenario = plan.BootStorm },
		"broker-restart": func(p *plan.Plan) {},
		"broker-restart, unjittered": func(p *plan.Plan) {
			p.Policy = "exponential" // the whole fleet at each round's instant
		},
		"drop-all": func(p *plan.Plan) { p.Scenario = plan.DropAll },
		"drop-all, paho-default": func(p *plan.Plan) {
			p.Scenario, p.Policy = plan.DropAll, plan.PahoDefault
		},
		"flapping": func(p *plan.Plan) { p.Scenario = plan.Flapping },
		"blackhole": func(p *plan.Plan) {
			p.Scenario, p.Outage = plan.Blackhole, time.Minute
		},
		"latency":       func(p *plan.Plan) { p.Scenario = plan.Latency },
		"failover":      func(p *plan.Plan) { p.Scenario = plan.Failover },
		"config-outage": func(p *plan.Plan) { p.Scenario = plan.ConfigOutage },
		"telemetry":     func(p *plan.Plan) { p.Telemetry = 1 },
	}
	for _, m := range []fault.AdmissionMode{fault.RefuseOverLimit, fault.PauseOverLimit, fault.DisconnectOverLimit} {
		cases["throttled-restart, "+m.String()] = func(p *plan.Plan) {
			p.Scenario, p.AdmitRate, p.AdmitBurst, p.AdmitMode = plan.ThrottledRestart, 20, 2, m
		}
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			p := small(plan.BrokerRestart, "iotcore")
			p.Outage, p.Seed = 10*time.Second, 7
			mod(&p)
			var reports [2][]byte
			var events [2][]byte
			for k := range 2 {
				r, err := inVirtualTime(t, p)
				require.NoError(t, err)
				require.Positive(t, r.Attempts.Total)
				r.Host = report.Host{}
				dir := t.TempDir()
				require.NoError(t, r.WriteFiles(dir))
				reports[k], err = os.ReadFile(filepath.Join(dir, "report.json"))
				require.NoError(t, err)
				events[k], err = os.ReadFile(filepath.Join(dir, "events.csv"))
				require.NoError(t, err)
			}
			assert.Equal(t, string(reports[0]), string(reports[1]), "report.json")
			if !bytes.Equal(events[0], events[1]) {
				a, b := strings.Split(string(events[0]), "\n"), strings.Split(string(events[1]), "\n")
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Errorf("events.csv line %d differs: %q vs %q (%d and %d lines)", i+1, a[i], b[i], len(a), len(b))
						break
					}
				}
			}
			// paho retries at once
			if p.Scenario != plan.BootStorm && p.Policy != plan.PahoDefault {
				assert.NotContains(t, string(events[0]), "\n0.0000,", "no boot connect counted at the disruption's instant")
			}
		})
	}
}
