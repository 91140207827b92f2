package publisher

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A backlog that drains gives its memory back, and steady traffic (one in,
// one out) reuses the same few slots.
func TestMemoryStoreGivesBackADrainedBacklog(t *testing.T) {
	var s MemoryStore
	for seq := uint64(1); seq <= 10_000; seq++ {
		require.NoError(t, s.Append(Message{Seq: seq, Topic: "t"}))
	}
	assert.GreaterOrEqual(t, cap(s.q), 10_000)
	for seq := uint64(1); seq <= 9_990; seq++ {
		require.NoError(t, s.Remove(seq))
	}
	n, _ := s.Len()
	assert.Equal(t, 10, n)
	assert.LessOrEqual(t, cap(s.q), 4*minQueueCap, "the drained backlog's array is given back")
	m, ok, err := s.Front()
	require.NoError(t, err)
	require.True(t, ok)
	assert.EqualValues(t, 9_991, m.Seq, "in order")

	for seq := uint64(10_001); seq <= 20_000; seq++ { // one in, one out
		require.NoError(t, s.Append(Message{Seq: seq, Topic: "t"}))
		require.NoError(t, s.Remove(seq-10))
	}
	assert.LessOrEqual(t, cap(s.q), 4*minQueueCap, "steady traffic does not grow the array")
	m, _, _ = s.Front()
	assert.EqualValues(t, 19_991, m.Seq)
}
