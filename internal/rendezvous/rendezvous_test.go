package rendezvous_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/internal/rendezvous"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var shared = []string{"Devices=300", "Policy=full", "Scenario=broker-restart"}

// Three shards meet: each returns once all three are ready, with the
// same last readiness, and a clock offset against the volume near zero
// (one machine, one clock).
func TestShardsMeetOnceAllAreReady(t *testing.T) {
	dir := t.TempDir()
	meetings := make([]rendezvous.Meeting, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			m, err := rendezvous.Meet(context.Background(), dir, i, 3, shared, time.Minute)
			assert.NoError(t, err)
			meetings[i] = m
		})
	}
	wg.Wait()
	for i, m := range meetings {
		require.Len(t, m.Marks, 3)
		assert.Equal(t, meetings[0].LastReady(), m.LastReady(), "every shard names one instant")
		assert.InDelta(t, 0, m.Offset(i).Seconds(), 0.05)
	}
}

// A shard refuses a directory that holds its own mark already (an
// earlier run's); and one that waits in vain names the shards missing.
func TestAShardRefusesAnEarlierRunAndNamesTheMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := rendezvous.Meet(context.Background(), dir, 0, 3, shared, 300*time.Millisecond)
	assert.ErrorIs(t, err, rendezvous.ErrRefused)
	assert.ErrorContains(t, err, "shards 1 and 2 of 3 are not ready")
	assert.ErrorContains(t, rendezvous.StillOn(dir, 3), "shard 0 gave up waiting",
		"a shard that comes later and sees every mark still does not strike")
	_, err = rendezvous.Meet(context.Background(), dir, 0, 3, shared, time.Second)
	assert.ErrorContains(t, err, "holds shard 0's mark already")
}

// Shards asked for different storms refuse to strike, naming the setting.
func TestShardsWithDifferentPlansRefuse(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, plan := range [][]string{shared, {"Devices=300", "Policy=iotcore", "Scenario=broker-restart"}} {
		wg.Go(func() { _, errs[i] = rendezvous.Meet(context.Background(), dir, i, 2, plan, time.Minute) })
	}
	wg.Wait()
	assert.ErrorContains(t, errs[0], "shard 1")
	assert.ErrorContains(t, errs[0], "Policy iotcore, not full")
	assert.ErrorContains(t, errs[1], "Policy full, not iotcore")
}

// A shard whose clock is 2 s ahead of the others' (its mark says it was
// written 2 s later than the volume stamped it) stops the storm.
func TestClocksApartRefuse(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	mark := rendezvous.Mark{Shard: 1, Shards: 2, Host: "pod-1", PlanHash: rendezvous.Hash(shared), Plan: shared,
		ReadyUnixNS: now.Add(2 * time.Second).UnixNano()}
	b, err := json.Marshal(mark)
	require.NoError(t, err)
	path := filepath.Join(dir, "ready-1.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	require.NoError(t, os.Chtimes(path, now, now)) // the volume's clock
	_, err = rendezvous.Meet(context.Background(), dir, 0, 2, shared, time.Minute)
	assert.ErrorIs(t, err, rendezvous.ErrRefused)
	// shard 0's own offset is its write against the volume's coarse clock:
	// a few milliseconds either way
	assert.Regexp(t, `shard 1's is 1\.9\d+s ahead of shard 0's|shard 1's is 2(\.0\d+)?s ahead of shard 0's`, err.Error())
	assert.NoError(t, rendezvous.CheckClocks(map[int]time.Duration{0: 0, 1: 100 * time.Millisecond, 2: -100 * time.Millisecond}))
}
