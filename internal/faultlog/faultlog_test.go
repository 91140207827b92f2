package faultlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
)

func TestLogAcrossBlocksAndResets(t *testing.T) {
	var l Log
	t0 := time.Unix(1_000_000, 0)
	const n = 2*blockSize + 3
	for i := range n {
		require.Equal(t, i, l.Accept(t0.Add(time.Duration(i))))
	}
	assert.True(t, l.Decide(0, fault.Accepted, 0, t0))
	assert.False(t, l.Decide(0, fault.Refused, 3, t0), "the first decision stands")
	assert.True(t, l.Decide(blockSize, fault.Refused, 3, t0))
	assert.False(t, l.Decide(n, fault.Accepted, 0, t0), "no such attempt")
	assert.Equal(t, fault.Counts{Attempts: n, Pending: n - 2, Accepted: 1, Refused: 1}, l.Counts())
	all := l.All()
	require.Len(t, all, n)
	for i, a := range all {
		assert.Equal(t, i, a.Seq)
		assert.Equal(t, t0.Add(time.Duration(i)), a.Accept)
	}
	assert.Equal(t, byte(3), all[blockSize].Code)

	p := l.At(5)
	l.Accept(t0) // appending never moves what is there
	assert.Same(t, p, l.At(5))

	l.Reset()
	assert.Zero(t, l.Counts())
	assert.Nil(t, l.At(5), "forgotten")
	assert.False(t, l.Decide(5, fault.Accepted, 0, t0))
	assert.Equal(t, n+1, l.Accept(t0), "Seq goes on")
	assert.Equal(t, n+1, l.All()[0].Seq)
}
