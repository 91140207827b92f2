// Package fileline is what the readers of text files (a storm file, a
// broker's log, events.csv) share: the one error they return for a line
// they cannot read, which says where and what was wrong there, as x/perf's
// benchfmt.SyntaxError does; and which lines carry nothing to read.
package fileline

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is a line of a file that could not be read. Line counts from 1;
// Column, if known, from 1; File may be empty (standard input). It is not
// changed once made, so it is safe to share.
type Error struct {
	File   string
	Line   int
	Column int
	Err    error
}

func (e *Error) Error() string {
	at := fmt.Sprintf("line %d", e.Line)
	if e.Column > 0 {
		at += fmt.Sprintf(", column %d", e.Column)
	}
	if e.File != "" {
		at = e.File + ": " + at
	}
	return fmt.Sprintf("%s: %v", at, e.Err)
}

// Unwrap returns what was wrong with the line.
func (e *Error) Unwrap() error { return e.Err }

// Excerpt is as much of s as an error shows: its first 64 bytes, cut
// where a character starts. A string that short is s itself, sharing its
// memory: clone an excerpt to keep it past s.
func Excerpt[T string | []byte](s T) string {
	const most = 64
	if len(s) <= most {
		return string(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return string(s[:cut]) + "..."
}

// Names lists a header's or an object's names for an error, quoted
// where they hold what would confuse the list.
func Names(names []string) string {
	const most = 20
	var out []string
	for _, n := range names[:min(len(names), most)] {
		if n == "" || strings.ContainsAny(n, ", \t\"\r\n") || !strconv.CanBackquote(n) {
			n = strconv.Quote(Excerpt(n))
		}
		out = append(out, n)
	}
	if len(names) > most {
		out = append(out, fmt.Sprintf("and %d more", len(names)-most))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// OneOf writes names as "a, b or c".
func OneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Blank reports whether a line of a text file carries nothing to read: it
// is blank, or a # comment. The readers of logs and of CSV files skip such
// lines alike.
func Blank(line []byte) bool {
	t := bytes.TrimSpace(line)
	return len(t) == 0 || t[0] == '#'
}

// Lines reads a text file a line at a time, of any length up to a bound.
// Its zero value is not ready: use NewLines. It is not safe for
// concurrent use.
type Lines struct {
	br      *bufio.Reader
	max     int
	tooLong error
	n       int    // the last line read, from 1
	long    []byte // a line longer than br's buffer
}

// NewLines reads the lines of br. A line longer than max bytes, its line
// end aside, is the error tooLong, whatever the size of br's buffer.
func NewLines(br *bufio.Reader, max int, tooLong error) *Lines {
	return &Lines{br: br, max: max, tooLong: tooLong}
}

// Next returns the next line, valid until the next call, without its line
// end ("\n" or "\r\n") nor, on the first, a UTF-8 byte-order mark; io.EOF
// after the last. An error other than io.EOF leaves the line unread: N is
// the line before it.
func (l *Lines) Next() ([]byte, error) {
	l.long = l.long[:0]
	for {
		b, err := l.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(l.long)+len(b) > l.max+len("\r\n") {
				return nil, l.tooLong
			}
			l.long = append(l.long, b...)
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(l.long) > 0 {
			b = append(l.long, b...)
		}
		if len(b) == 0 {
			return nil, io.EOF
		}
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(b) > l.max {
			return nil, l.tooLong
		}
		if l.n++; l.n == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		return b, nil
	}
}

// N is the number of lines Next has returned: the last one's, from 1.
func (l *Lines) N() int { return l.n }
