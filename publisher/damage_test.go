package publisher_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/publisher"
)

const damagePage = 4096 // the OS page size here, and the store's

// storeImage builds a store of total messages, the first removed ones
// already delivered (so the file has free pages and a freelist), and
// returns its bytes and the messages still queued.
func storeImage(t testing.TB, total, removed int) ([]byte, []publisher.Message) {
	path := filepath.Join(t.TempDir(), "q.db")
	s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{NoSync: true})
	require.NoError(t, err)
	var queued []publisher.Message
	for i := 1; i <= total; i++ {
		m := publisher.Message{Seq: uint64(i), Topic: "telemetry/dev-1",
			Payload: bytes.Repeat([]byte{byte(i)}, 100+i%200), Time: time.Unix(1_700_000_000, int64(i))}
		require.NoError(t, s.Append(m))
		if i > removed {
			queued = append(queued, m)
		}
	}
	for i := 1; i <= removed; i++ {
		require.NoError(t, s.Remove(uint64(i)))
	}
	require.NoError(t, s.Close())
	img, err := os.ReadFile(path)
	require.NoError(t, err)
	return img, queued
}

// openBounded opens path in a goroutine and fails the test if that takes
// longer than a generous bound: a hang is a failure, not a stuck test.
func openBounded(t *testing.T, path string) (*publisher.BoltStore, error) {
	type result struct {
		s   *publisher.BoltStore
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{NoSync: true})
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("OpenBoltStore(%s) hung", path)
		return nil, nil
	}
}

// drain checks that s holds exactly want, in order, and that every
// operation works on it: Front and Remove through the whole queue, then an
// Append and its Front.
func drain(t *testing.T, s *publisher.BoltStore, want []publisher.Message, what string) {
	t.Helper()
	n, _ := s.Len()
	require.Equal(t, len(want), n, what)
	for _, w := range want {
		m, ok, err := s.Front()
		require.NoError(t, err, what)
		require.True(t, ok, what)
		require.Equal(t, w.Seq, m.Seq, what)
		require.Equal(t, w.Payload, m.Payload, what)
		require.NoError(t, s.Remove(m.Seq), what)
	}
	next := s.LastSeq() + 1
	require.NoError(t, s.Append(publisher.Message{Seq: next, Topic: "t", Payload: []byte("after")}), what)
	m, ok, err := s.Front()
	require.NoError(t, err, what)
	require.True(t, ok, what)
	require.Equal(t, next, m.Seq, what)
}

// touch is drain's quick form: the count, the first two messages, an Append.
func touch(t *testing.T, s *publisher.BoltStore, want []publisher.Message, what string) {
	t.Helper()
	n, _ := s.Len()
	require.Equal(t, len(want), n, what)
	for _, w := range want[:2] {
		m, ok, err := s.Front()
		require.NoError(t, err, what)
		require.True(t, ok, what)
		require.Equal(t, w.Seq, m.Seq, what)
		require.Equal(t, w.Payload, m.Payload, what)
		require.NoError(t, s.Remove(m.Seq), what)
	}
	require.NoError(t, s.Append(publisher.Message{Seq: s.LastSeq() + 1, Topic: "t", Payload: []byte("after")}), what)
}

// TestEveryPageDamagedInTurn overwrites each 4 KiB page of a real store of
// 1,500 messages in turn with zeros, with 0xff and with seeded random bytes,
// and opens every copy in this process: none may crash, hang or leak a
// goroutine. Each open ends one of the documented ways: the store intact
// (the page was free), the store kept with a new epoch (a meta page), or the
// damaged file moved aside byte for byte and an empty store in its place.
// Whatever opens must then work for Front, Remove and Append.
func TestEveryPageDamagedInTurn(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	img, queued := storeImage(t, 1500, 100)
	pages := len(img) / damagePage
	require.Greater(t, pages, 200)
	origEpoch := func() string {
		p := filepath.Join(t.TempDir(), "orig.db")
		require.NoError(t, os.WriteFile(p, img, 0o600))
		s, err := publisher.OpenBoltStore(p, publisher.BoltOptions{NoSync: true})
		require.NoError(t, err, "the undamaged store opens")
		defer s.Close()
		n, _ := s.Len()
		require.Equal(t, len(queued), n)
		return s.Epoch()
	}()

	patterns := []string{"zeros", "0xff", "random"}
	outcomes := map[string]int{}
	step := 1
	if raceDetector || runtime.GOARCH == "arm" {
		// Every fifth page under the race detector and on 32-bit ARM
		// (emulated in make test): each slows it fourfold or more, and the
		// stats step runs every page natively.
		step = 5
	}
	for page := 0; page < pages; page += step {
		for _, pattern := range patterns {
			what := fmt.Sprintf("page %d of %d, %s", page, pages, pattern)
			bad := damaged(img, page, pattern)
			dir := t.TempDir()
			path := filepath.Join(dir, "q.db")
			require.NoError(t, os.WriteFile(path, bad, 0o600))
			s, err := openBounded(t, path)
			var ce *publisher.CorruptStoreError
			switch {
			case err == nil:
				outcomes["intact"]++
				require.Equal(t, origEpoch, s.Epoch(), what)
				// the whole queue, for a sample: 1,400 transactions each
				if outcomes["intact"]%8 == 1 {
					drain(t, s, queued, what)
				} else {
					touch(t, s, queued, what)
				}
			case errors.As(err, &ce) && ce.MovedTo == "":
				outcomes["kept, new epoch"]++
				require.NotNil(t, s, what)
				require.NotEqual(t, origEpoch, s.Epoch(), what)
				drain(t, s, queued, what) // the last change was Close's marker, not the queue
			case errors.As(err, &ce):
				outcomes["moved aside"]++
				require.NotNil(t, s, what)
				kept, rerr := os.ReadFile(ce.MovedTo)
				require.NoError(t, rerr, what)
				require.True(t, bytes.Equal(bad, kept), "%s: the damaged file is kept byte for byte", what)
				require.NotEqual(t, origEpoch, s.Epoch(), what)
				require.Zero(t, s.LastSeq(), what)
				drain(t, s, nil, what)
			default:
				t.Fatalf("%s: %v", what, err)
			}
			require.NoError(t, s.Close(), what)
		}
	}
	t.Logf("%d of %d pages x %d patterns: %v", (pages+step-1)/step, pages, len(patterns), outcomes)
	require.Positive(t, outcomes["moved aside"])
	require.Positive(t, outcomes["kept, new epoch"])
}

