package robust_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/policyfit/robust"
)

func TestQuantilesAreInterpolated(t *testing.T) {
	s := []float64{1, 2, 4, 8}
	assert.Equal(t, 1.0, robust.Quantile(s, 0))
	assert.Equal(t, 3.0, robust.Quantile(s, 0.5))
	assert.Equal(t, 8.0, robust.Quantile(s, 1))
	assert.True(t, math.IsNaN(robust.Quantile(nil, 0.5)))
	xs := []float64{8, 1, 4, 2}
	assert.Equal(t, 3.0, robust.Median(xs))
	assert.Equal(t, []float64{8, 1, 4, 2}, xs, "Median reads xs only")
	assert.Equal(t, 3.0, robust.MedianInPlace(xs))
	assert.Equal(t, []float64{1, 2, 4, 8}, xs)
	assert.Equal(t, 4.0, robust.WeightedMedian([]float64{1, 4, 8}, []float64{1, 3, 1}))
}

// A sample's edges and its densest cluster are not moved by a few values
// far off.
func TestAFewOutliersMoveNothing(t *testing.T) {
	var xs []float64
	for i := range 100 {
		xs = append(xs, 10+float64(i)/100) // U[10, 11)
	}
	lo, hi := robust.Edges(append(xs, 1000, 2000))
	assert.InDelta(t, 10, lo, 0.1)
	assert.InDelta(t, 11, hi, 0.2)
	c, share := robust.Cluster(append([]float64{1, 2, 3, 50, 60}, 5, 5.01, 5.02, 5.03, 5.04, 5.05))
	assert.InDelta(t, 5.025, c, 0.01)
	assert.InDelta(t, 6.0/11, share, 1e-9)
}

func TestGoldenFindsTheMaximum(t *testing.T) {
	x := robust.Golden(func(x float64) float64 { return -(x - 2) * (x - 2) }, 0, 10, 40)
	assert.InDelta(t, 2, x, 1e-6)
	assert.InDelta(t, 1000+math.Log1p(math.Exp(-1)), robust.LogSumExp(1000, 999), 1e-9, "e^1000 overflows; the sum in logs does not")
}
