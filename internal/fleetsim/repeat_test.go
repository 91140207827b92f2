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
	"github.com/herdguard/herdguard/internal/fleetsim"
)

// In virtual time a seed is a run: every scenario that runs in a bubble
// writes the same report.json (the host section aside) and the same
// events.csv, byte for byte, run after run; attempts at one instant are in
// device order, and the last boot connect, which lands on the disruption's
// instant, is the boot's.
func TestVirtualTimeRunsRepeatExactly(t *testing.T) {
	type mod func(*fleetsim.Config)
	cases := map[string]mod{
		"boot-storm":     func(c *fleetsim.Config) { c.Scenario = fleetsim.BootStorm },
		"broker-restart": func(c *fleetsim.Config) {},
		"broker-restart, unjittered": func(c *fleetsim.Config) {
			c.Policy = "exponential" // the whole fleet at each round's instant
		},
		"drop-all": func(c *fleetsim.Config) { c.Scenario = fleetsim.DropAll },
		"drop-all, paho-default": func(c *fleetsim.Config) {
			c.Scenario, c.Policy = fleetsim.DropAll, fleetsim.PahoDefault
		},
		"flapping": func(c *fleetsim.Config) { c.Scenario = fleetsim.Flapping },
		"blackhole": func(c *fleetsim.Config) {
			c.Scenario, c.Outage = fleetsim.Blackhole, time.Minute
		},
		"latency":       func(c *fleetsim.Config) { c.Scenario = fleetsim.Latency },
		"failover":      func(c *fleetsim.Config) { c.Scenario = fleetsim.FailoverScenario },
		"config-outage": func(c *fleetsim.Config) { c.Scenario = fleetsim.ConfigOutage },
		"telemetry":     func(c *fleetsim.Config) { c.Telemetry = 1 },
	}
	for _, m := range []fault.AdmissionMode{fault.RefuseOverLimit, fault.PauseOverLimit, fault.DisconnectOverLimit} {
		cases["throttled-restart, "+m.String()] = func(c *fleetsim.Config) {
			c.Scenario, c.AdmitRate, c.AdmitBurst, c.AdmitMode = fleetsim.ThrottledRestart, 20, 2, m
		}
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			c := small(fleetsim.BrokerRestart, "iotcore")
			c.Outage, c.Seed = 10*time.Second, 7
			mod(&c)
			var reports [2][]byte
			var events [2][]byte
			for k := range 2 {
				r, err := inVirtualTime(t, c)
				require.NoError(t, err)
				require.Positive(t, r.Attempts.Total)
				r.Host = fleetsim.Host{}
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
			if c.Scenario != fleetsim.BootStorm && c.Policy != fleetsim.PahoDefault { // paho retries at once
				assert.NotContains(t, string(events[0]), "\n0.0000,", "no boot connect counted at the disruption's instant")
			}
		})
	}
}
