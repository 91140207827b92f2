package hugepage_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/hugepage"
)

// Make is make, whatever the kernel does with the advice: the slice has
// its length, zeroed, small or large.
func TestMakeIsMake(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 1 << 20} {
		s := hugepage.Make[uint64](n)
		assert.Len(t, s, n)
		for i := range s {
			if s[i] != 0 {
				t.Fatalf("element %d of %d is %d", i, n, s[i])
			}
		}
	}
}
