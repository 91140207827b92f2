package publisher_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/publisher"
)

var stores = map[string]func(t *testing.T) publisher.Store{
	"memory": func(t *testing.T) publisher.Store { return &publisher.MemoryStore{} },
	"bolt": func(t *testing.T) publisher.Store {
		s, err := publisher.OpenBoltStore(filepath.Join(t.TempDir(), "q.db"), publisher.BoltOptions{})
		require.NoError(t, err)
		return s
	},
	"bolt-nosync": func(t *testing.T) publisher.Store {
		s, err := publisher.OpenBoltStore(filepath.Join(t.TempDir(), "q.db"), publisher.BoltOptions{NoSync: true})
		require.NoError(t, err)
		return s
	},
}

func TestStoreContract(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			_, ok, err := s.Front()
			require.NoError(t, err)
			assert.False(t, ok)
			now := time.Unix(1_700_000_000, 123)
			for i := uint64(1); i <= 5; i++ {
				require.NoError(t, s.Append(publisher.Message{Seq: i, Topic: "t/1", Payload: []byte{byte(i)}, Time: now}))
			}
			n, b := s.Len()
			assert.Equal(t, 5, n)
			assert.Equal(t, int64(5*4), b)
			m, ok, err := s.Front()
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, uint64(1), m.Seq)
			assert.Equal(t, "t/1", m.Topic)
			assert.True(t, now.Equal(m.Time))
			require.NoError(t, s.Remove(3)) // from the middle (dropped while another was in flight)
			require.NoError(t, s.Remove(1))
			require.NoError(t, s.Remove(99)) // not there: no error
			m, _, _ = s.Front()
			assert.Equal(t, uint64(2), m.Seq)
			n, _ = s.Len()
			assert.Equal(t, 3, n)
			assert.Equal(t, uint64(5), s.LastSeq())
		})
	}
}

func TestBoltStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{})
	require.NoError(t, err)
	for i := uint64(1); i <= 3; i++ {
		require.NoError(t, s.Append(publisher.Message{Seq: i, Topic: "t", Payload: []byte("x")}))
	}
	require.NoError(t, s.Remove(1))
	require.NoError(t, s.Remove(2))
	require.NoError(t, s.Remove(3))
	require.NoError(t, s.Close())
	s, err = publisher.OpenBoltStore(path, publisher.BoltOptions{})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, uint64(3), s.LastSeq(), "sequence numbers are never reused, even with the queue empty")
}

func TestCorruptStoreIsMovedAsideNotDeleted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	garbage := []byte(strings.Repeat("not a bolt file ", 1000))
	require.NoError(t, os.WriteFile(path, garbage, 0o600))
	s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{})
	var ce *publisher.CorruptStoreError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, s, "the store is usable after a recovery")
	defer s.Close()
	assert.Contains(t, err.Error(), "moved aside")
	kept, rerr := os.ReadFile(ce.MovedTo)
	require.NoError(t, rerr)
	assert.Equal(t, garbage, kept, "the old file is kept byte for byte")
	n, _ := s.Len()
	assert.Zero(t, n)
	require.NoError(t, s.Append(publisher.Message{Seq: 1, Topic: "t"}))

	// A path that cannot be a store at all (a directory) is a plain error.
	_, err = publisher.OpenBoltStore(dir, publisher.BoltOptions{})
	require.Error(t, err)
	assert.False(t, errors.As(err, &ce))
}

// neverConnected is a session that is never up: Publish must not care.
type neverConnected struct{}

func (neverConnected) Publish(context.Context, string, byte, bool, []byte) error {
	return errors.New("not connected")
}
func (neverConnected) AwaitConnection(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

func TestFullQueueDropOldestCountsExactly(t *testing.T) {
	p, err := publisher.New(publisher.Config{Session: neverConnected{}, MaxMessages: 10})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 25; i++ {
		seq, err := p.Publish("t", []byte("x"))
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), seq)
	}
	s := p.Stats()
	assert.Equal(t, uint64(25), s.Enqueued)
	assert.Equal(t, uint64(15), s.DroppedOldest)
	assert.Equal(t, 10, s.Queued)
	assert.Zero(t, s.Rejected)
}

