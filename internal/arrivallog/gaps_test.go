package arrivallog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The spans a logger lost every line in are taken out of the time: a time
// after a gap moves back by its length, one within it to its start.
func TestCloseGaps(t *testing.T) {
	l := &Log{Gaps: []Gap{{From: 10, To: 15}, {From: 30, To: 40}, {From: 32, To: 35}}}
	assert.Equal(t, []time.Duration{5, 10, 10, 12, 25, 25, 30, 50}, l.closeGaps([]time.Duration{5, 10, 12, 17, 30, 36, 45, 65}))
}
