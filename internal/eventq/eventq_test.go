package eventq_test

import (
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
// pops with many ties (as at a disruption), at many seeds.
func TestPopReturnsTheEarliestWaiting(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var q eventq.Queue
		var waiting []eventq.Event
		now := time.Duration(0)
		for range 3000 {
			if len(waiting) > 0 && rng.IntN(3) == 0 {
				i := slices.IndexFunc(waiting, func(e eventq.Event) bool {
					return !slices.ContainsFunc(waiting, func(f eventq.Event) bool { return f.Before(e) })
				})
				got := q.Pop()
				require.Equal(t, waiting[i], got, "seed %d", seed)
				waiting = slices.Delete(waiting, i, i+1)
				now = got.At // the engine never schedules into the past
				continue
			}
			e := eventq.Event{At: now + time.Duration(rng.IntN(8))*time.Second, Key: rng.Uint32N(4), Dev: rng.Int32N(100)}
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
