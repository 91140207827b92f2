package agents

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
)

// What a child's device log streams, the parent's log follows into the
// same attempts, outcomes and losses, with its own attempt numbers.
func TestFollowRebuildsAChildsLog(t *testing.T) {
	child, parent := newDeviceLog(10), newDeviceLog(10)
	pr, pw := io.Pipe()
	st := newEventStream(pw)
	child.stream = st
	parent.begin(time.Unix(0, 1), "other", -1) // the parent's numbering differs from the child's
	followed := make(chan error, 1)
	go func() { followed <- parent.follow(pr, nil) }()

	t0 := time.Unix(1700000000, 0)
	a := child.begin(t0, "dev-000003", 5*time.Millisecond)
	child.end(a, 3, fault.Accepted, 0)
	b := child.begin(t0.Add(time.Second), "dev-000007", -1)
	child.end(b, 7, fault.Refused, 3)
	child.end(-1, 7, fault.Dropped, 0) // an end with no begin seen
	child.lost(t0.Add(2*time.Second), 3)
	st.close()
	require.NoError(t, pw.Close())
	require.NoError(t, <-followed)

	got := parent.since(t0)
	require.Len(t, got, 2)
	assert.Equal(t, sighting{at: t0, clientID: "dev-000003", outcome: fault.Accepted, lag: 5 * time.Millisecond}, got[0])
	assert.Equal(t, sighting{at: t0.Add(time.Second), clientID: "dev-000007", outcome: fault.Refused, code: 3, lag: -1}, got[1])
	assert.Equal(t, []time.Duration{2 * time.Second}, parent.noticed(t0))
	assert.Zero(t, parent.connectedCount(), "device 3 connected, then lost its session")
}

func TestFollowRejectsWhatItDoesNotUnderstand(t *testing.T) {
	for _, line := range []string{"x 1 2", "b 1 2 3 id", "e 0 3 1 0", "l 5 99", "b zero 2 3 id", "l 5"} {
		err := newDeviceLog(10).follow(strings.NewReader(line+"\n"), nil)
		assert.Error(t, err, line)
	}
}

// A reader that does not read never holds up the writer: lines wait in
// memory, in order, until it does.
func TestEventStreamNeverBlocksTheWriter(t *testing.T) {
	pr, pw := io.Pipe()
	st := newEventStream(pw)
	var want strings.Builder
	for i := range 10000 {
		line := "l " + strings.Repeat("9", i%7+1) + " 1\n"
		want.WriteString(line)
		_, err := io.WriteString(st, line) // the pipe has no reader yet: an unqueued write would block here
		require.NoError(t, err)
	}
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(pr); got <- string(b) }()
	st.close()
	require.NoError(t, pw.Close())
	assert.Equal(t, want.String(), <-got)
}
