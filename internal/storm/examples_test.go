package storm_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/storm"
)

// Every example in examples/ runs, on a tenth of its fleet behind a tenth
// of its admission rate (real agents in virtual time), for each policy it
// compares, and meets its own expectations.
func TestExamplesMeetTheirExpectations(t *testing.T) {
	examples, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	for _, path := range examples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			file, err := os.Open(path)
			require.NoError(t, err)
			defer file.Close()
			// An example that storms your own broker names it as a pipeline
			// would, ${MQTT_BROKER}: here, mosquitto.
			env := func(name string) string {
				if name != "MQTT_BROKER" {
					return ""
				}
				return mosquittotest.Start(t, "").URL()
			}
			f, err := storm.Read(file, env)
			require.NoError(t, err)
			p, _, err := f.Plan()
			require.NoError(t, err)
			p.Devices, p.AdmitRate = max(p.Devices/10, 100), p.AdmitRate/10
			if len(p.Groups) > 0 {
				p.Devices = 0
				for k := range p.Groups {
					p.Groups[k].Devices = max(p.Groups[k].Devices/10, 10)
					p.Devices += p.Groups[k].Devices
				}
			}
			policies := f.Compare
			if len(policies) == 0 {
				policies = []string{p.Policy}
			}
			for _, policy := range policies {
				p.Policy = policy
				var r *report.Report
				switch {
				case p.Broker != "": // a real broker: real time, at ten times the pace
					p.TimeScale = 10
					r, err = fleetsim.Run(context.Background(), p)
				case p.Engine == plan.Agents:
					r, err = fleetsimtest.InVirtualTime(t, p)
				default:
					r, err = fleetsim.Run(context.Background(), p)
				}
				require.NoError(t, err, policy)
				got := f.CheckAll(r)
				assert.True(t, storm.Passed(got), "%s: %+v", policy, got)
			}
		})
	}
}
