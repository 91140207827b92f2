// Package csvrow splits the rows of a CSV or TSV file as spreadsheets
// write them (RFC 4180, for tabs too): a field that starts with a quote
// ends at the next lone quote and may hold delimiters, "" and line ends;
// quotes within an unquoted field are kept as they are; spaces around an
// unquoted field are not part of it. events.csv's reader and the judge's
// reader of CSV logs split their rows here, so that a row means one thing
// to both.
package csvrow

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/herdguard/herdguard/internal/fileline"
)

// QuoteOpen reports whether a quoted field is still open at the end of
// line, given whether one was open at its start: if so, the record goes on
// in the next line.
func QuoteOpen(line []byte, delim byte, open bool) bool {
	start := !open // at a field's start
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case open && c == '"' && i+1 < len(line) && line[i+1] == '"':
			i++
		case open && c == '"':
			open = false
		case open:
		case c == delim:
			start = true
			continue
		case start && c == ' ':
			continue
		case start && c == '"':
			open = true
		}
		start = false
	}
	return open
}

// Split appends the fields of a record to dst: unquoted fields without the
// spaces around them, quoted fields as quoted. A quoted field never closed
// runs to the end.
func Split(rec string, delim byte, dst []string) []string {
	for {
		i := 0
		for i < len(rec) && rec[i] == ' ' {
			i++
		}
		if i < len(rec) && rec[i] == '"' {
			var b strings.Builder
			j := i + 1
			for j < len(rec) {
				k := strings.IndexByte(rec[j:], '"')
				if k < 0 {
					b.WriteString(rec[j:])
					j = len(rec)
					break
				}
				b.WriteString(rec[j : j+k])
				j += k + 1
				if j < len(rec) && rec[j] == '"' {
					b.WriteByte('"')
					j++
					continue
				}
				break
			}
			// What follows the closing quote, up to the delimiter, is kept.
			k := strings.IndexByte(rec[j:], delim)
			if k < 0 {
				k = len(rec) - j
			}
			b.WriteString(strings.TrimRight(rec[j:j+k], " "))
			dst = append(dst, b.String())
			if j+k == len(rec) {
				return dst
			}
			rec = rec[j+k+1:]
			continue
		}
		k := strings.IndexByte(rec, delim)
		if k < 0 {
			return append(dst, strings.TrimSpace(rec))
		}
		dst = append(dst, strings.TrimSpace(rec[:k]))
		rec = rec[k+1:]
	}
}

// ErrQuoteOpen is the error of a record whose quoted field is still open
// at the end of the file.
var ErrQuoteOpen = errors.New("a quoted field that starts on this line is never closed")

// Join gathers the record whose first line is first: first alone, or,
// while a quoted field is open at a line's end, it and the lines next
// gives, joined by "\n" in dst[:0]. A record over max bytes is the error
// tooLong; a field still open when next gives no more, ErrQuoteOpen. next
// may reuse the buffer of first. A record of one line is first itself:
// keep a joined record's buffer as the next dst, never first's.
func Join(dst, first []byte, delim byte, max int, tooLong error, next func() ([]byte, bool)) ([]byte, error) {
	if len(first) > max {
		return nil, tooLong
	}
	if !QuoteOpen(first, delim, false) {
		return first, nil
	}
	dst = append(dst[:0], first...)
	for open := true; open; {
		line, ok := next()
		switch {
		case !ok:
			return nil, ErrQuoteOpen
		case len(dst)+1+len(line) > max:
			return nil, tooLong
		}
		dst = append(append(dst, '\n'), line...)
		open = QuoteOpen(line, delim, true)
	}
	return dst, nil
}

// ErrTooLong is the error of a record longer than a Reader's bound.
var ErrTooLong = errors.New("record too long")

// Reader reads a file's records one at a time, each with the line it
// starts on. Blank lines and # comments between records are skipped, and
// a UTF-8 byte-order mark before the first. Its zero value is not ready:
// use NewReader. It is not safe for concurrent use.
type Reader struct {
	lines   *fileline.Lines
	delim   byte
	max     int
	tooLong error
	start   int   // the line the last record started on
	err     error // what stopped the Reader: every later Read returns it
	rec     []byte
	fields  []string
}

// NewReader reads the records of rd, split at delim. A line or a record
// longer than maxBytes (64 KiB if it is not positive), line ends aside, is
// an error that wraps ErrTooLong, a skipped line's too: a file without
// line ends cannot grow the Reader without limit.
func NewReader(rd io.Reader, delim byte, maxBytes int) *Reader {
	if maxBytes <= 0 {
		maxBytes = 1 << 16
	}
	tooLong := fmt.Errorf("a %w: over %d bytes", ErrTooLong, maxBytes)
	return &Reader{lines: fileline.NewLines(bufio.NewReaderSize(rd, 1<<16), maxBytes, tooLong), delim: delim, max: maxBytes, tooLong: tooLong}
}

// Read returns the next record's fields, valid until the next call, and
// io.EOF after the last. A line end ("\n" or "\r\n") inside a quoted field
// is kept as "\n". A record too long or never closed is an error that
// names the line it starts on; after an error every Read returns it.
func (r *Reader) Read() ([]string, error) {
	if r.err != nil {
		return nil, r.err
	}
	var first []byte
	var err error
	for {
		r.start = r.lines.N() + 1
		if first, err = r.lines.Next(); err != nil || !fileline.Blank(first) {
			break
		}
	}
	if err == nil {
		var readErr error
		var rec []byte
		rec, err = Join(r.rec, first, r.delim, r.max, r.tooLong, func() ([]byte, bool) {
			line, err := r.lines.Next()
			if err != io.EOF {
				readErr = err
			}
			return line, err == nil
		})
		if len(rec) > len(first) { // joined in r.rec's buffer, which it keeps
			r.rec = rec
		}
		if readErr != nil {
			err = readErr
		}
		first = rec
	}
	switch {
	case err == nil:
		r.fields = Split(string(first), r.delim, r.fields[:0])
		return r.fields, nil
	case err == r.tooLong || err == ErrQuoteOpen:
		err = &fileline.Error{Line: r.start, Err: err}
	}
	r.err = err
	return nil, err
}

// Line is the line the record Read last returned starts on, from 1 (after
// io.EOF, the line past the last).
func (r *Reader) Line() int { return r.start }
