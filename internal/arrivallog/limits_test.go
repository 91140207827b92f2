package arrivallog

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog/jsonevent"
	"github.com/herdguard/herdguard/internal/fileline"
)

// A JSON document nested past jsonevent.MaxDepth is refused at the level past
// it, naming its line and the limit, however deep it goes: the walk
// recurses a level at a time, and a document of a million levels, one a
// line, overflowed its stack. One that holds no object says so.
func TestADeepJSONDocumentIsRefusedAtItsLimit(t *testing.T) {
	deep := strings.Repeat("[\n", 1_000_000) // 2 MB
	_, err := ParseLog(strings.NewReader(deep), Options{})
	var at *fileline.Error
	require.ErrorAs(t, err, &at)
	assert.Equal(t, jsonevent.MaxDepth+1, at.Line)
	assert.ErrorContains(t, err, "the JSON document nests deeper than 64 arrays and objects")

	_, err = ParseLog(strings.NewReader("[\n[\n]\n]\n"), Options{})
	assert.EqualError(t, err, "no arrivals: 4 lines, a JSON document with no object in it")

	events := `{"records": [` + "\n" + `{"time": "2024-01-02T03:04:05Z", "operationName": "deviceConnect", "properties": {"deviceId": "d1"}}` + "\n]}\n"
	l, err := ParseLog(strings.NewReader(events), Options{})
	require.NoError(t, err)
	assert.Equal(t, []int32{2}, l.Lines)
}

// What a JSON document holds in memory is bounded: a value or an event's
// fields to MaxLineBytes, as a line is.
func TestAJSONDocumentIsHeldAValueAtATime(t *testing.T) {
	// Past the lines detection reads (8 MiB), a document is read as bytes,
	// not lines.
	big := strings.Repeat("a", MaxLineBytes/3)
	sample := "[\n" + `{"ts": 1, "pad": "` + big + big + `"},` + "\n"
	for want, doc := range map[string]string{
		"line 3: a JSON value longer than 16 MiB": `{"ts": 2, "x": "` + strings.Repeat(big, 5) + `"}]`,
		"line 6: an object's fields longer than 16 MiB": `{"ts": 2,` + "\n" + `"x": "` + big + `",` + "\n" + `"y": "` + big + `",` + "\n" +
			`"z": "` + big + `"}]`,
	} {
		_, err := ParseLog(strings.NewReader(sample+doc), Options{})
		assert.ErrorIs(t, err, ErrLineTooLong, want)
		assert.EqualError(t, err, want)
	}

}

// A log keeps something of its connects and other events alone, and no
// more of them than its cap: the line past it is refused, naming the line
// and the cap, in every format. Lines of other kinds are counted, and a
// log's own names for them are kept to maxLabels.
func TestALogPastItsEventsCapIsRefused(t *testing.T) {
	const max = 100
	lines := func(format func(i int) string) string {
		var b strings.Builder
		for i := range max + 1 {
			b.WriteString(format(i) + "\n")
		}
		return b.String()
	}
	for name, tc := range map[string]struct {
		log  string
		o    Options
		line int
	}{
		"seconds": {lines(func(i int) string { return fmt.Sprint(i) }), Options{}, max + 1},
		"csv":     {"t_s,client_id\n" + lines(func(i int) string { return fmt.Sprintf("%d,dev-%d", i, i) }), Options{}, max + 2},
		"mosquitto": {lines(func(i int) string {
			return fmt.Sprintf("%d: New client connected from 10.0.0.1:%d as dev-%d (p2, c1, k60).", 1700000000+i, 30000+i, i)
		}), Options{}, max + 1},
		"disconnects": {lines(func(i int) string {
			return fmt.Sprintf(`{"ts": %d, "client_id": "dev-%d", "event": "disconnected"}`, 1700000000000+i, i)
		}), Options{}, max + 1},
		"pattern": {lines(func(i int) string { return fmt.Sprintf("%d gw accepted dev-%d", 1700000000+i, i) }),
			Options{Pattern: `^(?P<time>\d+) gw accepted (?P<client>\S+)`}, max + 1},
	} {
		tc.o.maxEvents = max
		_, err := ParseLog(strings.NewReader(tc.log), tc.o)
		require.ErrorIs(t, err, ErrTooManyEvents, name)
		assert.ErrorContains(t, err, "too many events: more than 100 connects", name)
		var at *fileline.Error
		require.True(t, errors.As(err, &at), name)
		assert.Equal(t, tc.line, at.Line, name)
	}

	var b strings.Builder
	for i := range 2 * maxLabels {
		fmt.Fprintf(&b, `{"ts": %d, "event": "kind-%d"}`+"\n", 1700000000000+i, i)
	}
	b.WriteString(`{"ts": 1700000009999, "event": "connected"}` + "\n")
	l, err := ParseLog(strings.NewReader(b.String()), Options{maxEvents: 1})
	require.NoError(t, err, "lines of other kinds are not events")
	assert.Len(t, l.Labels, maxLabels+1)
	assert.Equal(t, maxLabels, l.Labels["other"])
}

// What a Log keeps of a line (an event's label) is a copy, not a slice of
// the line: 40 rows of a MiB each, each naming an event of its own beside
// 40 connects, leave the Log's labels, not 40 MiB, live after a collection.
func TestALogKeepsNoLineAliveThroughItsLabels(t *testing.T) {
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := live()
	var b strings.Builder
	b.WriteString("t_s,client_id,event,pad\n")
	pad := strings.Repeat("p", 1<<20)
	for i := range 40 {
		fmt.Fprintf(&b, "%d,dev-%d,connect,\n%d.5,dev-%d,event-%d,%s\n", i, i, i, i, i, pad)
	}
	l, err := ParseLog(strings.NewReader(b.String()), Options{})
	require.NoError(t, err)
	require.Len(t, l.Labels, 40)
	b.Reset()
	after := live()
	runtime.KeepAlive(l)
	assert.Less(t, int64(after)-int64(before), int64(8<<20), "the labels hold their rows")
}
