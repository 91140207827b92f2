package arrivallog

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseCSVRecords(t *testing.T) {
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
		assert.Equal(t, tc.want, splitRecord(tc.rec, tc.delim, nil), "%q", tc.rec)
	}
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
		assert.Equal(t, tc.want, csvQuoteOpen([]byte(tc.line), ',', tc.open), "%q from open=%v", tc.line, tc.open)
	}
}
