package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// A run is checked before anything starts: a fleet this machine cannot
// hold, or a policy of -compare's that does not exist, is refused at once,
// prints no run's header and writes nothing.
func TestRunRefusesBeforeAnythingStarts(t *testing.T) {
	if plan.AvailableMemory() == 0 {
		t.Skip("this system does not say how much memory it has available")
	}
	dir := filepath.Join(t.TempDir(), "out")
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "-devices", "1000000000", "-out", dir}, noenv, nil, &out, &out)
	require.Error(t, err)
	assert.Regexp(t, `^1,000,000,000 devices on the agents engine need about [\d.]+ TiB \(about 128 KiB a device\); `+
		`this machine has [\d.]+ [GMT]iB available: at most [\d,]+ fit, or [\d,]+ on -engine wire, or [\d,]+ on -engine virtual$`, err.Error())
	assert.Empty(t, out.String())
	assert.NoDirExists(t, dir)

	err = run(context.Background(), []string{"run", "-compare", "iotcore,hope", "-out", dir}, noenv, nil, &out, &out)
	assert.ErrorContains(t, err, `unknown policy "hope"`)
	assert.Empty(t, out.String(), "not even the first policy's run")
	assert.NoDirExists(t, dir)
}

// cancelOnWrite ends a run from its first progress line, as SIGINT would.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (w cancelOnWrite) Write(b []byte) (int, error) { w.cancel(); return len(b), nil }

// An interrupted run writes what it saw as a report marked incomplete, or,
// stopped before it has one, nothing: not an empty events.csv.
func TestInterruptedRunIsMarkedOrLeavesNothing(t *testing.T) {
	p := plan.Default()
	p.Devices, p.Scenario, p.Policy, p.TimeScale = 60, plan.ThrottledRestart, "iotcore", 1
	p.AdmitRate = 0.2 // 300 s to readmit them: far beyond the first progress line

	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p.Progress = cancelOnWrite{cancel}
		r, err := runWritingEvents(ctx, p, dir, true)
		require.ErrorIs(t, err, context.Canceled)
		require.NotNil(t, r)
		require.NoError(t, writeReport(r, dir))
	})
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"incomplete": "interrupted"`)
	r, err := report.ReadReport(dir)
	require.NoError(t, err)
	var s strings.Builder
	r.Summary(&s)
	assert.True(t, strings.HasPrefix(s.String(), "INCOMPLETE (interrupted)"), s.String())

	dir = t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.Progress = nil
		r, err := runWritingEvents(ctx, p, dir, true)
		require.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, r)
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no events.csv of a run that never began")
}
