package fleetsim_test

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
)

// BenchmarkDropAll runs the same 2,000-device drop-all under full jitter on
// both engines: what one run costs with real agents (10x time scale) and in
// virtual time. make bench compares them with benchstat -col /engine.
func BenchmarkDropAll(b *testing.B) {
	for _, engine := range []plan.Engine{plan.Agents, plan.Virtual} {
		b.Run("engine="+string(engine), func(b *testing.B) {
			p := plan.Default()
			p.Engine, p.Scenario, p.Policy = engine, plan.DropAll, "full"
			// each engine starts from the same returned heap, not the other's leftovers
			debug.FreeOSMemory()
			for b.Loop() {
				if _, err := fleetsim.Run(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(p.Devices), "ns/device")
		})
	}
}
