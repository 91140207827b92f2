package jsonevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The newlines the walk has passed, which no line number asks about
// again, are let go: a document of 100,000 lines holds fewer than 1,000.
func TestTheWalkLetsGoOfTheNewlinesPassed(t *testing.T) {
	var b strings.Builder
	b.WriteString("[\n")
	for i := range 100_000 {
		fmt.Fprintf(&b, "%d,\n", i)
	}
	b.WriteString("0\n]\n")
	w := newDocWalker(strings.NewReader(b.String()), 1<<20, errors.New("too long"), func(int, map[string]json.RawMessage) error { return nil })
	lines, err := w.walk()
	require.NoError(t, err)
	assert.Equal(t, 100_003, lines)
	assert.Less(t, len(w.lc.nl), 1000, "the newlines passed are counted, not held")
}
