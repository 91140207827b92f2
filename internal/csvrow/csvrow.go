// Package csvrow splits the rows of a CSV or TSV file as spreadsheets
// write them (RFC 4180, for tabs too): a field that starts with a quote
// ends at the next lone quote and may hold delimiters, "" and line ends;
// quotes within an unquoted field are kept as they are; spaces around an
// unquoted field are not part of it. Every reader of a CSV file in the
// module splits its rows here, so that a row means one thing to all of
// them.
package csvrow

import (
	"bufio"
	"bytes"
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

// ErrTooLong is the error of a record longer than a Reader's bound.
var ErrTooLong = errors.New("record too long")

// Reader reads a file's records one at a time, each with the line it
// starts on. Its zero value is not ready: use NewReader. It is not safe
// for concurrent use.
type Reader struct {
	br     *bufio.Reader
	delim  byte
	max    int
	n      int // the last line read, from 1
	start  int // the line the last record started on
	rec    []byte
	fields []string
}

// NewReader reads the records of rd, split at delim. A record longer than
// maxBytes is an error that wraps ErrTooLong: a file without line ends
// cannot grow the Reader without limit.
func NewReader(rd io.Reader, delim byte, maxBytes int) *Reader {
	return &Reader{br: bufio.NewReaderSize(rd, 1<<16), delim: delim, max: maxBytes}
}

// Read returns the next record's fields, valid until the next call, and
// io.EOF after the last. A line end ("\n" or "\r\n") inside a quoted field
// is kept as "\n".
func (r *Reader) Read() ([]string, error) {
	r.rec = r.rec[:0]
	r.start = r.n + 1
	for open := false; ; {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && open {
				return nil, &fileline.Error{Line: r.start, Err: errors.New("a quoted field that starts on this line is never closed")}
			}
			return nil, err
		}
		if open {
			r.rec = append(r.rec, '\n')
		}
		r.rec = append(r.rec, line...)
		if len(r.rec) > r.max {
			return nil, &fileline.Error{Line: r.start, Err: fmt.Errorf("a %w: over %d bytes", ErrTooLong, r.max)}
		}
		if open = QuoteOpen(line, r.delim, open); !open {
			break
		}
	}
	r.fields = Split(string(r.rec), r.delim, r.fields[:0])
	return r.fields, nil
}

// Line is the line the record Read last returned starts on, from 1.
func (r *Reader) Line() int { return r.start }

// line reads the next line, without its line end, and io.EOF after the last.
func (r *Reader) line() ([]byte, error) {
	var long []byte // a line longer than br's buffer
	for {
		b, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(r.rec)+len(long)+len(b) > r.max {
				return nil, &fileline.Error{Line: r.start, Err: fmt.Errorf("a %w: over %d bytes", ErrTooLong, r.max)}
			}
			long = append(long, b...)
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if long != nil {
			b = append(long, b...)
		}
		if len(b) == 0 {
			return nil, io.EOF
		}
		r.n++
		return bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r")), nil
	}
}
