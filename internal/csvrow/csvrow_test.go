package csvrow

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		rec   string
		delim byte
		want  []string
	}{
		{"a,b,c", ',', []string{"a", "b", "c"}},
		{" a , b ,", ',', []string{"a", "b", ""}},
		{`"a,b",c`, ',', []string{"a,b", "c"}},
		{`"say ""hi""",1`, ',', []string{`say "hi"`, "1"}},
		{"\"two\nlines\",2", ',', []string{"two\nlines", "2"}},
		{` "spaced" ,x`, ',', []string{"spaced", "x"}},
		{`5" screen,x`, ',', []string{`5" screen`, "x"}},
		{`"a"b,c`, ',', []string{"ab", "c"}},
		{`"open,c`, ',', []string{"open,c"}},
		{"a\t\"b\tc\"\td", '\t', []string{"a", "b\tc", "d"}},
		{"", ',', []string{""}},
	} {
		assert.Equal(t, tc.want, Split(tc.rec, tc.delim, nil), "%q", tc.rec)
	}
}

func TestQuoteOpen(t *testing.T) {
	for _, tc := range []struct {
		line       string
		open, want bool
	}{
		{`a,"b`, false, true},
		{`a,"b""`, false, true},
		{`a,"b"""`, false, false},
		{`a,b"`, false, false},
		{` "b`, false, true},
		{`end",x`, true, false},
		{`still inside`, true, true},
		{`end","again`, true, true},
	} {
		assert.Equal(t, tc.want, QuoteOpen([]byte(tc.line), ',', tc.open), "%q from open=%v", tc.line, tc.open)
	}
}

// A Reader's records name the line they start on, a quoted field keeps
// its line ends as "\n", and the last line needs no line end.
func TestReaderNamesEachRecordsFirstLine(t *testing.T) {
	r := NewReader(strings.NewReader("h1,h2\r\na,\"two\r\nlines\"\r\n\"x\"\"\",y\nlast,row"), ',', 64)
	type row struct {
		line   int
		fields []string
	}
	var got []row
	for {
		f, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, row{r.Line(), append([]string(nil), f...)})
	}
	assert.Equal(t, []row{
		{1, []string{"h1", "h2"}},
		{2, []string{"a", "two\nlines"}},
		{4, []string{`x"`, "y"}},
		{5, []string{"last", "row"}},
	}, got)
}

func TestReaderRefusesWhatItCannotHold(t *testing.T) {
	r := NewReader(strings.NewReader("a,b\n\"open,\nstill\n"), ',', 64)
	_, err := r.Read()
	require.NoError(t, err)
	_, err = r.Read()
	assert.EqualError(t, err, "line 2: a quoted field that starts on this line is never closed")

	// A record over the bound is an error, whether one line (longer than
	// the Reader's buffer) or a quoted field that never closes.
	for _, text := range []string{"ok\n" + strings.Repeat("x", 1<<17) + "\n", "ok\n\"" + strings.Repeat("y\n", 1<<16)} {
		r := NewReader(strings.NewReader(text), ',', 1000)
		_, err := r.Read()
		require.NoError(t, err)
		_, err = r.Read()
		require.ErrorIs(t, err, ErrTooLong)
		assert.ErrorContains(t, err, "line 2: a record too long: over 1000 bytes")
	}
}

// A line longer than the Reader's buffer, within its bound, reads whole.
func TestReaderReadsALineLongerThanItsBuffer(t *testing.T) {
	long := strings.Repeat("x", 200_000)
	r := NewReader(strings.NewReader("a,"+long+"\r\nb,c\n"), ',', 1<<20)
	f, err := r.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{"a", long}, f)
	f, err = r.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, f)
	assert.Equal(t, 2, r.Line())
	_, err = r.Read()
	assert.ErrorIs(t, err, io.EOF)
}

// Blank lines and # comments between records are no records, as the
// judge's log reader skips them; within a quoted field they are its text.
// A byte-order mark before the first line is no part of it.
func TestReaderSkipsBlankLinesAndComments(t *testing.T) {
	r := NewReader(strings.NewReader("\xef\xbb\xbfh1,h2\n\n  \r\n# a note\n\"a\n\n# kept\",b\n\n"), ',', 64)
	f, err := r.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{"h1", "h2"}, f)
	f, err = r.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{"a\n\n# kept", "b"}, f)
	assert.Equal(t, 5, r.Line())
	_, err = r.Read()
	assert.ErrorIs(t, err, io.EOF)
}

// After an error the Reader reads no further: the rest of a line too long
// is not a record of its own.
func TestReaderStopsAtItsFirstError(t *testing.T) {
	r := NewReader(strings.NewReader(strings.Repeat("x", 100)+",y\nnext,row\n"), ',', 50)
	_, err := r.Read()
	require.ErrorIs(t, err, ErrTooLong)
	_, again := r.Read()
	assert.Equal(t, err, again)
}

// A record that spans lines reads whole when its lines straddle the
// Reader's buffer as it refills, after a record of one line (whose bytes
// the buffer reuses).
func TestARecordAcrossTheBuffersRefillReadsWhole(t *testing.T) {
	text := strings.Repeat("a", 1<<16-30) + "\n" + "prev,rec\n" + "q,\"first\n" +
		"second line, long enough to cross\"\n" + strings.Repeat("z,z\n", 40_000)
	r := NewReader(strings.NewReader(text), ',', 1<<17)
	var got [][]string
	for range 3 {
		f, err := r.Read()
		require.NoError(t, err)
		got = append(got, slices.Clone(f))
	}
	assert.Equal(t, [][]string{{strings.Repeat("a", 1<<16-30)}, {"prev", "rec"}, {"q", "first\nsecond line, long enough to cross"}}, got)
}

// The bound is on a line's or a record's bytes, line ends aside, whatever
// the size of the Reader's buffer (64 KiB): a line of exactly the bound
// reads, with "\n" or "\r\n", and one byte more is refused, a comment's too.
func TestTheBoundIsOneRuleForEveryLine(t *testing.T) {
	for _, max := range []int{1000, 1<<16 - 1, 1 << 16, 1<<17 - 1} {
		for _, end := range []string{"\n", "\r\n"} {
			f, err := NewReader(strings.NewReader(strings.Repeat("x", max)+end), ',', max).Read()
			require.NoError(t, err, "max %d, %q", max, end)
			assert.Len(t, f[0], max)
			_, err = NewReader(strings.NewReader(strings.Repeat("x", max+1)+end), ',', max).Read()
			assert.ErrorIs(t, err, ErrTooLong, "max %d, %q", max, end)
			r := NewReader(strings.NewReader("h\n# "+strings.Repeat("c", max)+end+"row\n"), ',', max)
			_, err = r.Read()
			require.NoError(t, err, "the header")
			_, err = r.Read()
			assert.ErrorContains(t, err, "line 2: a record too long", "max %d, %q: a comment over the bound", max, end)
		}
	}
}
