package storm_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// of its admission rate (real agents in virtual time; under the race
// detector, a fiftieth of theirs), for each policy it
// compares, and meets its own expectations: on the engine it names, or on
// both when it leaves the choice to the run and either can run it.
func TestExamplesMeetTheirExpectations(t *testing.T) {
	examples, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	for _, path := range examples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			file, err := os.Open(path)
			require.NoError(t, err)
			defer file.Close()
			// An example that storms your own broker names it as a pipeline
			// would, ${MQTT_BROKER}, or a cluster's nodes ${MQTT_NODE_0}
			// on: here, a mosquitto each.
			brokers := map[string]string{}
			env := func(name string) string {
				if name != "MQTT_BROKER" && !strings.HasPrefix(name, "MQTT_NODE_") {
					return ""
				}
				if brokers[name] == "" {
					brokers[name] = mosquittotest.Start(t, "").URL()
				}
				return brokers[name]
			}
			f, err := storm.Read(file, env)
			require.NoError(t, err)
			full, _, err := f.Plan()
			require.NoError(t, err)
			policies := f.Compare
			if len(policies) == 0 {
				policies = []string{full.Policy}
			}
			for _, engine := range eitherEngine(f, full) {
				p := reduced(full, 10)
				if engine == plan.Agents && fleetsimtest.RaceDetector && full.Broker == "" {
					p = reduced(full, 50) // the race detector slows real agents tenfold
				}
				p.Engine = engine
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
					require.NoError(t, err, "%s on %s", policy, engine)
					got := f.CheckAll(r)
					// real time: a busy host may not keep the run's times, and
					// the file then fails first
					if r.Host.Bound {
						require.False(t, got[0].Pass, "the host's expectation comes first")
						t.Logf("%s on %s: the host bound the run (%s)", policy, engine, got[0].Got)
						got = got[1:]
					}
					assert.True(t, storm.Passed(got), "%s on %s: %+v", policy, engine, got)
				}
			}
		})
	}
}

// eitherEngine is the engine p names, or both engines where the file
// leaves the choice to the run and the storm is one either runs.
func eitherEngine(f *storm.File, p plan.Plan) []plan.Engine {
	if f.Engine != "" {
		return []plan.Engine{p.Engine}
	}
	var out []plan.Engine
	for _, e := range []plan.Engine{plan.Agents, plan.Virtual} {
		q := p
		q.Engine = e
		if q.Validate() == nil {
			out = append(out, e)
		}
	}
	return out
}

// reduced is p on a by-th of its fleet behind a by-th of its admission
// rate: at least 100 devices, 10 a group.
func reduced(p plan.Plan, by int) plan.Plan {
	p.Devices, p.AdmitRate = max(p.Devices/by, 100), p.AdmitRate/float64(by)
	if len(p.Groups) > 0 {
		p.Groups = slices.Clone(p.Groups)
		p.Devices = 0
		for k := range p.Groups {
			p.Groups[k].Devices = max(p.Groups[k].Devices/by, 10)
			p.Devices += p.Groups[k].Devices
		}
	}
	return p
}
