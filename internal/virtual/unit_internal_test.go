package virtual

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/devicecore"
	"github.com/herdguard/herdguard/internal/plan"
)

// A device of the model is one cache line on 64-bit platforms: an event
// waits for memory once.
func TestAUnitIsACacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		assert.Equal(t, uintptr(64), unsafe.Sizeof(unit{}))
	}
}

// longestWait is what each policy's shape draws at most, whatever its
// retry count, previous wait and draw: a cut on the attempts still to
// come is certain only while it is. Checked on every policy at several
// caps, on random draws and on the draws nearest 1.
func TestNoPolicyWaitsLongerThanItsLongestWait(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, name := range plan.PolicyNames() {
		if name == plan.PahoDefault { // paho's own reconnect: no agent of the model's runs it
			continue
		}
		for _, maxBackoff := range []time.Duration{time.Second, 32 * time.Second, 10 * time.Minute} {
			shape, err := plan.Shape(name, maxBackoff)
			require.NoError(t, err)
			longest := longestWait(shape)
			require.Positive(t, longest, "%s: a shape of reconnect's", name)
			for range 20_000 {
				n, prev := rng.IntN(80), time.Duration(rng.Int64N(int64(20*maxBackoff)))
				for _, u := range []float64{rng.Float64(), math.Nextafter(1, 0)} {
					if d := shape.Delay(n, prev, u); d > longest {
						t.Fatalf("%s cap %v: Delay(%d, %v, %v) = %v, past its longest %v", name, maxBackoff, n, prev, u, d, longest)
					}
				}
			}
		}
	}
	assert.Zero(t, longestWait(nil), "no shape: no bound")
}

// A timing with every option turned takes the same steps through a
// device.Machine and through a Core on the timing the engine converts.
func TestCoreStepsAsTheMachineDoes(t *testing.T) {
	tm := device.DefaultTiming()
	tm.Credentials, tm.IgnoreServerSignals, tm.CredentialsWait = device.CredentialsArePermanent, true, 7*time.Second
	ct := devicecore.Timing(tm)

	m, err := device.NewMachine(&tm, rand.NewPCG(1, 2))
	require.NoError(t, err)
	var c devicecore.Core
	src := rand.NewPCG(1, 2)
	epoch := time.Unix(1_700_000_000, 0)
	ms, cs := m.Start(epoch), c.Start(&ct, src)
	for k := range 20 {
		require.Equal(t, int(ms.Kind), int(cs.Kind), "step %d", k)
		require.Equal(t, ms.Wait, cs.Wait, "step %d", k)
		now := time.Duration(k+1) * time.Minute
		switch ms.Kind {
		case device.KindWait:
			ms, cs = m.Due(epoch.Add(now)), c.Due(&ct, src, now)
		case device.KindConnect:
			ms, cs = m.Result(epoch.Add(now), device.Result{Code: 0x9F}), c.Result(&ct, src, now, devicecore.Result{Code: 0x9F})
		}
	}
}
