//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/internal/datadir"
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

// withDataDir starts a broker and a config server for a run with dir as
// its data directory, and returns the run's arguments and the broker.
func withDataDir(t *testing.T, dir string) ([]string, *testbroker.Broker) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	cs := configserver.NewServer()
	t.Cleanup(cs.Close)
	cs.SetConfig("dev-d", []byte(`{"heartbeat_interval":"5s"}`))
	return []string{"-broker", b.URL(), "-client-id", "dev-d", "-boot-spread", "1ms", "-data-dir", dir,
		"-config-url", cs.DeviceURL("dev-d"), "-allow-plaintext"}, b
}

// runToConfig runs the agent with dir as its data directory until its
// configuration is applied, and returns what run returned and the log.
func runToConfig(t *testing.T, dir string) (error, string) {
	args, _ := withDataDir(t, dir)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ended, end := context.WithCancel(context.Background()) // ends when run returns
	defer end()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, noEnv, logs)
		end()
	}()
	err := waitfor.UntilContext(ended, &logs.mu, &logs.changed, bound, func() bool {
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
	// made before the umask: the test's own directories would be 0777
	open := filepath.Join(t.TempDir(), "open")
	withUmask(0, func() { err, _ = runToConfig(t, open) })
	require.NoError(t, err)
}

func TestDataDirOpenToOthersIsTightenedAndLogged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wide")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777))
	err, logs := runToConfig(t, dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), mode(t, dir))
	assert.Contains(t, logs, "tightened to 0700")
	assert.Contains(t, logs, "was=0777")
}

// asRoot skips, loudly, a test that must plant files as another user.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("planting files as another user needs root (make test runs as root in CI): skipping")
	}
}

// nobody is the other user the tests plant files as.
const nobody = 65534

// runRefused runs the agent with dir as its data directory and returns the
// error it stopped with, which it must within the bound: a refusal comes
// before anything is read, and a FIFO never holds it. The broker says
// whether anything reached it.
func runRefused(t *testing.T, dir string) (err error, published int) {
	args, b := withDataDir(t, dir)
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), args, noEnv, &syncBuffer{}) }()
	select {
	case err = <-done:
	case <-time.After(bound):
		t.Fatal("the agent neither started nor refused within the bound")
	}
	require.Error(t, err, "refused")
	return err, len(b.Recorder().Publishes())
}

// The data directory of another user is refused.
func TestDataDirOfAnotherUserIsRefused(t *testing.T) {
	asRoot(t)
	dir := filepath.Join(t.TempDir(), "theirs")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chown(dir, nobody, nobody))
	err, _ := runRefused(t, dir)
	assert.ErrorContains(t, err, "-data-dir: not the agent's own: "+dir+" belongs to uid 65534")
}

// A file another user planted in a data directory left open to them (the
// issue's rows: a queue of theirs, a configuration of theirs) is refused
// before anything in it is read or sent, and left as it was: not made
// 0600, not moved aside.
func TestFilesPlantedInTheDataDirAreRefused(t *testing.T) {
	asRoot(t)
	for name, want := range map[string]string{
		"queue.db":    "telemetry queue: publisher: store: not the agent's own: %s belongs to uid 65534",
		"config.json": "remoteconfig: config store: not the agent's own: %s belongs to uid 65534",
	} {
		dir := filepath.Join(t.TempDir(), "open")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chmod(dir, 0o777))
		planted := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(planted, []byte(`{"etag":"x","doc":{"heartbeat_interval":"5s"}}`), 0o666))
		require.NoError(t, os.Chmod(planted, 0o666))
		require.NoError(t, os.Chown(planted, nobody, nobody))
		err, published := runRefused(t, dir)
		assert.ErrorIs(t, err, datadir.ErrNotPrivate, name)
		assert.ErrorContains(t, err, fmt.Sprintf(want, planted), name)
		assert.Zero(t, published, "%s: nothing sent under the device's identity", name)
		assert.Equal(t, os.FileMode(0o666), mode(t, planted), "%s: not made the device's", name)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "%s: nothing moved aside, nothing added", name)
	}
}

