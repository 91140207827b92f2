package publisher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bbolt formats a file it could not grow with %s: the text says ENOSPC,
// the chain does not. The store puts it back, and leaves other errors be.
func TestKeepNoSpace(t *testing.T) {
	flat := fmt.Errorf("file resize error: %s", &os.PathError{Op: "truncate", Path: "q.db", Err: syscall.ENOSPC})
	require.False(t, errors.Is(flat, syscall.ENOSPC))
	kept := keepNoSpace(flat)
	assert.ErrorIs(t, kept, syscall.ENOSPC)
	assert.Equal(t, flat.Error(), kept.Error())

	wrapped := &os.PathError{Op: "write", Path: "q.db", Err: syscall.ENOSPC}
	assert.Same(t, wrapped, keepNoSpace(wrapped))
	other := errors.New("file sync error: input/output error")
	assert.Same(t, other, keepNoSpace(other))
	assert.NoError(t, keepNoSpace(nil))
}

// leafyDisk is a queue on a full disk laid out as bbolt lays out large
// messages, leaves of 4: dropping part of a leaf needs room the disk does
// not have, dropping whole leaves does not, and an Append fits once 4
// messages have gone.
type leafyDisk struct {
	MemoryStore
	removed  int   // messages removed so far
	attempts []int // every removeOldest's n
}

func (d *leafyDisk) Append(m Message) error {
	if n, _ := d.Len(); n > 0 && d.removed < 4 {
		return &os.PathError{Op: "write", Path: "q.db", Err: syscall.ENOSPC}
	}
	return d.MemoryStore.Append(m)
}

func (d *leafyDisk) removeOldest(n int) ([]uint64, error) {
	d.attempts = append(d.attempts, n)
	if (d.removed+n)%4 != 0 {
		return nil, &os.PathError{Op: "write", Path: "q.db", Err: syscall.ENOSPC}
	}
	var seqs []uint64
	for range n {
		m, _, _ := d.Front()
		seqs = append(seqs, m.Seq)
		_ = d.Remove(m.Seq)
		d.removed++
	}
	return seqs, nil
}

type idleSession struct{}

func (idleSession) Publish(context.Context, string, byte, bool, []byte) error {
	return errors.New("not connected")
}
func (idleSession) AwaitConnection(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// A drop that fails for want of room is retried one message further on,
// which soon falls on the end of a leaf: the first leaf goes, nothing more.
func TestDropThatNeedsRoomMovesToTheLeafEnd(t *testing.T) {
	disk := &leafyDisk{}
	for seq := uint64(1); seq <= 12; seq++ {
		require.NoError(t, disk.MemoryStore.Append(Message{Seq: seq, Topic: "t", Payload: []byte("reading")}))
	}
	p, err := New(Config{Session: idleSession{}, Store: disk})
	require.NoError(t, err)
	defer p.Close()
	seq, err := p.Publish("t", []byte("newest"))
	require.NoError(t, err)
	assert.Equal(t, uint64(13), seq)
	assert.Equal(t, []int{1, 2, 3, 4}, disk.attempts)
	assert.Equal(t, Stats{Restored: 12, Enqueued: 1, DroppedOldest: 4, Queued: 9, QueuedBytes: 8*8 + 7}, p.Stats())
}
