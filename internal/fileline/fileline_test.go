package fileline_test

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/fileline"
)

func TestTheErrorSaysWhereAndWhat(t *testing.T) {
	for _, tc := range []struct {
		err  fileline.Error
		want string
	}{
		{fileline.Error{Line: 3, Err: io.ErrUnexpectedEOF}, "line 3: unexpected EOF"},
		{fileline.Error{Line: 3, Column: 7, Err: io.ErrUnexpectedEOF}, "line 3, column 7: unexpected EOF"},
		{fileline.Error{File: "storm.yaml", Line: 3, Err: io.ErrUnexpectedEOF}, "storm.yaml: line 3: unexpected EOF"},
	} {
		assert.EqualError(t, &tc.err, tc.want)
		assert.ErrorIs(t, &tc.err, io.ErrUnexpectedEOF)
		var e *fileline.Error
		assert.True(t, errors.As(error(&tc.err), &e) && e.Line == 3)
	}
}

func TestBlankLinesCarryNothing(t *testing.T) {
	for line, blank := range map[string]bool{"": true, " \t\r": true, "# a note": true, "  #x": true,
		"a": false, " a # not a comment": false, "1,#2": false} {
		assert.Equal(t, blank, fileline.Blank([]byte(line)), "%q", line)
	}
}
