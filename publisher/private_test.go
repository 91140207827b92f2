//go:build unix

package publisher_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/publisher"
)

// The queue file is the device's own: 0600 whatever the umask, and never
// opened through a symlink planted where it should be.
func TestQueueFileIsPrivateAndNeverASymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "queue.db")
	old := syscall.Umask(0o277) // process-wide: this test is not parallel
	s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{})
	syscall.Umask(old)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.NoError(t, os.Chmod(path, 0o644)) // an older version's file
	s, err = publisher.OpenBoltStore(path, publisher.BoltOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	link := filepath.Join(dir, "linked.db")
	require.NoError(t, os.Symlink(victim, link))
	_, err = publisher.OpenBoltStore(link, publisher.BoltOptions{})
	require.ErrorIs(t, err, publisher.ErrNotPrivate)
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	fi, err = os.Lstat(link)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link itself is left where it was")
}