// damaged is a copy of img with page overwritten by pattern: zeros, 0xff
// or random bytes (seeded by the page).
func damaged(img []byte, page int, pattern string) []byte {
	bad := append([]byte(nil), img...)
	p := bad[page*damagePage : (page+1)*damagePage]
	switch pattern {
	case "zeros":
		clear(p)
	case "0xff":
		for i := range p {
			p[i] = 0xff
		}
	case "random":
		r := rand.New(rand.NewPCG(11, uint64(page)))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
	}
	return bad
}

// A file cut short is damage, never a crash: moved aside, or intact if only
// the room bbolt allocated past its last page went.
func TestTruncatedStore(t *testing.T) {
	img, queued := storeImage(t, 300, 0)
	for _, n := range []int{1, 100, 4095, 4096, 8191, 8192, 3 * 4096, len(img) / 2, len(img) - 4096, len(img) - 1} {
		what := "cut at " + strconv.Itoa(n)
		path := filepath.Join(t.TempDir(), "q.db")
		require.NoError(t, os.WriteFile(path, img[:n], 0o600))
		s, err := openBounded(t, path)
		var ce *publisher.CorruptStoreError
		if err == nil {
			require.Greater(t, n, len(img)/2, what)
			drain(t, s, queued, what)
		} else {
			require.ErrorAs(t, err, &ce, what)
			require.NotEmpty(t, ce.MovedTo, what)
			drain(t, s, nil, what)
		}
		require.NoError(t, s.Close())
	}
}

// The check must never call a healthy store damaged: stores shaped by
// random appends and removals (payloads from empty to several pages, so
// inline buckets, overflow pages and long freelists all occur) reopen
// intact, with the queue a model of them predicts. 20 seeds.
func TestHealthyStoresAlwaysReopen(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 77))
		path := filepath.Join(t.TempDir(), "q.db")
		var model []publisher.Message
		var lastSeq uint64
		epoch := ""
		for round := 0; round < 6; round++ {
			s, err := publisher.OpenBoltStore(path, publisher.BoltOptions{NoSync: round%2 == 0})
			require.NoError(t, err, "seed %d round %d", seed, round)
			if epoch == "" {
				epoch = s.Epoch()
			}
			require.Equal(t, epoch, s.Epoch(), "a clean reopen keeps the epoch")
			require.Equal(t, lastSeq, s.LastSeq())
			drainN := r.IntN(len(model) + 1)
			for i := 0; i < drainN; i++ {
				m, ok, err := s.Front()
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, model[0].Seq, m.Seq)
				require.True(t, bytes.Equal(model[0].Payload, m.Payload))
				require.NoError(t, s.Remove(m.Seq))
				model = model[1:]
			}
			for i, n := 0, r.IntN(150); i < n; i++ {
				size := r.IntN(300)
				if r.IntN(20) == 0 {
					size = r.IntN(20_000) // spans pages
				}
				lastSeq++
				m := publisher.Message{Seq: lastSeq, Topic: "t/" + strconv.Itoa(r.IntN(1000)), Payload: make([]byte, size)}
				for j := range m.Payload {
					m.Payload[j] = byte(r.Uint32())
				}
				require.NoError(t, s.Append(m))
				model = append(model, m)
			}
			n, _ := s.Len()
			require.Equal(t, len(model), n)
			require.NoError(t, s.Close())
		}
	}
}
