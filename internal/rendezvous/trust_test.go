//go:build unix

package rendezvous_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/rendezvous"
)

// other is the user the tests plant files as: nobody.
const other = 65534

// stuck is how long a Meet that should return at once may take before the
// test calls it stuck: far longer than it needs, far shorter than go
// test's own timeout.
const stuck = 10 * time.Second

// meetWithin is Meet of shard 0 of 2 in dir, bounded twice: by its
// context, and by stuck, which a Meet blocked in a system call (on a
// FIFO) ignores its context past. A stuck Meet is let go by opening each
// FIFO of dir's other end, so that it leaks no goroutine, and fails the
// test.
func meetWithin(t *testing.T, dir string) (rendezvous.Meeting, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stuck/2)
	defer cancel()
	type result struct {
		m   rendezvous.Meeting
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := rendezvous.Meet(ctx, dir, 0, 2, shared, time.Minute)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		return r.m, r.err
	case <-time.After(stuck):
		fifos, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range fifos {
			if fd, err := syscall.Open(f, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				syscall.Close(fd)
			}
		}
		<-done
		t.Fatalf("Meet blocked for %v, past its context and its wait", stuck)
		return rendezvous.Meeting{}, nil
	}
}

// plantMark writes shard's mark at path as a shard would, ready at ready
// and stamped by the volume at the same instant.
func plantMark(t *testing.T, path string, shard int, plan []string, ready time.Time) {
	t.Helper()
	b, err := json.Marshal(rendezvous.Mark{Shard: shard, Shards: 2, Host: "pod-1", PlanHash: rendezvous.Hash(plan), Plan: plan,
		ReadyUnixNS: ready.UnixNano()})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	require.NoError(t, os.Chtimes(path, ready, ready))
}

// What is planted as the other shard's mark is refused before it is read,
// whatever it holds, and a FIFO does not block the shard: a link to a good
// mark, a good mark with a second name, another user's good mark.
func TestAPlantedMarkIsRefusedUnread(t *testing.T) {
	plants := map[string]struct {
		plant func(t *testing.T, mark string)
		why   string
	}{
		"fifo": {func(t *testing.T, mark string) { require.NoError(t, syscall.Mkfifo(mark, 0o644)) },
			"ready-1.json is a FIFO, not a regular file"},
		"link": {func(t *testing.T, mark string) {
			good := filepath.Join(t.TempDir(), "good.json")
			plantMark(t, good, 1, shared, time.Now())
			require.NoError(t, os.Symlink(good, mark))
		}, "ready-1.json is a symbolic link, which the process does not follow"},
		"second name": {func(t *testing.T, mark string) {
			good := filepath.Join(t.TempDir(), "good.json")
			plantMark(t, good, 1, shared, time.Now())
			require.NoError(t, os.Link(good, mark))
		}, "ready-1.json has 2 links"},
		"another user's": {func(t *testing.T, mark string) {
			if os.Geteuid() != 0 {
				t.Skip("planting a file as another user needs root (CI runs as root): skipping")
			}
			plantMark(t, mark, 1, shared, time.Now())
			require.NoError(t, os.Chown(mark, other, other))
		}, "ready-1.json belongs to uid 65534, not to this process's uid 0"},
	}
	for name, p := range plants {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p.plant(t, filepath.Join(dir, "ready-1.json"))
			_, err := meetWithin(t, dir)
			require.ErrorIs(t, err, rendezvous.ErrRefused)
			assert.ErrorIs(t, err, datadir.ErrUntrusted)
			assert.ErrorContains(t, err, p.why)
		})
	}
}

// Links planted where a shard writes (the name the old code wrote its mark
// to first, and its gave-up file) are replaced or left, never written
// through; a link planted as another shard's gave-up file stops the strike.
func TestAShardWritesThroughNoPlantedLink(t *testing.T) {
	dir := t.TempDir()
	victims := map[string]string{}
	for _, name := range []string{"ready-0.json.tmp", "gave-up-0"} {
		victim := filepath.Join(t.TempDir(), "victim")
		require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
		require.NoError(t, os.Symlink(victim, filepath.Join(dir, name)))
		victims[name] = victim
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // gives up at once, writing gave-up-0
	_, err := rendezvous.Meet(ctx, dir, 0, 2, shared, time.Minute)
	assert.ErrorIs(t, err, context.Canceled)
	for name, victim := range victims {
		got, err := os.ReadFile(victim)
		require.NoError(t, err)
		assert.Equal(t, "precious", string(got), "%s's target", name)
	}
	fi, err := os.Lstat(filepath.Join(dir, "ready-0.json"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the mark is a file of the shard's own, not the link renamed")

	// The old code's os.Stat saw no gave-up file through a dangling link.
	elsewhere := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "nowhere"), filepath.Join(elsewhere, "gave-up-1")))
	err = rendezvous.StillOn(elsewhere, 2)
	assert.ErrorIs(t, err, rendezvous.ErrRefused)
	assert.ErrorContains(t, err, "gave-up-1 is a symbolic link")
}

