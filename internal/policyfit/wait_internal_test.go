package policyfit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// A model's kept waits are waitDist's to the bit, for every family, at
// random parameters, indices and waits before, with a copy sharing the
// table and the base changed in place between calls. A family whose wait
// hangs on the one before and is not named by hangsOnPrev fails here.
func TestAModelsWaitsAreWaitDists(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range families {
		for range 200 {
			p := params{base: r.Float64() * 3, factor: 1 + r.Float64()*3, step: r.Float64(),
				cap: []float64{math.Inf(1), 5 + r.Float64()*60}[r.IntN(2)], jitter: r.Float64(), atCap: r.IntN(2) == 0}
			m := &model{fam: f, p: p}
			m.wait(0, 0)
			c := *m // its table, shared
			for range 300 {
				mm := m
				if r.IntN(2) == 0 {
					mm = &c
				}
				if r.IntN(10) == 0 {
					mm.p.base = r.Float64() * 3
				}
				j, prev := r.IntN(maxAttempts+3), r.Float64()*10
				require.Equal(t, waitDist(mm.fam, &mm.p, j, prev), mm.wait(j, prev), "%s %+v, retry %d after %g s", f, mm.p, j, prev)
			}
		}
	}
}
