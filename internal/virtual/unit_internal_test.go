package virtual

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// A device of the model is one cache line on 64-bit platforms: an event
// waits for memory once.
func TestAUnitIsACacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		assert.Equal(t, uintptr(64), unsafe.Sizeof(unit{}))
	}
}
