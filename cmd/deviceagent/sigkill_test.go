package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/testbroker"
)

// identity records a heartbeat by its envelope's identity, "epoch/seq".
func identity(payload []byte) []byte {
	e, err := publisher.DecodeEnvelope(payload)
	if err != nil {
		return []byte("not an envelope")
	}
	return []byte(e.Epoch + "/" + strconv.FormatUint(e.Seq, 10))
}

// TestSIGKILLLoopLosesNothing kills `deviceagent -data-dir` with SIGKILL
// at seeded-random moments, 50 times, while it enqueues a heartbeat every
// 5 ms (an fsynced store transaction each) and delivers them: one time in
// four at once after the start (inside the store's open, often), otherwise
// after the broker has seen 0 to 25 more of its messages (mid-append,
// mid-delivery). A last life is stopped
// with SIGTERM. Then the store says what was ever enqueued (every seq up to
// LastSeq of its one epoch) and what is still queued (Front onwards):
// everything before that must have reached the broker, duplicates allowed.
//
// Where it runs: natively in `make race` (about 6 s under -race), and in
// `make arm-test` with every agent life a 32-bit ARM build under
// qemu-arm-static (HERDGUARD_AGENT_UNDER), the test and its broker native
// (about 10 s).
func TestSIGKILLLoopLosesNothing(t *testing.T) {
	const kills, budget = 50, 90 * time.Second
	b, err := testbroker.New(testbroker.Config{PayloadDigest: identity})
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	env := []string{"HERDGUARD_BROKER=" + b.URL(), "HERDGUARD_CLIENT_ID=dev-k", "HERDGUARD_HEARTBEAT=5ms",
		"HERDGUARD_BOOT_SPREAD=1ms", "HERDGUARD_DATA_DIR=" + dir, "HERDGUARD_LOG_LEVEL=warn"}
	deadline := time.Now().Add(budget)
	r := rand.New(rand.NewPCG(2026, 11))
	atOnce := 0
	for life := 1; life <= kills; life++ {
		require.True(t, time.Now().Before(deadline), "over the %v budget after %d kills", budget, life-1)
		var stderr syncBuffer
		n0 := b.Recorder().Counts().Publishes
		cmd := startMain(t, &stderr, env...)
		if wait := r.IntN(26); r.IntN(4) == 0 {
			atOnce++
		} else if err := b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= n0+wait }); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("life %d: %v; stderr:\n%s", life, err, stderr.String())
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		var ee *exec.ExitError
		require.True(t, errors.As(cmd.Wait(), &ee), "life %d ended by itself; stderr:\n%s", life, stderr.String())
	}
	var stderr syncBuffer
	n0 := b.Recorder().Counts().Publishes
	last := startMain(t, &stderr, env...)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= n0+5 }))
	require.NoError(t, last.Process.Signal(syscall.SIGTERM))
	require.NoError(t, last.Wait(), "stderr:\n%s", stderr.String())

	s, err := publisher.OpenBoltStore(filepath.Join(dir, "queue.db"), publisher.BoltOptions{})
	require.NoError(t, err, "SIGKILL never damages the store")
	epoch, lastSeq := s.Epoch(), s.LastSeq()
	firstQueued := lastSeq + 1
	if m, ok, err := s.Front(); err == nil && ok {
		firstQueued = m.Seq
	}
	require.NoError(t, s.Close())

	got := map[string]int{}
	for _, p := range b.Recorder().Publishes() {
		got[string(p.Payload)]++
	}
	dups := 0
	for id, n := range got {
		require.True(t, strings.HasPrefix(id, epoch+"/"), "%q is not of the store's one epoch %q", id, epoch)
		dups += n - 1
	}
	for seq := uint64(1); seq < firstQueued; seq++ {
		require.Positive(t, got[fmt.Sprintf("%s/%d", epoch, seq)], "heartbeat %d of %d lost", seq, lastSeq)
	}
	t.Logf("%d SIGKILLs (%d at once after the start): %d heartbeats enqueued, %d delivered (%d duplicates), %d still queued for the next life",
		kills, atOnce, lastSeq, firstQueued-1, dups, lastSeq-firstQueued+1)
}
