package faultproxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Attempts across block boundaries keep their order and their updates.
func TestRecorderAcrossBlocks(t *testing.T) {
	var r Recorder
	t0 := time.Unix(0, 0)
	const n = 3*blockSize + 17
	for i := range n {
		require.Equal(t, i, r.accept(t0.Add(time.Duration(i))))
	}
	for i := 0; i < n; i += 3 {
		r.decide(i, Admitted, t0)
	}
	got := r.Attempts()
	require.Len(t, got, n)
	for i, a := range got {
		assert.Equal(t, i, a.Seq)
		assert.Equal(t, t0.Add(time.Duration(i)), a.Accept)
		assert.Equal(t, i%3 == 0, a.Outcome == Admitted, "attempt %d", i)
	}
	assert.Equal(t, Counts{Attempts: n, Admitted: (n + 2) / 3, Pending: n - (n+2)/3}, r.Counts())
	r.Reset()
	assert.Equal(t, n, r.accept(t0), "sequence numbers carry on after a reset")
	assert.Len(t, r.Attempts(), 1)
}
