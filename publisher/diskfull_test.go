package publisher_test

import (
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

	"github.com/herdguard/herdguard/publisher"
)

// smallDisk is a Store on a pretend disk of capacity bytes, where a message
// takes its topic and payload: an Append that does not fit fails the way a
// full disk fails under bbolt, with the kernel's ENOSPC in a *PathError.
type smallDisk struct {
	publisher.Store
	capacity int64
	appends  int // Append calls, refused ones included
}

func (d *smallDisk) Append(m publisher.Message) error {
	d.appends++
	if _, used := d.Len(); used+int64(len(m.Topic)+len(m.Payload)) > d.capacity {
		return &os.PathError{Op: "write", Path: "q.db", Err: syscall.ENOSPC}
	}
	return d.Store.Append(m)
}

// telemetry is the payload of message i: size bytes (at least 6) that
// name it.
func telemetry(i, size int) []byte {
	return []byte(fmt.Sprintf("%06d", i) + strings.Repeat("x", size-6))
}

// drainAll removes every message from s and returns them, in the order
// Front gave them.
func drainAll(t *testing.T, s publisher.Store) []publisher.Message {
	t.Helper()
	var all []publisher.Message
	for {
		m, ok, err := s.Front()
		require.NoError(t, err)
		if !ok {
			return all
		}
		all = append(all, m)
		require.NoError(t, s.Remove(m.Seq))
	}
}

// TestFullDiskDropsOldest: with the disk full (10 messages of 10 bytes on
// a 100-byte disk), a 45-byte message is accepted and the oldest go. It
// needs 5 to go; rounds of 1, 2 and 4 drop 7, in 4 attempts. A durable
// store reopens with exactly the rest. (The wrapper hides BoltStore's
// one-transaction drop: this is the one-at-a-time path, for any Store.)
func TestFullDiskDropsOldest(t *testing.T) {
	for name, open := range map[string]func(path string) (publisher.Store, error){
		"memory": func(string) (publisher.Store, error) { return &publisher.MemoryStore{}, nil },
		"bolt": func(path string) (publisher.Store, error) {
			return publisher.OpenBoltStore(path, publisher.BoltOptions{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.db")
			s, err := open(path)
			require.NoError(t, err)
			disk := &smallDisk{Store: s, capacity: 100}
			p, err := publisher.New(publisher.Config{Session: neverConnected{}, Store: disk})
			require.NoError(t, err)
			defer p.Close()
			for i := 1; i <= 10; i++ {
				_, err := p.Publish("t", telemetry(i, 9))
				require.NoError(t, err)
			}
			require.Equal(t, publisher.Stats{Enqueued: 10, Queued: 10, QueuedBytes: 100}, p.Stats())

			seq, err := p.Publish("t", telemetry(11, 44))
			require.NoError(t, err, "the newest message is accepted")
			assert.Equal(t, uint64(11), seq)
			assert.Equal(t, 14, disk.appends, "10, then 1 refused and 3 retries")
			st := p.Stats()
			assert.Equal(t, publisher.Stats{Enqueued: 11, DroppedOldest: 7, Queued: 4, QueuedBytes: 75}, st)
			assert.True(t, balanced(st), "%+v", st)
			m, ok, err := disk.Front()
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, uint64(8), m.Seq, "1 to 7 are gone")

			require.NoError(t, p.Close())
			if name == "memory" {
				return
			}
			s, err = publisher.OpenBoltStore(path, publisher.BoltOptions{})
			require.NoError(t, err)
			defer s.Close()
			left := drainAll(t, s)
			require.Len(t, left, 4)
			for i, size := range []int{9, 9, 9, 44} {
				seq := 8 + i
				assert.Equal(t, uint64(seq), left[i].Seq)
				assert.Equal(t, string(telemetry(seq, size)), string(left[i].Payload))
			}
		})
	}
}

