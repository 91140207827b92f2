package publisher_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/publisher"
)

// tmpfs mounts a tmpfs of size bytes on a directory under t.TempDir() and
// unmounts it when the test ends. It skips the test where mounting is not
// permitted (not root, or no CAP_SYS_ADMIN).
func tmpfs(t *testing.T, size int) string {
	dir := filepath.Join(t.TempDir(), "disk")
	require.NoError(t, os.Mkdir(dir, 0o700))
	err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, fmt.Sprintf("size=%d,mode=0700", size))
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("mounting a tmpfs is not permitted here: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, syscall.Unmount(dir, 0)) })
	return dir
}

// TestFullTmpfsDropsOldest fills a real 256 KiB disk with telemetry until
// the kernel refuses it (ENOSPC, under RejectNew, which returns it), then
// reopens the full store under DropOldest: the newest message is accepted,
// the oldest go and are counted, and after 100 more the store reopens with
// exactly the messages not dropped, in order. The queue never shrinks to
// half of what filled the disk. Three sizes: 200-byte telemetry, dozens to
// a bbolt page; 6,000 bytes, a few to a leaf spread over several pages,
// where a drop that cuts a leaf needs room of its own (see append); and
// 20,000 bytes, where only dropping whole leaves, in one transaction, can
// commit at all.
func TestFullTmpfsDropsOldest(t *testing.T) {
	for _, size := range []int{200, 6000, 20000} {
		t.Run(fmt.Sprint(size, " bytes"), func(t *testing.T) {
			path := filepath.Join(tmpfs(t, 256<<10), "q.db")
			const topic = "telemetry/dev-1"

			s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{})
			require.NoError(t, err)
			p, err := publisher.New(publisher.Config{Session: neverConnected{}, Store: s, Overflow: publisher.RejectNew})
			require.NoError(t, err)
			defer p.Close()
			n := 0
			for ; n < 10_000; n++ { // a bound far above what 256 KiB holds
				if _, err = p.Publish(topic, telemetry(n+1, size)); err != nil {
					break
				}
			}
			require.ErrorIs(t, err, syscall.ENOSPC, "after %d messages", n)
			require.Greater(t, n, 3)
			require.Equal(t, publisher.Stats{Enqueued: uint64(n), Queued: n, QueuedBytes: int64(n * (len(topic) + size))}, p.Stats())
			epoch := s.Epoch()
			require.NoError(t, p.Close())

			s, err = publisher.OpenBoltStore(path, publisher.BoltOptions{})
			require.NoError(t, err, "the full store reopens")
			p, err = publisher.New(publisher.Config{Session: neverConnected{}, Store: s})
			require.NoError(t, err)
			defer p.Close()
			seq, err := p.Publish(topic, telemetry(n+1, size))
			require.NoError(t, err, "the newest message is accepted")
			require.Equal(t, uint64(n+1), seq)
			st := p.Stats()
			require.Positive(t, st.DroppedOldest, "%+v", st)
			require.Equal(t, uint64(n), st.Restored)
			require.True(t, balanced(st), "%+v", st)
			front, ok, err := s.Front()
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, st.DroppedOldest+1, front.Seq, "the ones gone are the oldest")

			const more = 100
			least := st.Queued
			for i := n + 2; i <= n+1+more; i++ {
				seq, err := p.Publish(topic, telemetry(i, size))
				require.NoError(t, err)
				require.Equal(t, uint64(i), seq)
				st := p.Stats()
				require.True(t, balanced(st), "%+v", st)
				require.Greater(t, st.Queued, n/2, "%+v", st)
				least = min(least, st.Queued)
			}
			st = p.Stats()
			require.Equal(t, uint64(1+more), st.Enqueued)
			t.Logf("%d messages filled the disk; the next %d cost the %d oldest; the queue held at least %d",
				n, 1+more, st.DroppedOldest, least)
			require.NoError(t, p.Close())

			s, err = publisher.OpenBoltStore(path, publisher.BoltOptions{})
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, epoch, s.Epoch(), "reopened cleanly: the same epoch")
			left := drainAll(t, s)
			require.Len(t, left, n+1+more-int(st.DroppedOldest))
			for i, m := range left {
				require.Equal(t, st.DroppedOldest+1+uint64(i), m.Seq)
				require.Equal(t, string(telemetry(int(m.Seq), size)), string(m.Payload), "seq %d", m.Seq)
			}
		})
	}
}
