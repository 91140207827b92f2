package observer

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// seqSet agrees with a plain set over any order of insertion, and keeps one
// interval once every number up to the highest has arrived.
func TestSeqSetMatchesAPlainSet(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var s seqSet
		plain := map[uint64]bool{}
		for range 2000 {
			seq := uint64(1 + r.IntN(500))
			assert.Equal(t, !plain[seq], s.add(seq), "seed %d seq %d", seed, seq)
			plain[seq] = true
			for i := 1; i < len(s.iv); i++ {
				assert.Less(t, s.iv[i-1][1]+1, s.iv[i][0], "seed %d: intervals sorted, disjoint, not adjacent", seed)
			}
		}
		for seq := uint64(1); seq <= 500; seq++ {
			s.add(seq)
		}
		assert.Equal(t, [][2]uint64{{1, 500}}, s.iv, "seed %d", seed)
	}
}