// A FIFO in a file's place never holds the agent; a hard link to another
// file is refused, and that file's mode is left as it was.
func TestFIFOsAndHardLinksInTheDataDirAreRefused(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	for _, tc := range []struct {
		name, what string
		plant      func(path string) error
	}{
		{"config.json", "is a FIFO, not a regular file", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"queue.db", "is a FIFO, not a regular file", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"queue.db", "has 2 links: another name for it could be written", func(p string) error { return os.Link(victim, p) }},
	} {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o700))
		require.NoError(t, tc.plant(filepath.Join(dir, tc.name)))
		err, _ := runRefused(t, dir)
		assert.ErrorContains(t, err, filepath.Join(dir, tc.name)+" "+tc.what, tc.name)
	}
	assert.Equal(t, os.FileMode(0o644), mode(t, victim), "the hard link's file is not made the device's")
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
}

// A link planted in the data directory is never followed: the agent
// refuses it with a clear error, and neither the link nor its target is
// touched.
func TestSymlinksInTheDataDirAreNotFollowed(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	for _, name := range []string{"queue.db", "config.json"} {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o700))
		link := filepath.Join(dir, name)
		require.NoError(t, os.Symlink(victim, link))
		err, _ := runRefused(t, dir)
		assert.ErrorContains(t, err, link+" is a symbolic link, which the agent does not follow", name)
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "%s: the link left where it was", name)
	}
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.Equal(t, os.FileMode(0o644), mode(t, victim))
}

// The first row: -data-dir is a link another user planted in a
// directory anyone may write to (no sticky bit), pointing at a directory
// of the agent's user. The agent refuses it: the target's mode is left as
// it was and nothing is created in it.
func TestADataDirLinkPlantedByAnotherUserIsRefused(t *testing.T) {
	asRoot(t)
	open := t.TempDir()
	require.NoError(t, os.Chmod(open, 0o777))
	target := filepath.Join(t.TempDir(), "roots")
	require.NoError(t, os.Mkdir(target, 0o755))
	require.NoError(t, os.Chmod(target, 0o755))
	link := filepath.Join(open, "data")
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, os.Lchown(link, nobody, nobody))

	err, published := runRefused(t, link)
	assert.ErrorContains(t, err, "-data-dir: not the agent's own: "+open+" is writable by others (0777) without the sticky bit")
	assert.Zero(t, published)
	assert.Equal(t, os.FileMode(0o755), mode(t, target), "the target is not made the device's")
	entries, err := os.ReadDir(target)
	require.NoError(t, err)
	assert.Empty(t, entries, "no queue, no config created through the link")

	// With the parent closed to others, the link is still not followed.
	require.NoError(t, os.Chmod(open, 0o755))
	err, _ = runRefused(t, link)
	assert.ErrorContains(t, err, link+": not the agent's own: a symbolic link or not a directory, which the agent does not follow")
	assert.Equal(t, os.FileMode(0o755), mode(t, target))
}

// A FIFO given as -password-file or -key never holds the agent: it is
// refused, as not a regular file, before anything waits on it.
func TestSecretFilesThatAreFIFOsDoNotHoldTheAgent(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for flagName, args := range map[string][]string{
		"-password-file": {"-broker", "ssl://b:8883", "-client-id", "a", "-password-file", fifo},
		"-key":           {"-broker", "ssl://b:8883", "-client-id", "a", "-cert", fifo + ".pem", "-key", fifo},
	} {
		done := make(chan error, 1)
		go func() { done <- run(context.Background(), args, noEnv, &bytes.Buffer{}) }()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, flagName+" "+fifo+" is not a regular file")
		case <-time.After(bound):
			t.Fatalf("%s: a FIFO held the agent", flagName)
		}
	}
}
