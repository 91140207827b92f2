//go:build unix

package datadir_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/datadir"
)

// other is the second user the tests plant files as: nobody.
const other = 65534

// asRoot skips, loudly, a test that must give files to another user.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("planting files as another user needs root (make test runs as root in CI): skipping")
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode()
}

// withUmask runs f under umask m (process-wide: these tests are not parallel).
func withUmask(m int, f func()) {
	old := syscall.Umask(m)
	defer syscall.Umask(old)
	f()
}

// A missing data directory and its missing parents are made 0700 whatever
// the umask, and held open.
func TestOpenMakesTheDirectoryPrivate(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "state", "agent")
	var d *datadir.Dir
	var err error
	withUmask(0o277, func() { d, err = datadir.Open(path, nil) })
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, path, d.Path())
	assert.Equal(t, os.ModeDir|0o700, mode(t, path))
	assert.Equal(t, os.ModeDir|0o700, mode(t, filepath.Join(base, "state")))

	f, err := datadir.OpenFile(d.File(), "queue.db", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(path, "queue.db")))
}

// A directory open to others is tightened on its handle, and said.
func TestOpenTightensADirectoryOpenToOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wide")
	require.NoError(t, os.Mkdir(path, 0o700))
	require.NoError(t, os.Chmod(path, 0o777))
	var said []any
	d, err := datadir.Open(path, func(msg string, args ...any) { said = append([]any{msg}, args...) })
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, os.ModeDir|0o700, mode(t, path))
	assert.Equal(t, []any{"data directory was open to others; tightened to 0700", "dir", path, "was", "0777"}, said)
}

// A data directory reached through a symbolic link, at its last step or
// any before it, is refused, and nothing is made or changed where the link
// points.
func TestOpenFollowsNoLink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	require.NoError(t, os.Mkdir(target, 0o755))
	for _, link := range []string{filepath.Join(base, "agent"), filepath.Join(base, "via")} {
		require.NoError(t, os.Symlink(target, link))
	}
	for _, path := range []string{filepath.Join(base, "agent"), filepath.Join(base, "via", "agent")} {
		_, err := datadir.Open(path, nil)
		assert.ErrorIs(t, err, datadir.ErrNotPrivate, path)
		assert.ErrorContains(t, err, "symbolic link", path)
	}
	assert.Equal(t, os.ModeDir|0o755, mode(t, target), "the link's target is not tightened")
	entries, err := os.ReadDir(target)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing made in the link's target")
}