// TestFullDiskRejectNewReturnsTheError: under RejectNew a full disk is the
// store's error, as it always was: nothing is dropped, nothing counted.
func TestFullDiskRejectNewReturnsTheError(t *testing.T) {
	disk := &smallDisk{Store: &publisher.MemoryStore{}, capacity: 100}
	p, err := publisher.New(publisher.Config{Session: neverConnected{}, Store: disk, Overflow: publisher.RejectNew})
	require.NoError(t, err)
	defer p.Close()
	for i := 1; i <= 10; i++ {
		_, err := p.Publish("t", telemetry(i, 9))
		require.NoError(t, err)
	}
	_, err = p.Publish("t", telemetry(11, 9))
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.NotErrorIs(t, err, publisher.ErrQueueFull)
	assert.Equal(t, publisher.Stats{Enqueued: 10, Queued: 10, QueuedBytes: 100}, p.Stats())
	assert.Equal(t, 11, disk.appends, "no retry")
}

// TestFullDiskEvenWhenEmpty: a message the disk cannot hold even with the
// queue empty costs the whole queue (counted) and then fails with ENOSPC;
// the sequence number it would have had is not used.
func TestFullDiskEvenWhenEmpty(t *testing.T) {
	disk := &smallDisk{Store: &publisher.MemoryStore{}, capacity: 50}
	p, err := publisher.New(publisher.Config{Session: neverConnected{}, Store: disk})
	require.NoError(t, err)
	defer p.Close()
	for i := 1; i <= 5; i++ {
		_, err := p.Publish("t", telemetry(i, 9))
		require.NoError(t, err)
	}
	_, err = p.Publish("t", telemetry(6, 59))
	require.ErrorIs(t, err, syscall.ENOSPC)
	st := p.Stats()
	assert.Equal(t, publisher.Stats{Enqueued: 5, DroppedOldest: 5}, st)
	assert.True(t, balanced(st), "%+v", st)
	assert.Equal(t, 5+4, disk.appends, "refused, then after rounds of 1, 2 and the last 2")

	seq, err := p.Publish("t", telemetry(6, 9))
	require.NoError(t, err)
	assert.Equal(t, uint64(6), seq)
}

// heldSession acknowledges each publish only when the test sends on ack.
type heldSession struct {
	started chan uint64 // the seq of each publish, as it starts
	ack     chan struct{}
}

func (s heldSession) Publish(ctx context.Context, _ string, _ byte, _ bool, payload []byte) error {
	e, err := publisher.DecodeEnvelope(payload)
	if err != nil {
		return err
	}
	select {
	case s.started <- e.Seq:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (heldSession) AwaitConnection(ctx context.Context) error { return ctx.Err() }

// TestFullDiskDropsTheMessageInFlight: the oldest message is in flight
// when a full disk drops it; its PUBACK, arriving later, does not count it
// again.
func TestFullDiskDropsTheMessageInFlight(t *testing.T) {
	session := heldSession{started: make(chan uint64), ack: make(chan struct{})}
	disk := &smallDisk{Store: &publisher.MemoryStore{}, capacity: 30}
	p, err := publisher.New(publisher.Config{Session: session, Store: disk, DrainRate: 1000, DrainBurst: 100})
	require.NoError(t, err)
	defer p.Close()
	for i := 1; i <= 3; i++ {
		_, err := p.Publish("t", telemetry(i, 9))
		require.NoError(t, err)
	}
	stop := startRun(p)
	awaitStarted := func(want uint64) {
		t.Helper()
		select {
		case seq := <-session.started:
			require.Equal(t, want, seq)
		case <-time.After(bound):
			t.Fatalf("publish of %d never started", want)
		}
	}
	awaitStarted(1)

	_, err = p.Publish("t", telemetry(4, 9))
	require.NoError(t, err)
	st := p.Stats()
	assert.Equal(t, publisher.Stats{Enqueued: 4, DroppedOldest: 1, Queued: 3, QueuedBytes: 30}, st, "1 dropped in flight")

	session.ack <- struct{}{} // 1's PUBACK
	awaitStarted(2)           // so Run has handled it
	st = p.Stats()
	assert.Equal(t, publisher.Stats{Enqueued: 4, DroppedOldest: 1, Queued: 3, QueuedBytes: 30}, st, "1 counts once, as dropped")
	session.ack <- struct{}{}
	awaitStarted(3)
	st = p.Stats()
	assert.Equal(t, publisher.Stats{Enqueued: 4, Delivered: 1, DroppedOldest: 1, Queued: 2, QueuedBytes: 20}, st)
	assert.True(t, balanced(st), "%+v", st)
	require.ErrorIs(t, stop(), context.Canceled)
}
