package observer

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
)

// What a child's device log streams, the parent's log follows into the
// same attempts, outcomes and losses, at the very instants the child saw.
func TestFollowRebuildsAChildsLog(t *testing.T) {
	child, parent := NewDeviceLog(10), NewDeviceLog(10)
	pr, pw := io.Pipe()
	closeStream := child.StreamTo(pw)
	followed := make(chan error, 1)
	go func() { followed <- parent.Follow(pr, nil) }()

	t0 := time.Unix(1700000000, 123456789)
	child.Begin(t0, 3, 5*time.Millisecond)
	child.End(t0.Add(40*time.Millisecond), 3, fault.Accepted, 0, 0)
	child.Begin(t0.Add(time.Second), 7, -1)
	child.End(t0.Add(1200*time.Millisecond), 7, fault.Refused, 3, 0)
	child.End(t0.Add(1500*time.Millisecond), 7, fault.Dropped, 0, 0) // an end with no begin seen
	child.Lost(t0.Add(2*time.Second), 3)
	closeStream()
	require.NoError(t, pw.Close())
	require.NoError(t, <-followed)

	got := parent.since(t0)
	require.Len(t, got, 2)
	assert.Equal(t, tried{at: t0, device: 3, outcome: fault.Accepted, lag: 5 * time.Millisecond,
		heard: t0.Add(40 * time.Millisecond)}, got[0])
	assert.Equal(t, tried{at: t0.Add(time.Second), device: 7, outcome: fault.Refused, code: 3, lag: -1,
		heard: t0.Add(1200 * time.Millisecond)}, got[1])
	assert.Equal(t, [][]time.Duration{{2 * time.Second}}, parent.Noticed([]time.Time{t0}))
	assert.Zero(t, parent.Connected(), "device 3 connected, then lost its session")
}

func TestFollowRejectsWhatItDoesNotUnderstand(t *testing.T) {
	header := strings.Join(attempt.StreamHeader, ",") + "\n"
	for _, text := range []string{
		"b 1 2 3 id\n", // the old line format
		header + "1.0,0,dev-1,accepted,0,,landed\n",
		header + "1.0,0,dev-99,accepted,0,,attempt\n", // not one of the fleet's
		header + "1.0,0,car-1,pending,0,,begun\n",
		header + "x,0,dev-1,pending,0,,begun\n",
	} {
		err := NewDeviceLog(10).Follow(strings.NewReader(text), nil)
		assert.Error(t, err, text)
	}
}

// A reader that does not read never holds up the writer: lines wait in
// memory, in order, until it does.
func TestQueuedWriterNeverBlocksTheWriter(t *testing.T) {
	pr, pw := io.Pipe()
	st := newQueuedWriter(pw)
	var want strings.Builder
	for i := range 10000 {
		line := "l " + strings.Repeat("9", i%7+1) + " 1\n"
		want.WriteString(line)
		// the pipe has no reader yet: an unqueued write would block here
		_, err := io.WriteString(st, line)
		require.NoError(t, err)
	}
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(pr); got <- string(b) }()
	st.close()
	require.NoError(t, pw.Close())
	assert.Equal(t, want.String(), <-got)
}
