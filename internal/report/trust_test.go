//go:build unix

package report_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/report"
)

// other is the user the tests plant files as: nobody.
const other = 65534

// files are what WriteFiles writes, and report.json.tmp, where the old
// code wrote report.json first.
var files = []string{"events.csv", "arrivals.svg", "report.html", "report.json", "report.json.tmp"}

// small is a report of 100 devices, with its events.
func small(t *testing.T) *report.Report {
	t.Helper()
	var records []attempt.Record
	for d := range 100 {
		records = append(records, attempt.Record{T: time.Duration(d) * 100 * time.Millisecond, Lag: time.Millisecond, Device: int32(d),
			Outcome: fault.Accepted})
	}
	return build(t, 100, records)
}

// within runs f, and fails the test if it has not returned in 10 s: far
// longer than it needs, far shorter than go test's own timeout. A call
// blocked on a FIFO of dir is let go first, by opening the FIFO's other
// end, so that it leaks no goroutine.
func within(t *testing.T, dir string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, name := range names {
			for _, end := range []int{syscall.O_RDONLY, syscall.O_WRONLY} {
				if fd, err := syscall.Open(name, end|syscall.O_NONBLOCK, 0); err == nil {
					syscall.Close(fd)
				}
			}
		}
		<-done
		t.Fatal("blocked for 10 s")
		return nil
	}
}

// Links planted in a report's directory, in the place of each file it
// writes, are replaced, never written through.
func TestWriteFilesWritesThroughNoPlantedLink(t *testing.T) {
	dir := t.TempDir()
	victims := t.TempDir()
	for _, name := range files {
		require.NoError(t, os.WriteFile(filepath.Join(victims, name), []byte("precious"), 0o644))
		require.NoError(t, os.Symlink(filepath.Join(victims, name), filepath.Join(dir, name)))
	}
	rep := small(t)
	old := syscall.Umask(0o022) // process-wide: these tests are not parallel
	err := rep.WriteFiles(dir)
	syscall.Umask(old)
	require.NoError(t, err)
	for _, name := range files {
		got, err := os.ReadFile(filepath.Join(victims, name))
		require.NoError(t, err)
		assert.Equal(t, "precious", string(got), "%s's target", name)
	}
	for _, name := range files[:4] {
		fi, err := os.Lstat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s is the report's own file", name)
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "%s: as readable as before, not tightened", name)
	}
	back, err := report.ReadReport(dir)
	require.NoError(t, err)
	assert.Equal(t, rep.Events(), back.Events())
}

// FIFOs planted in the place of a report's files block neither the
// writer nor the reader: WriteFiles replaces them, ReadReport refuses one.
func TestAPlantedFIFOBlocksNoReport(t *testing.T) {
	dir := t.TempDir()
	for _, name := range files {
		require.NoError(t, syscall.Mkfifo(filepath.Join(dir, name), 0o644))
	}
	require.NoError(t, within(t, dir, func() error { return small(t).WriteFiles(dir) }))

	for _, name := range []string{"report.json", "events.csv"} {
		require.NoError(t, os.Remove(filepath.Join(dir, name)))
		require.NoError(t, syscall.Mkfifo(filepath.Join(dir, name), 0o644))
		err := within(t, dir, func() error { _, err := report.ReadReport(dir); return err })
		assert.ErrorIs(t, err, datadir.ErrUntrusted, name)
		assert.ErrorContains(t, err, filepath.Join(dir, name)+" is a FIFO, not a regular file")
		require.NoError(t, small(t).WriteFiles(dir))
	}
}

// Another user's files in a report's directory are not emptied or
// written: each name is given the report's own file.
func TestWriteFilesEmptiesNoOneElsesFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting a file as another user needs root (CI runs as root): skipping")
	}
	dir := t.TempDir()
	held := map[string]*os.File{}
	for _, name := range files[:4] {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte("theirs"), 0o666))
		require.NoError(t, os.Chown(path, other, other))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		held[name] = f
	}
	require.NoError(t, small(t).WriteFiles(dir))
	for name, f := range held {
		got, err := io.ReadAll(f)
		require.NoError(t, err)
		assert.Equal(t, "theirs", string(got), name)
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "%s: the report's own file now", name)
	}
}

// A report's directory is refused if others may write to it without the
// sticky bit, or if its last step is a link; nothing is written there.
func TestWriteFilesRefusesADirectoryOthersMayChange(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o777))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(open, link))
	for dir, why := range map[string]string{
		open: open + " is writable by others (0777) without the sticky bit",
		link: link + " is a symbolic link (to " + open + "), which the process does not follow",
	} {
		err := small(t).WriteFiles(dir)
		assert.ErrorIs(t, err, datadir.ErrUntrusted, dir)
		assert.ErrorContains(t, err, why)
		assert.ErrorIs(t, report.WriteCharts(dir, []*report.Report{small(t)}), datadir.ErrUntrusted, dir)
		entries, err := os.ReadDir(open)
		require.NoError(t, err)
		assert.Empty(t, entries, "%s: nothing written", dir)
	}
	require.NoError(t, os.Chmod(open, os.ModeSticky|0o777))
	assert.NoError(t, small(t).WriteFiles(open), "sticky, as /tmp: others may not replace the report's files")
}
