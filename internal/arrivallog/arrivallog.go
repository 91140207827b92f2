// Package arrivallog reads the arrival logs people have into arrival
// times for the judgement (internal/stormstats): mosquitto's own log, JSON
// lines, CSV and TSV with a time column, devicesim's events.csv, and plain
// columns of seconds or Unix milliseconds, their format detected from the
// first line. Times are read exactly from their digits, and an error names
// the line and what was expected there.
//
// A log that holds several disruptions, judged as one series, reads as
// waves. Where the log shows them (the broker's stop and start lines, the
// same devices back after holding their sessions, a crowd of devices never
// seen before), Log.Disruptions finds them, and Log.Recoveries judges each
// recovery on its own.
package arrivallog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// Log is an arrival log as read: one entry per arrival, in file order.
// ParseLog makes one; the zero value is an empty log. A Log is plain data:
// safe to read from several goroutines, not to change while they do.
type Log struct {
	// Format is the format taken, as a person would name it: "mosquitto",
	// "jsonl (field ts, Unix ms)", "csv (t_s)", "tsv (unix_ms)",
	// "csv (rfc3339 column time)", "events.csv", "seconds", "unix ms" ...
	Format string
	// Times holds each arrival's time: since the Unix epoch for the
	// absolute formats (mosquitto, Unix ms, RFC 3339), as written for
	// relative ones (t_s, plain seconds), to the nanosecond as written.
	Times []time.Duration
	// Lines holds the line each arrival came from (from 1; a CSV record
	// spanning lines, the first).
	Lines []int32
	// Clients holds the client ID of each arrival where the format carries
	// one (mosquitto, a CSV's client_id, clientid, client or device column,
	// a JSON line's clientid, client_id, clientId or client field; "" where
	// a line lacks it); nil when none does.
	Clients []string
	// Lags holds devicesim's lag_ms column (milliseconds), one value per
	// row that has one: not one per arrival (a refused dial has none).
	Lags []float64
	// Refused marks the arrivals the broker did not admit, where the log
	// says (devicesim's outcome column: anything but accepted); nil when
	// it does not, and every arrival counts as admitted.
	Refused []bool
	// Skipped counts the lines that were not arrivals and not a CSV
	// header: blank lines, # comments, mosquitto's other lines.
	Skipped int

	// What mosquitto's other lines say about disruptions (Disruptions).
	brokers []brokerLine
	ends    []sessionEnd
}

// FormatNames are the formats ParseLog can be told to take:
//
//   - mosquitto: mosquitto's log as it writes it, each line stamped with
//     Unix seconds ("1700000000: ") or, with log_timestamp_format
//     %Y-%m-%dT%H:%M:%S, an ISO time (read as UTC); its "New client
//     connected from ... as ID (p2, c1, k30)." lines are the arrivals, every
//     other line is skipped
//   - jsonl: one JSON object a line, its time in the first of ts,
//     timestamp, @timestamp, time or t that the first line has: a number
//     (Unix ms above 1e11, seconds otherwise) or an RFC 3339 string
//   - csv, tsv: a header naming t_s (seconds), unix_ms, or a column of
//     RFC 3339 times (time, timestamp, ts or @timestamp)
//   - seconds: one time in seconds a line (12.25, 1700000000)
//   - unix-ms: one time in Unix milliseconds a line (1700000000123)
var FormatNames = []string{"mosquitto", "jsonl", "csv", "tsv", "seconds", "unix-ms"}

