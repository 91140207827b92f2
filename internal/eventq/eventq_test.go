package eventq_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/eventq"
)

// Every pop returns the earliest event waiting, by Before, whatever the
// order of pushes: checked against a plain list over interleaved pushes and
// pops with many ties (as at a disruption), at many seeds. The delays reach
// from nothing (the bucket being read) through the ring's buckets to hours
// past it (the eras beyond it, and jumps over an idle ring), some at an
// era's first instant or either side of it, and an event may be due
// before the one just popped.
func TestPopReturnsTheEarliestWaiting(t *testing.T) {
	t.Run("queue", func(t *testing.T) { popsTheEarliestWaiting(t, func() queue { return new(eventq.Queue) }) })
	t.Run("heap", func(t *testing.T) { popsTheEarliestWaiting(t, func() queue { return new(eventq.Heap) }) })
}

// A queue that sorts crowded buckets ahead pops what a heap pops, while
// the driver pushes into the bucket being sorted, the ones before and
// after it and the one being read, or pushes nothing: a storm's buckets
// of thousands, every other one empty, at many seeds.
func TestSortingAheadPopsAsAHeap(t *testing.T) {
	const span = 1 << 24 // a bucket's width
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 11))
		q, h := &eventq.Queue{SortAhead: true}, new(eventq.Heap)
		push := func(e eventq.Event) { q.Push(e); h.Push(e) }
		// crowded buckets 1, 3, 5 and 7: each after the first is sorted ahead
		// while the one before is read
		for range 40_000 {
			at := span * time.Duration(1+2*rng.IntN(4))
			push(eventq.Event{At: at + time.Duration(rng.IntN(span)), Key: rng.Uint32() & 0xFFFF0003, Dev: rng.Int32N(1000)})
		}
		pushing := rng.IntN(2) == 0 // or only pop
		for pops := 0; h.Len() > 0; pops++ {
			want := h.Pop()
			require.Equal(t, want, q.Pop(), "seed %d, pop %d", seed, pops)
			if pushing && rng.IntN(8) == 0 && pops < 25_000 {
				push(eventq.Event{At: want.At + time.Duration(rng.IntN(4*span)), Key: rng.Uint32N(4), Dev: rng.Int32N(1000)})
			}
		}
		require.Zero(t, q.Len())
		require.GreaterOrEqual(t, eventq.SortedAhead(q), 3, "seed %d", seed)
	}
}

// Events beyond the ring wait in eras and enter it before they are due: a
// fleet booting over twenty minutes, a quarter of its events at an era's
// first instant or either side of it, and retries pushed as it pops, up
// to two eras ahead, pops what a heap pops, at many seeds.
func TestErasPopAsAHeap(t *testing.T) {
	const era = 1 << 35 // half the ring's length
	near := func(rng *rand.Rand, at time.Duration) time.Duration {
		if rng.IntN(4) == 0 {
			// an era's first instant, or either side
			return at&^(era-1) + time.Duration(rng.IntN(3)-1)
		}
		return at
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 13))
		q, h := new(eventq.Queue), new(eventq.Heap)
		push := func(e eventq.Event) { q.Push(e); h.Push(e) }
		for range 20_000 {
			push(eventq.Event{At: max(near(rng, time.Duration(rng.Int64N(40*era))), 0), Key: rng.Uint32N(4), Dev: rng.Int32N(1000)})
		}
		for pops := 0; h.Len() > 0; pops++ {
			want := h.Pop()
			require.Equal(t, want, q.Pop(), "seed %d, pop %d", seed, pops)
			if rng.IntN(4) == 0 && pops < 30_000 {
				at := max(near(rng, want.At+time.Duration(rng.Int64N(4*era))), want.At)
				push(eventq.Event{At: at, Key: rng.Uint32N(4), Dev: rng.Int32N(1000)})
			}
		}
		require.Zero(t, q.Len())
	}
}

type queue interface {
	Push(eventq.Event)
	Pop() eventq.Event
	Peek() eventq.Event
	Len() int
}