func TestFullQueueByBytes(t *testing.T) {
	p, err := publisher.New(publisher.Config{Session: neverConnected{}, MaxBytes: 100})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 10; i++ {
		_, err := p.Publish("tt", make([]byte, 18)) // 20 bytes each
		require.NoError(t, err)
	}
	s := p.Stats()
	assert.Equal(t, 5, s.Queued)
	assert.Equal(t, int64(100), s.QueuedBytes)
	assert.Equal(t, uint64(5), s.DroppedOldest)
}

func TestFullQueueRejectNewCountsExactly(t *testing.T) {
	p, err := publisher.New(publisher.Config{Session: neverConnected{}, MaxMessages: 10, Overflow: publisher.RejectNew})
	require.NoError(t, err)
	defer p.Close()
	rejected := 0
	for i := 0; i < 25; i++ {
		if _, err := p.Publish("t", []byte("x")); errors.Is(err, publisher.ErrQueueFull) {
			rejected++
		} else {
			require.NoError(t, err)
		}
	}
	s := p.Stats()
	assert.Equal(t, 15, rejected)
	assert.Equal(t, uint64(15), s.Rejected)
	assert.Equal(t, uint64(10), s.Enqueued)
	assert.Zero(t, s.DroppedOldest)
}

func TestBadInputIsAClearError(t *testing.T) {
	p, err := publisher.New(publisher.Config{Session: neverConnected{}, MaxPayload: 8})
	require.NoError(t, err)
	defer p.Close()
	for name, c := range map[string]struct {
		topic   string
		payload []byte
		want    string
	}{
		"empty topic":   {"", nil, "empty topic"},
		"plus wildcard": {"a/+/b", nil, "wildcard"},
		"hash wildcard": {"a/#", nil, "wildcard"},
		"NUL":           {"a\x00b", nil, "NUL"},
		"too large":     {"t", make([]byte, 9), "over the 8-byte maximum"},
	} {
		_, err := p.Publish(c.topic, c.payload)
		assert.ErrorIs(t, err, publisher.ErrInvalid, name)
		assert.ErrorContains(t, err, c.want, name)
	}
	assert.Zero(t, p.Stats().Enqueued)

	_, err = publisher.New(publisher.Config{})
	assert.Error(t, err)
	_, err = publisher.New(publisher.Config{Session: neverConnected{}, MaxMessages: -1})
	assert.Error(t, err)
	_, err = publisher.New(publisher.Config{Session: neverConnected{}, Overflow: 7})
	assert.Error(t, err)
}

func TestEnvelopeRoundTrip(t *testing.T) {
	b, err := publisher.Envelope{Seq: 42, Time: time.Unix(1, 0).UTC(), Payload: []byte{0, 1, 2}}.Marshal()
	require.NoError(t, err)
	e, err := publisher.DecodeEnvelope(b)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), e.Seq)
	assert.Equal(t, []byte{0, 1, 2}, e.Payload)
	_, err = publisher.DecodeEnvelope([]byte(`{"payload":"AA=="}`))
	assert.Error(t, err)
}

// Every invalid input to the package is an error wrapping ErrInvalid: a
// Config, BoltOptions, as a message is.
func TestInvalidConfigIsErrInvalid(t *testing.T) {
	for name, c := range map[string]publisher.Config{
		"no session":       {},
		"negative limits":  {Session: neverConnected{}, MaxMessages: -1},
		"unknown overflow": {Session: neverConnected{}, Overflow: 9},
	} {
		_, err := publisher.New(c)
		assert.ErrorIs(t, err, publisher.ErrInvalid, name)
	}
	_, err := publisher.OpenBoltStore(filepath.Join(t.TempDir(), "queue.db"), publisher.BoltOptions{LockTimeout: -time.Second})
	assert.ErrorIs(t, err, publisher.ErrInvalid)
}