// ParseError is a line of an arrival log that could not be read.
type ParseError struct {
	Line int // from 1
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// ErrNoArrivals is returned by ParseLog and ReadArrivals for a log with no
// arrival in it (wrapped, with what the log held instead).
var ErrNoArrivals = errors.New("no arrivals")

// ErrUnknownFormat is returned by ParseLog for a format not in FormatNames.
var ErrUnknownFormat = errors.New("unknown format")

// ErrLineTooLong is a *ParseError's Err for a line longer than
// MaxLineBytes: no arrival log has one.
var ErrLineTooLong = fmt.Errorf("longer than %d MiB", MaxLineBytes>>20)

// MaxLineBytes bounds a line (a CSV record spanning lines, all of them):
// far beyond any arrival log's, short of what exhausts memory.
const MaxLineBytes = 16 << 20

// ParseLog reads an arrival log in format, one of FormatNames, or, when
// format is "", in the format its first line (not blank, not a # comment)
// shows. Everywhere a UTF-8 byte-order mark, CRLF line ends, blank lines
// and lines starting with # are fine. Times are read exactly from their
// digits, never through a float64: "12.3" is 12.3 s to the nanosecond.
// Digits beyond the nanosecond are rounded to the nearest, ties to even
// (an RFC 3339 time's are cut, as time.Parse does). A time must lie within
// 285 years either side of 0.
//
// A line it cannot read is a *ParseError naming what was expected there; a
// log with no arrival, ErrNoArrivals; a format it does not know,
// ErrUnknownFormat. No Log is returned with an error.
func ParseLog(r io.Reader, format string) (*Log, error) {
	if format != "" && !isFormatName(format) {
		return nil, fmt.Errorf("%w %q: want one of %s (or none, to detect it)", ErrUnknownFormat, format, strings.Join(FormatNames, ", "))
	}
	lr := &lineReader{br: bufio.NewReaderSize(r, 1<<16)}
	l := &Log{}
	first, ok := lr.content(l)
	if !ok {
		if lr.err != nil {
			return nil, lr.err
		}
		return nil, noArrivals(l, lr.n)
	}
	firstLine := lr.n
	if format == "" {
		var err error
		if format, err = detectFormat(first); err != nil {
			return nil, &ParseError{Line: firstLine, Err: err}
		}
	}
	p := newLineParser(format)
	for text, ok := first, true; ok; text, ok = lr.content(l) {
		if err := p.parse(l, lr, text); err != nil {
			return nil, err
		}
	}
	if lr.err != nil {
		return nil, lr.err
	}
	if len(l.Times) == 0 {
		return nil, noArrivals(l, lr.n)
	}
	return l, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func isFormatName(s string) bool { return slices.Contains(FormatNames, s) }

// noArrivals says what a log without arrivals held.
func noArrivals(l *Log, lines int) error {
	switch {
	case lines == 0:
		return fmt.Errorf("%w: the log is empty", ErrNoArrivals)
	case l.Format == "":
		return fmt.Errorf("%w: %s, all blank or # comments", ErrNoArrivals, plural(lines, "line"))
	case strings.HasPrefix(l.Format, "mosquitto"):
		return fmt.Errorf("%w: %s, none mosquitto's \"New client connected from ...\"", ErrNoArrivals, plural(lines, "line"))
	}
	return fmt.Errorf("%w: %s with no row after its header", ErrNoArrivals, l.Format)
}

// lineReader reads a log's lines, of any length up to MaxLineBytes, and
// counts them.
type lineReader struct {
	br  *bufio.Reader
	n   int    // the last line read, from 1
	buf []byte // a line longer than br's buffer
	err error  // what stopped it, other than the end
}

// next returns the next line without its line end ("\n" or "\r\n"; on the
// first line, without a UTF-8 byte-order mark) until the end or an error
// (in lr.err). The line is valid until the next call.
func (lr *lineReader) next() ([]byte, bool) {
	if lr.err != nil {
		return nil, false
	}
	lr.buf = lr.buf[:0]
	var line []byte
	for {
		b, err := lr.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(lr.buf)+len(b) > MaxLineBytes+len("\r\n") {
				lr.err = &ParseError{Line: lr.n + 1, Err: ErrLineTooLong}
				return nil, false
			}
			lr.buf = append(lr.buf, b...)
			continue
		}
		if err != nil && err != io.EOF {
			lr.err = err
			return nil, false
		}
		if len(lr.buf) > 0 {
			lr.buf = append(lr.buf, b...)
			b = lr.buf
		}
		if len(b) == 0 { // the end
			return nil, false
		}
		line = b
		break
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > MaxLineBytes {
		lr.err = &ParseError{Line: lr.n + 1, Err: ErrLineTooLong}
		return nil, false
	}
	if lr.n == math.MaxInt32 {
		lr.err = &ParseError{Line: lr.n + 1, Err: errors.New("more lines than an arrival log can hold (2^31)")}
		return nil, false
	}
	lr.n++
	if lr.n == 1 {
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		if err := foreignEncoding(line); err != nil {
			lr.err = &ParseError{Line: 1, Err: err}
			return nil, false
		}
	}
	return line, true
}

// content returns the next line that is neither blank nor a # comment,
// counting those it passes in l.Skipped.
func (lr *lineReader) content(l *Log) ([]byte, bool) {
	for {
		line, ok := lr.next()
		if !ok {
			return nil, false
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return line, true
		}
		l.Skipped++
	}
}

// foreignEncoding recognises, on a first line, the files that are not
// text a line reader can read.
func foreignEncoding(line []byte) error {
	switch {
	case bytes.HasPrefix(line, []byte("\xff\xfe")), bytes.HasPrefix(line, []byte("\xfe\xff")):
		return errors.New("the file is UTF-16 text (as a spreadsheet's \"Unicode text\"); save it as UTF-8 (CSV UTF-8, say)")
	case bytes.HasPrefix(line, []byte("\x1f\x8b")):
		return errors.New("the file is gzip-compressed; decompress it first (zcat FILE | devicesim judge -)")
	}
	return nil
}

// add appends an arrival at t from line n, with its client ID where the
// format carries one (hasClient).
func (l *Log) add(t time.Duration, n int, client string, hasClient bool) {
	l.Times = append(l.Times, t)
	l.Lines = append(l.Lines, int32(n))
	switch {
	case hasClient && l.Clients == nil:
		l.Clients = make([]string, len(l.Times)-1, cap(l.Times))
		l.Clients = append(l.Clients, client)
	case l.Clients != nil:
		l.Clients = append(l.Clients, client)
	}
}

// ReadArrivals reads an arrival log in any format ParseLog detects into a
// stormstats.Histogram, with the method to judge it with (see
// Log.Histogram). It drops the stormstats.Preparation: a caller that judges
// a log someone wrote, whose stamps may sit on a coarse tick, should use
// ParseLog, Log.Histogram and the Preparation's Qualify, as devicesim judge
// does.
func ReadArrivals(r io.Reader) (*stormstats.Histogram, stormstats.Method, error) {
	return ReadArrivalsFormat(r, "")
}

// ReadArrivalsFormat is ReadArrivals for a log in format, one of
// FormatNames ("": detect it).
func ReadArrivalsFormat(r io.Reader, format string) (*stormstats.Histogram, stormstats.Method, error) {
	l, err := ParseLog(r, format)
	if err != nil {
		return nil, stormstats.Method{}, err
	}
	h, m, _ := l.Histogram()
	return h, m, nil
}

// Histogram prepares the log's arrivals for stormstats.Judge (see
// stormstats.Prepare: lines far from the rest set aside, each arrival
// placed within the tick its stamp sits on) and returns the method to judge
// them with: stormstats.DefaultMethod, with no burst narrower than the tick
// looked for, nor, when the log has devicesim's lag_ms column, narrower
// than twice its 99th percentile, as a run does. l.Times is left as it was.
func (l *Log) Histogram() (*stormstats.Histogram, stormstats.Method, stormstats.Preparation) {
	return stormstats.Prepare(slices.Clone(l.Times), l.Lines, l.method())
}

// method is stormstats.DefaultMethod, with devicesim's lag_ms column taken
// into account.
func (l *Log) method() stormstats.Method {
	m := stormstats.DefaultMethod
	if len(l.Lags) > 0 {
		m.MinWidth = time.Duration(2 * stormstats.Percentile(l.Lags, 99) * float64(time.Millisecond))
	}
	return m
}