// The first row: a symbolic link planted by another user in a
// world-writable directory without the sticky bit, pointing at a
// directory of root's. The parent is refused before the link is looked
// at; with the sticky bit (as /tmp has it) a directory of the agent's
// own within it is fine.
func TestOpenRefusesAParentOthersMayChange(t *testing.T) {
	asRoot(t)
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	require.NoError(t, os.Mkdir(shared, 0o777))
	require.NoError(t, os.Chmod(shared, 0o777))
	roots := filepath.Join(base, "roots")
	require.NoError(t, os.Mkdir(roots, 0o755))
	link := filepath.Join(shared, "agent")
	require.NoError(t, os.Symlink(roots, link))
	require.NoError(t, os.Lchown(link, other, other))

	_, err := datadir.Open(link, nil)
	require.ErrorIs(t, err, datadir.ErrNotPrivate)
	assert.ErrorContains(t, err, shared+" is writable by others (0777) without the sticky bit")
	assert.Equal(t, os.ModeDir|0o755, mode(t, roots))
	_, err = os.Stat(filepath.Join(roots, "queue.db"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	theirs := filepath.Join(base, "theirs")
	require.NoError(t, os.Mkdir(theirs, 0o755))
	require.NoError(t, os.Chown(theirs, other, other))
	_, err = datadir.Open(filepath.Join(theirs, "agent"), nil)
	assert.ErrorContains(t, err, theirs+" belongs to uid 65534: its owner could replace the data directory within it")

	require.NoError(t, os.Chmod(shared, os.ModeSticky|0o777))
	d, err := datadir.Open(filepath.Join(shared, "mine"), nil)
	require.NoError(t, err)
	d.Close()

	require.NoError(t, os.Chown(filepath.Join(shared, "mine"), other, other))
	_, err = datadir.Open(filepath.Join(shared, "mine"), nil)
	assert.ErrorContains(t, err, "belongs to uid 65534, not to this agent's uid 0")
}

// A file in the data directory that another user owns, that is not a
// regular file or that has more than one link is refused before anything
// is read, changed or renamed; a FIFO does not block.
func TestOpenFileRefusesWhatIsNotTheAgentsOwn(t *testing.T) {
	dir := t.TempDir()
	d, err := datadir.Open(dir, nil)
	require.NoError(t, err)
	defer d.Close()
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))

	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	require.NoError(t, os.Link(victim, filepath.Join(dir, "hardlink")))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, "symlink")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "subdir"), 0o700))
	cases := map[string]string{
		"fifo":     "is a FIFO, not a regular file",
		"hardlink": "has 2 links: another name for it could be written",
		"symlink":  "is a symbolic link, which the agent does not follow",
		"subdir":   "is a directory, not a regular file",
	}
	if os.Geteuid() == 0 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "planted"), []byte("INJECTED"), 0o666))
		require.NoError(t, os.Chmod(filepath.Join(dir, "planted"), 0o666))
		require.NoError(t, os.Chown(filepath.Join(dir, "planted"), other, other))
		cases["planted"] = "belongs to uid 65534, not to this agent's uid 0"
		require.NoError(t, syscall.Mknod(filepath.Join(dir, "device"), syscall.S_IFCHR|0o600, int(mkdev(1, 3))))
		cases["device"] = "is a character device, not a regular file"
	}
	for name, why := range cases {
		before := mode(t, filepath.Join(dir, name))
		done := make(chan error, 1)
		go func() {
			f, err := datadir.OpenFile(d.File(), name, os.O_RDWR|os.O_CREATE, 0o600)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, datadir.ErrNotPrivate, name)
			assert.ErrorContains(t, err, filepath.Join(dir, name)+" "+why, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: OpenFile blocked", name)
		}
		assert.Equal(t, before, mode(t, filepath.Join(dir, name)), "%s: its mode unchanged", name)
	}
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.Equal(t, os.FileMode(0o644), mode(t, victim))
	if os.Geteuid() != 0 {
		t.Skip("the cases of another user's file and of a device file need root (make test runs as root in CI): skipped")
	}
}

// mkdev is Linux's makedev for a character device's major and minor.
func mkdev(major, minor uint32) uint64 {
	return uint64(major&0xfff)<<8 | uint64(minor&0xff) | uint64(major&^0xfff)<<32 | uint64(minor&^0xff)<<12
}

// The agent's own file, whatever an older version's mode, is made 0600.
func TestOpenFileMakesTheAgentsFilePrivate(t *testing.T) {
	dir := t.TempDir()
	d, err := datadir.Open(dir, nil)
	require.NoError(t, err)
	defer d.Close()
	path := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o644))
	require.NoError(t, os.Chmod(path, 0o644))
	f, err := datadir.OpenFile(d.File(), "config.json", os.O_RDONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, os.FileMode(0o600), mode(t, path))
}

