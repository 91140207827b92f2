package prefetch_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/prefetch"
)

// A prefetch is a hint: of any address, nil included, it neither faults
// nor changes what is there. (An address outside any allocation would not
// fault either, but the race detector's pointer checks refuse to make one.)
func TestLineIsOnlyAHint(t *testing.T) {
	s := []uint64{1, 2, 3}
	for i := range s {
		prefetch.Line(unsafe.Pointer(&s[i]))
	}
	prefetch.Line(nil)
	assert.Equal(t, []uint64{1, 2, 3}, s)
}
