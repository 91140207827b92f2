package publisher_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// childMain is a device with a durable queue: it enqueues PUBLISHER_ENQUEUE
// messages if its store is new, then drains at 200 msg/s until killed.
func childMain() int {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	store, err := publisher.OpenBoltStore(os.Getenv("PUBLISHER_DB"), publisher.BoltOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	p, _ := reconnect.New(reconnect.Constant{Interval: 5 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	tm := device.DefaultTiming()
	tm.Policy, tm.BootSpread, tm.Guard = p, time.Millisecond, nil
	agent, err := device.New(device.Config{Broker: os.Getenv("PUBLISHER_BROKER"), ClientID: "dev-k", Timing: &tm, Source: rand.NewPCG(5, 5)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	pub, err := publisher.New(publisher.Config{Session: agent, Store: store, DrainRate: 200, DrainBurst: 1, Retry: p})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	if n, _ := strconv.Atoi(os.Getenv("PUBLISHER_ENQUEUE")); n > 0 && store.LastSeq() == 0 {
		for i := 1; i <= n; i++ {
			if _, err := pub.Publish("telemetry/dev-k", []byte(strconv.Itoa(i))); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
		}
	}
	ctx := context.Background()
	_ = agent.Start(ctx)
	_ = pub.Run(ctx) // until SIGKILL
	return 0
}

func startChild(t *testing.T, broker, db string, enqueue int) *exec.Cmd {
	cmd, _ := startSelf(t, "PUBLISHER_CHILD=1", "PUBLISHER_BROKER="+broker, "PUBLISHER_DB="+db,
		"PUBLISHER_ENQUEUE="+strconv.Itoa(enqueue))
	return cmd
}

// startSelf runs this test binary again with env added, its stdout piped.
func startSelf(t *testing.T, env ...string) (*exec.Cmd, io.ReadCloser) {
	env = append(os.Environ(), env...)
	start := func(name string, args ...string) (*exec.Cmd, io.ReadCloser, error) {
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Stderr = env, os.Stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		return cmd, out, cmd.Start()
	}
	cmd, out, err := start(os.Args[0])
	if errors.Is(err, syscall.ENOEXEC) {
		// Under qemu-user without binfmt_misc an ARM test binary cannot exec
		// itself: run the child through the emulator explicitly.
		qemu, lerr := exec.LookPath("qemu-arm-static")
		if lerr != nil {
			t.Skip("cannot re-exec the emulated test binary and qemu-arm-static is not on PATH")
		}
		cmd, out, err = start(qemu, os.Args[0])
	}
	require.NoError(t, err)
	return cmd, out
}

// holdMain opens the store at PUBLISHER_DB, says "held" and keeps it open
// until killed.
func holdMain() int {
	s, err := publisher.OpenBoltStore(os.Getenv("PUBLISHER_DB"), publisher.BoltOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 2
	}
	defer s.Close()
	fmt.Println("held", s.Epoch())
	// Not select{}: with no timer pending, the runtime may take a bare block
	// for a deadlock and end the process, releasing the lock (seen under
	// qemu-arm-static). A sleeping goroutine is never a deadlock.
	for {
		time.Sleep(time.Hour)
	}
}

func kill(t *testing.T, cmd *exec.Cmd) {
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "child should die of the signal, got %v", err)
}

// TestDurableQueueSurvivesSIGKILL kills a device mid-drain and starts it
// again on the same store: every message reaches the broker.
func TestDurableQueueSurvivesSIGKILL(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{PayloadDigest: seqDigest})
	require.NoError(t, err)
	defer b.Close()
	db := filepath.Join(t.TempDir(), "queue.db")
	const total = 400

	first := startChild(t, b.URL(), db, total)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 60 }))
	kill(t, first)
	before := len(seen(b))
	require.Less(t, before, total, "killed mid-drain")

	second := startChild(t, b.URL(), db, 0)
	defer kill(t, second)
	got := awaitAllSeen(t, b, total)
	dups := 0
	for seq := uint64(1); seq <= total; seq++ {
		require.Positive(t, got[seq], "sequence %d lost", seq)
		dups += got[seq] - 1
	}
	t.Logf("killed after %d of %d; after restart all %d arrived, %d duplicates", before, total, total, dups)
}

// TestStoreHeldByAnotherProcess: while one process holds a store, opening
// it from another is a clear error, and the store is neither moved nor
// changed; once the holder is gone it opens with its queue intact.
func TestStoreHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "queue.db")
	s, err := publisher.OpenBoltStore(db, publisher.BoltOptions{})
	require.NoError(t, err)
	for i := uint64(1); i <= 10; i++ {
		require.NoError(t, s.Append(publisher.Message{Seq: i, Topic: "t", Payload: []byte("x")}))
	}
	require.NoError(t, s.Close())

	holder, out := startSelf(t, "PUBLISHER_CHILD=hold", "PUBLISHER_DB="+db)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the holder never said it held the store")
	epoch := strings.TrimSpace(strings.TrimPrefix(line, "held"))
	before, err := os.ReadFile(db)
	require.NoError(t, err)

	start := time.Now()
	_, err = publisher.OpenBoltStore(db, publisher.BoltOptions{LockTimeout: 300 * time.Millisecond})
	require.ErrorIs(t, err, publisher.ErrStoreInUse)
	require.ErrorContains(t, err, "in use by another process")
	var ce *publisher.CorruptStoreError
	require.False(t, errors.As(err, &ce))
	require.Less(t, time.Since(start), bound, "bounded by LockTimeout")
	after, err := os.ReadFile(db)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "the held store is untouched")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing moved aside: %v", entries)

	kill(t, holder)
	s, err = publisher.OpenBoltStore(db, publisher.BoltOptions{})
	require.NoError(t, err)
	defer s.Close()
	n, _ := s.Len()
	require.Equal(t, 10, n)
	require.Equal(t, epoch, s.Epoch())
}
