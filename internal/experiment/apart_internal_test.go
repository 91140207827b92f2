package experiment

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A failed bound reads as failed: a figure and its bound are written with
// as many decimals as it takes to tell them apart.
func TestAFigureAndItsBoundAreWrittenApart(t *testing.T) {
	for _, tc := range []struct {
		a, b      float64
		digits    int
		got, want string
	}{
		{1.5523, 1.5501, 2, "1.552", "1.550"},
		{1.56, 1.55, 2, "1.56", "1.55"},
		{95.04, 95.01, 1, "95.04", "95.01"},
		{120.5, 98.2, 1, "120.5", "98.2"},
	} {
		got, bound := apart(tc.a, tc.b, tc.digits)
		assert.Equal(t, tc.got+" > "+tc.want, got+" > "+bound)
	}
}
