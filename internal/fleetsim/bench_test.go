package fleetsim_test

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/herdguard/herdguard/internal/fleetsim"
)

// BenchmarkDropAll runs the same 2,000-device drop-all under full jitter on
// both engines: what one run costs with real agents (10x time scale) and in
// virtual time. make bench compares them with benchstat -col /engine.
func BenchmarkDropAll(b *testing.B) {
	for _, engine := range []string{fleetsim.Agents, fleetsim.Virtual} {
		b.Run("engine="+engine, func(b *testing.B) {
			c := fleetsim.Default()
			c.Engine, c.Scenario, c.Policy = engine, fleetsim.DropAll, "full"
			debug.FreeOSMemory() // each engine starts from the same returned heap, not the other's leftovers
			for b.Loop() {
				if _, err := fleetsim.Run(context.Background(), c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.Devices), "ns/device")
		})
	}
}
