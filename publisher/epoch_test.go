package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/testbroker"
)

// receiver follows the rule docs/publisher.md states: per device and epoch, keep the
// highest seq seen and drop a message at or below it.
type receiver struct {
	highest  map[string]uint64 // device + "/" + epoch -> highest seq
	accepted []string          // payloads, in order
	dropped  int
}

func (r *receiver) take(device string, payload []byte) error {
	e, err := publisher.DecodeEnvelope(payload)
	if err != nil {
		return err
	}
	key := device + "/" + e.Epoch
	if e.Seq <= r.highest[key] {
		r.dropped++
		return nil
	}
	r.highest[key] = e.Seq
	r.accepted = append(r.accepted, string(e.Payload))
	return nil
}

// boot is one life of a device: an agent and a publisher on store, which
// publishes the payloads and delivers them all before shutting down.
func boot(t *testing.T, b *testbroker.Broker, store publisher.Store, payloads ...string) (epoch string, seqs []uint64) {
	t.Helper()
	agent := fastAgent(t, b, make(chan device.Event, 1))
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, agent.Start(ctx))
	pub, err := publisher.New(publisher.Config{Session: agent, Store: store, DrainRate: 1000, DrainBurst: 100})
	require.NoError(t, err)
	runDone := make(chan error, 1)
	go func() { runDone <- pub.Run(ctx) }()
	for _, p := range payloads {
		seq, err := pub.Publish("telemetry/dev-1", []byte(p))
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	flush(t, pub)
	cancel()
	require.ErrorIs(t, <-runDone, context.Canceled)
	stop, done := context.WithTimeout(context.Background(), bound)
	defer done()
	require.NoError(t, agent.Stop(stop))
	epoch = pub.Epoch()
	require.NoError(t, pub.Close())
	return epoch, seqs
}

// TestReceiverNeverDropsNewDataWhenTheSequenceRestarts plays the ways a
// device's sequence starts again from 1 through a receiver that follows the
// rule of docs/publisher.md: a reboot without a durable store, a store moved aside, a
// factory reset, and a NoSync store rolled back by a power cut. Each time
// the new messages reuse sequence numbers the receiver has seen, and each
// time it keeps them all, while it still drops every duplicate.
func TestReceiverNeverDropsNewDataWhenTheSequenceRestarts(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "queue.db")
	openDB := func(opts publisher.BoltOptions) publisher.Store {
		s, err := publisher.OpenBoltStore(db, opts)
		var ce *publisher.CorruptStoreError
		if errors.As(err, &ce) {
			t.Logf("%v", err)
			return s
		}
		require.NoError(t, err)
		return s
	}
	var want []string
	lives := []struct {
		name  string
		store func() publisher.Store
	}{
		{"first boot, memory", func() publisher.Store { return &publisher.MemoryStore{} }},
		{"reboot, memory", func() publisher.Store { return &publisher.MemoryStore{} }},
		{"durable store", func() publisher.Store { return openDB(publisher.BoltOptions{}) }},
		{"durable store moved aside", func() publisher.Store {
			img, err := os.ReadFile(db)
			require.NoError(t, err)
			clear(img[2*damagePage:]) // all but the meta pages
			require.NoError(t, os.WriteFile(db, img, 0o600))
			s, err := publisher.OpenBoltStore(db, publisher.BoltOptions{})
			var ce *publisher.CorruptStoreError
			require.ErrorAs(t, err, &ce)
			require.NotEmpty(t, ce.MovedTo)
			return s
		}},
		{"factory reset", func() publisher.Store {
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
			}
			return openDB(publisher.BoltOptions{})
		}},
	}
	seenSeqs := map[uint64]bool{}
	epochs := map[string]bool{}
	for i, life := range lives {
		payloads := []string{fmt.Sprintf("life %d a", i), fmt.Sprintf("life %d b", i), fmt.Sprintf("life %d c", i)}
		epoch, seqs := boot(t, b, life.store(), payloads...)
		want = append(want, payloads...)
		if i > 0 {
			require.True(t, seenSeqs[seqs[0]], "%s: the sequence restarted, so the seq alone would drop new data", life.name)
		}
		for _, s := range seqs {
			seenSeqs[s] = true
		}
		epochs[epoch] = true
	}
	require.Len(t, epochs, len(lives), "every restart of the sequence has a new epoch")

	// A power cut under NoSync can roll a store back: the copy taken after
	// two messages is what the disk holds when the next boot finds it.
	s := openDB(publisher.BoltOptions{NoSync: true})
	epochBefore := s.Epoch()
	img, lostSeq := snapshotAfter(t, b, s, db, "nosync 1", "nosync 2")
	epochAfter, seqs := boot(t, b, openDBAfterPowerCut(t, db, img), "nosync 3 (reuses the lost seq)")
	require.Equal(t, []uint64{lostSeq}, seqs, "the power cut rolled the sequence back")
	require.NotEqual(t, epochBefore, epochAfter, "a NoSync store found dirty starts a new epoch")
	// The lost message did reach the broker, under the old epoch: kept too.
	want = append(want, "nosync 1", "nosync 2", "nosync lost to the power cut", "nosync 3 (reuses the lost seq)")

	r := &receiver{highest: map[string]uint64{}}
	pubs := b.Recorder().Publishes()
	for _, p := range append(pubs, pubs...) { // every message twice: duplicates must go
		require.NoError(t, r.take(p.ClientID, p.Payload))
	}
	require.Equal(t, want, r.accepted, "nothing new dropped, every duplicate dropped")
	require.GreaterOrEqual(t, r.dropped, len(pubs))
}

func flush(t *testing.T, pub *publisher.Publisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	require.NoError(t, pub.Flush(ctx))
}

// snapshotAfter delivers two messages plus a third whose record the power
// cut loses, through a NoSync store, and returns the file as it was after
// the first two.
func snapshotAfter(t *testing.T, b *testbroker.Broker, s publisher.Store, db string, first, second string) (img []byte, lostSeq uint64) {
	t.Helper()
	agent := fastAgent(t, b, make(chan device.Event, 1))
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, agent.Start(ctx))
	defer func() {
		stop, done := context.WithTimeout(context.Background(), bound)
		defer done()
		require.NoError(t, agent.Stop(stop))
	}()
	pub, err := publisher.New(publisher.Config{Session: agent, Store: s, DrainRate: 1000, DrainBurst: 100})
	require.NoError(t, err)
	runDone := make(chan error, 1)
	go func() { runDone <- pub.Run(ctx) }()
	deliver := func(payload string) uint64 {
		seq, err := pub.Publish("telemetry/dev-1", []byte(payload))
		require.NoError(t, err)
		flush(t, pub)
		return seq
	}
	deliver(first)
	deliver(second)
	img, err = os.ReadFile(db) // what a power cut would leave if nothing later reached the disk
	require.NoError(t, err)
	lostSeq = deliver("nosync lost to the power cut")
	cancel()
	require.ErrorIs(t, <-runDone, context.Canceled)
	require.NoError(t, pub.Close())
	return img, lostSeq
}

func openDBAfterPowerCut(t *testing.T, db string, img []byte) publisher.Store {
	require.NoError(t, os.WriteFile(db, img, 0o600))
	s, err := publisher.OpenBoltStore(db, publisher.BoltOptions{NoSync: true})
	require.NoError(t, err)
	return s
}