// A new file, a rename and a removal, each within the directory's handle.
func TestCreateTempRenameRemove(t *testing.T) {
	dir := t.TempDir()
	d, err := datadir.Open(dir, nil)
	require.NoError(t, err)
	defer d.Close()
	f, err := datadir.CreateTemp(d.File(), ".config-")
	require.NoError(t, err)
	name := filepath.Base(f.Name())
	_, err = f.WriteString("doc")
	require.NoError(t, err)
	assert.True(t, datadir.SameFile(d.File(), name, f))
	require.NoError(t, datadir.Rename(d.File(), name, "config.json"))
	assert.False(t, datadir.SameFile(d.File(), name, f), "moved")
	assert.True(t, datadir.SameFile(d.File(), "config.json", f))
	require.NoError(t, f.Close())
	got, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	assert.Equal(t, "doc", string(got))
	require.NoError(t, datadir.Remove(d.File(), "config.json"))
	assert.ErrorIs(t, datadir.Remove(d.File(), "config.json"), os.ErrNotExist)
	for _, bad := range []string{"", ".", "..", "a/b"} {
		_, err := datadir.OpenFile(d.File(), bad, os.O_RDONLY, 0)
		assert.Error(t, err, bad)
	}
}

// An agent that is not root may not even open a file another user left
// in its directory (0600, theirs): that is a refusal like any other, not
// an unreadable file the agent would then replace. The test runs as root
// and takes the other user's uid as its effective one for the while
// (process-wide: these tests are not parallel).
func TestOpenFileRefusesAFileItMayNotOpen(t *testing.T) {
	asRoot(t)
	dir := t.TempDir()
	// the test's own root-owned parent: let the other user through
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chown(dir, other, other))
	theirs := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(theirs, []byte("{}"), 0o600))

	require.NoError(t, syscall.Seteuid(other))
	d, err := datadir.Open(dir, nil)
	var opened error
	if err == nil {
		_, opened = datadir.OpenFile(d.File(), "config.json", os.O_RDONLY, 0)
		d.Close()
	}
	require.NoError(t, syscall.Seteuid(0))
	require.NoError(t, err)
	require.ErrorIs(t, opened, datadir.ErrNotPrivate)
	assert.ErrorContains(t, opened, theirs+" belongs to uid 0, not to this agent's uid 65534")
	assert.Equal(t, os.FileMode(0o600), mode(t, theirs))
}

// A shared directory's file keeps its mode, and is refused as the agent's
// would be, wrapping ErrUntrusted.
func TestOpenSharedFileKeepsItsMode(t *testing.T) {
	dir := t.TempDir()
	d, err := datadir.OpenSharedDir(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.html"), nil, 0o644))
	require.NoError(t, os.Chmod(filepath.Join(dir, "report.html"), 0o644))
	f, err := datadir.OpenSharedFile(d, "report.html", os.O_RDONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, os.FileMode(0o644), mode(t, filepath.Join(dir, "report.html")))

	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	_, err = datadir.OpenSharedFile(d, "fifo", os.O_RDONLY, 0)
	assert.ErrorIs(t, err, datadir.ErrUntrusted)
	assert.NotErrorIs(t, err, datadir.ErrNotPrivate, "a shared file is not the agent's")
	assert.ErrorContains(t, err, "fifo is a FIFO, not a regular file")
}

// WriteShared replaces a planted link rather than writing through it;
// one whose write fails leaves what was there, and no new file beside it.
func TestWriteSharedWritesWholeOrNot(t *testing.T) {
	dir := t.TempDir()
	d, err := datadir.MkdirShared(filepath.Join(dir, "out"))
	require.NoError(t, err)
	defer d.Close()
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, "out", "report.json")))
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	require.NoError(t, datadir.WriteShared(d, "report.json", 0o644, write("{}")))
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.True(t, mode(t, filepath.Join(dir, "out", "report.json")).IsRegular())

	failed := errors.New("disk full")
	err = datadir.WriteShared(d, "report.json", 0o644, func(w io.Writer) error {
		_, _ = io.WriteString(w, "{half")
		return failed
	})
	assert.ErrorIs(t, err, failed)
	got, err = os.ReadFile(filepath.Join(dir, "out", "report.json"))
	require.NoError(t, err)
	assert.Equal(t, "{}", string(got))
	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}
