//go:build unix

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/internal/waitfor"
	"github.com/herdguard/herdguard/testbroker"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// withUmask runs f under umask m (process-wide: these tests are not parallel).
func withUmask(m int, f func()) {
	old := syscall.Umask(m)
	defer syscall.Umask(old)
	f()
}

// runToConfig runs the agent with dir as its data directory until its
// configuration is applied, and returns what run returned and the log.
func runToConfig(t *testing.T, dir string) (error, string) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	cs := configserver.NewServer()
	defer cs.Close()
	cs.SetConfig("dev-d", []byte(`{"heartbeat_interval":"5s"}`))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ended, end := context.WithCancel(context.Background()) // ends when run returns
	defer end()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-broker", b.URL(), "-client-id", "dev-d", "-boot-spread", "1ms", "-data-dir", dir,
			"-config-url", cs.DeviceURL("dev-d"), "-allow-plaintext"}, noEnv, logs)
		end()
	}()
	err = waitfor.UntilContext(ended, &logs.mu, &logs.changed, bound, func() bool {
		return strings.Contains(logs.b.String(), "config applied")
	})
	if err != nil && ended.Err() == nil {
		t.Fatalf("the configuration was never applied:\n%s", logs.String())
	}
	stop()
	return <-done, logs.String()
}

// The data directory and every file in it are the device's alone, whatever
// the umask: a umask of 0277 would otherwise leave a read-only queue and
// a 0500 directory.
func TestDataDirAndItsFilesArePrivateWhateverTheUmask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "agent")
	var err error
	withUmask(0o277, func() { err, _ = runToConfig(t, dir) })
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), mode(t, dir))
	assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(dir, "queue.db")))
	assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(dir, "config.json")))
	withUmask(0, func() { err, _ = runToConfig(t, filepath.Join(t.TempDir(), "open")) })
	require.NoError(t, err)
}

func TestDataDirOpenToOthersIsTightenedAndLogged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wide")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777))
	logs := &syncBuffer{}
	require.NoError(t, ownDataDir(dir, slog.New(slog.NewTextHandler(logs, nil))))
	assert.Equal(t, os.FileMode(0o700), mode(t, dir))
	assert.Contains(t, logs.String(), "tightened to 0700")
	assert.Contains(t, logs.String(), "was=0777")
}

func TestDataDirOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	err := ownDataDir(dir, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "belongs to uid 65534")
}

// A link planted in the data directory is never followed: the queue is
// refused with a clear error, the configuration's link is replaced, and
// neither target is touched.
func TestSymlinksInTheDataDirAreNotFollowed(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))

	t.Run("queue", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o700))
		require.NoError(t, os.Symlink(victim, filepath.Join(dir, "queue.db")))
		err, _ := runToConfig(t, dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "telemetry queue")
		assert.Contains(t, err.Error(), "symbolic link")
	})
	t.Run("config", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o700))
		link := filepath.Join(dir, "config.json")
		require.NoError(t, os.Symlink(victim, link))
		err, logs := runToConfig(t, dir)
		require.NoError(t, err)
		assert.Contains(t, logs, "stored config unreadable")
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "the link was replaced by the device's own file")
	})
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.Equal(t, os.FileMode(0o644), mode(t, victim))
}