// A mark dated an hour ahead or an hour back, its volume's stamp to match
// (so that the clocks agree), is refused: no shard of this run was ready
// then, and an hour ahead would move the strike an hour.
func TestAMarkDatedOutsideTheWaitIsRefused(t *testing.T) {
	for name, c := range map[string]struct {
		by   time.Duration
		says string
	}{
		"ahead": {time.Hour, `, (59m59\.9\d*|1h0m0(\.\d+)?)s after shard 0 read it at .+ by its own clock: ` +
			`no shard is ready in the future; check the clock of pod-1`},
		"back": {-time.Hour, `, 1h0m0(\.\d+)?s before shard 0 began waiting at .+, longer than the 1m0s it waits: ` +
			`a mark from an earlier run`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ready := time.Now().Add(c.by)
			plantMark(t, filepath.Join(dir, "ready-1.json"), 1, shared, ready)
			_, err := meetWithin(t, dir)
			require.ErrorIs(t, err, rendezvous.ErrRefused)
			assert.ErrorContains(t, err, "shard 1's mark (pod-1) says it was ready at "+ready.UTC().Format(time.RFC3339Nano))
			assert.Regexp(t, c.says, err.Error())
		})
	}
}

// A mark bigger than 64 KiB is refused unread: the refusal names the file
// and its size, and echoes none of it (the old code echoed a plan setting
// of any length, naming how it differed).
func TestAnOversizedMarkIsRefusedUnread(t *testing.T) {
	dir := t.TempDir()
	huge := []string{"Devices=300", "Policy=" + strings.Repeat("A", 1<<20), "Scenario=broker-restart"}
	plantMark(t, filepath.Join(dir, "ready-1.json"), 1, huge, time.Now())
	fi, err := os.Stat(filepath.Join(dir, "ready-1.json"))
	require.NoError(t, err)
	_, err = meetWithin(t, dir)
	require.ErrorIs(t, err, rendezvous.ErrRefused)
	assert.ErrorContains(t, err, fmt.Sprintf("%s holds %d bytes, more than a mark's 65536", filepath.Join(dir, "ready-1.json"), fi.Size()))
	assert.NotContains(t, err.Error(), "AAAA")
	assert.Less(t, len(err.Error()), 300)
}

// A meeting place others may write to is refused unless it has the sticky
// bit, and so is one reached through a link as its last step, or one
// another user owns.
func TestADirectoryOthersMayChangeIsRefused(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o777))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(open, link))
	cases := map[string]string{
		open: open + " is writable by others (0777) without the sticky bit",
		link: link + " is a symbolic link (to " + open + "), which the process does not follow",
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		require.NoError(t, os.Mkdir(theirs, 0o755))
		require.NoError(t, os.Chown(theirs, other, other))
		cases[theirs] = theirs + " belongs to uid 65534, not to root or this process's uid 0"
	}
	for dir, why := range cases {
		_, err := rendezvous.Meet(context.Background(), dir, 0, 1, shared, time.Minute)
		assert.ErrorIs(t, err, rendezvous.ErrRefused, dir)
		assert.ErrorContains(t, err, why)
		entries, err := os.ReadDir(open)
		require.NoError(t, err)
		assert.Empty(t, entries, "%s: no mark written", dir)
	}

	require.NoError(t, os.Chmod(open, os.ModeSticky|0o777)) // as /tmp: others may not replace a shard's files
	_, err := rendezvous.Meet(context.Background(), open, 0, 1, shared, time.Minute)
	assert.NoError(t, err)
	if os.Geteuid() != 0 {
		t.Skip("the case of another user's directory needs root (CI runs as root): skipped")
	}
}