func popsTheEarliestWaiting(t *testing.T, newQueue func() queue) {
	const era = 1 << 35 // half the ring's length
	delays := []time.Duration{0, time.Microsecond, time.Millisecond, time.Second, 30 * time.Second, 69 * time.Second, 2 * era, time.Hour}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		q := newQueue()
		var waiting []eventq.Event
		now := time.Duration(0)
		for range 3000 {
			if rng.IntN(500) == 0 { // the driver empties the queue, then waits
				for q.Len() > 0 {
					now = q.Pop().At
				}
				waiting = waiting[:0]
				now += delays[rng.IntN(len(delays))] * time.Duration(1+rng.IntN(3))
			}
			if len(waiting) > 0 && rng.IntN(3) == 0 {
				i := slices.IndexFunc(waiting, func(e eventq.Event) bool {
					return !slices.ContainsFunc(waiting, func(f eventq.Event) bool { return f.Before(e) })
				})
				require.Equal(t, waiting[i], q.Peek(), "seed %d", seed)
				got := q.Pop()
				require.Equal(t, waiting[i], got, "seed %d", seed)
				waiting = slices.Delete(waiting, i, i+1)
				now = got.At
				continue
			}
			d := delays[rng.IntN(len(delays))]
			at := now + time.Duration(rng.Int64N(int64(d)+1))
			switch rng.IntN(50) {
			case 0:
				at = now - time.Duration(rng.IntN(1000)) // before the last popped
			case 1:
				// an era's first instant, or either side
				at = max(at&^(era-1)+time.Duration(rng.IntN(3)-1), now)
			}
			e := eventq.Event{At: at, Key: rng.Uint32N(4), Dev: rng.Int32N(100)}
			q.Push(e)
			waiting = append(waiting, e)
			require.Equal(t, len(waiting), q.Len())
		}
	}
}

func TestTiesBreakByKeyThenDevice(t *testing.T) {
	var q eventq.Queue
	for _, e := range []eventq.Event{{At: 2, Key: 1, Dev: 5}, {At: 1, Key: 9, Dev: 1}, {At: 2, Key: 1, Dev: 3}, {At: 2, Key: 0, Dev: 9}} {
		q.Push(e)
	}
	assert.Equal(t, eventq.Event{At: 1, Key: 9, Dev: 1}, q.Peek())
	var devs []int32
	for q.Len() > 0 {
		devs = append(devs, q.Pop().Dev)
	}
	assert.Equal(t, []int32{1, 9, 3, 5}, devs)
}

// A disruption puts a whole fleet's retries in a few buckets: a bucket of
// 5,000 events, many alike in time and in their Key's top bits, pops in
// order; so do the tens to hundreds of thousands a fleet puts in a
// bucket, spread over it or over a few microseconds, some crowding one
// instant, or all of them at two (a fleet without jitter).
func TestACrowdedBucketPopsInOrder(t *testing.T) {
	for _, tc := range []struct{ events, within int }{{5000, 1000}, {20_000, 1 << 24}, {63, 1 << 24}, {64, 1 << 24}, {300, 1 << 24}, {3000, 1 << 24},
		{200_000, 1 << 24}, {100_000, 1 << 12}, {50_000, 1}} {
		crowdedBucketPopsInOrder(t, tc.events, tc.within)
	}
}

func crowdedBucketPopsInOrder(t *testing.T, events, within int) {
	rng := rand.New(rand.NewPCG(3, 3))
	var q eventq.Queue
	var want []eventq.Event
	for i := range events {
		at := time.Duration(1<<32) + time.Duration(rng.IntN(within))
		if i%4 == 0 {
			at = 1<<32 + 777 // the same instant
		}
		e := eventq.Event{At: at, Key: rng.Uint32() & 0xFFFF0003, Dev: int32(i % 3000)}
		q.Push(e)
		want = append(want, e)
	}
	slices.SortFunc(want, func(a, b eventq.Event) int {
		if a.Before(b) {
			return -1
		}
		return 1
	})
	for i := range want {
		require.Equal(t, want[i], q.Pop(), "pop %d", i)
	}
}

// A hundred million devices' wave puts about 1.7 million events in each
// bucket it crosses; a million devices' storm, hundreds: the cost of a
// pop, push included, with each bucket's sort.
func BenchmarkCrowdedBucket(b *testing.B) {
	for _, n := range []int{500, 1_700_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			events := make([]eventq.Event, n)
			for i := range events {
				events[i] = eventq.Event{At: time.Duration(rng.Int64N(1 << 24)), Key: rng.Uint32(), Dev: int32(i)}
			}
			var q eventq.Queue
			b.ResetTimer()
			for round := range b.N {
				for _, e := range events {
					// a bucket ahead of the one just read (2^30 ns: 64 buckets)
					e.At += time.Duration(round+1) << 30
					q.Push(e)
				}
				for q.Len() > 0 {
					q.Pop()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}
