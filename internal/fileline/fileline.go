// Package fileline is what the readers of text files (a storm file, a
// broker's log, events.csv) share: the one error they return for a line
// they cannot read, which says where and what was wrong there, as x/perf's
// benchfmt.SyntaxError does; and which lines carry nothing to read.
package fileline

import (
	"bytes"
	"fmt"
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
