package stormstats

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseError is a line of an arrival log that could not be read.
type ParseError struct {
	Line int // from 1
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// ErrNoArrivals is returned by ReadArrivals for a log with no arrival in it.
var ErrNoArrivals = errors.New("no arrivals")

// maxSeconds bounds a time in seconds: 285 years either side of 0, inside
// what a time.Duration holds.
const maxSeconds = 9e9

// ReadArrivals reads an arrival log into a Histogram: devicesim's
// events.csv, any CSV whose header names a t_s column (seconds) or a
// unix_ms column (Unix milliseconds), or plain text with one time in seconds
// per line (blank lines are skipped). It returns the method to judge it
// with: DefaultMethod, except that when the log has devicesim's lag_ms
// column, no burst narrower than twice its 99th percentile is looked for,
// as a run does. A line it cannot read is a *ParseError; a log with no
// arrivals is ErrNoArrivals. Nothing is returned with an error.
func ReadArrivals(r io.Reader) (*Histogram, Method, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	first, err := br.Peek(1)
	if err == io.EOF || (err == nil && len(first) == 0) {
		return nil, Method{}, ErrNoArrivals
	}
	line, _ := peekLine(br)
	if _, err := parseSeconds(strings.TrimSpace(line)); err == nil {
		return readPlain(br)
	}
	return readCSV(br) // a header first
}

// peekLine returns the first line without consuming it (as much of it as
// the buffer holds).
func peekLine(br *bufio.Reader) (string, error) {
	b, err := br.Peek(br.Size())
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 0 || err == nil {
		return string(bytes.TrimRight(b, "\r")), nil
	}
	return "", err
}

func readPlain(br *bufio.Reader) (*Histogram, Method, error) {
	h := &Histogram{}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		t, err := parseSeconds(text)
		if err != nil {
			return nil, Method{}, &ParseError{Line: n, Err: err}
		}
		h.Add(t)
	}
	if err := sc.Err(); err != nil {
		return nil, Method{}, err
	}
	if h.Count() == 0 {
		return nil, Method{}, ErrNoArrivals
	}
	return h, DefaultMethod, nil
}

func readCSV(br *bufio.Reader) (*Histogram, Method, error) {
	cr := csv.NewReader(br)
	cr.FieldsPerRecord, cr.ReuseRecord = -1, true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, Method{}, ErrNoArrivals // blank lines only
	}
	if err != nil {
		return nil, Method{}, csvError(err)
	}
	header = slices.Clone(header) // ReuseRecord
	col := func(name string) int {
		return slices.IndexFunc(header, func(h string) bool { return strings.TrimSpace(h) == name })
	}
	ts, ms, lagCol := col("t_s"), col("unix_ms"), col("lag_ms")
	if ts < 0 && ms < 0 {
		return nil, Method{}, &ParseError{Line: 1, Err: fmt.Errorf("the header names neither t_s (seconds) nor unix_ms: %q", strings.Join(header, ","))}
	}
	h := &Histogram{}
	var lags []float64
	for {
		row, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, Method{}, csvError(err)
		}
		line, _ := cr.FieldPos(0)
		var t time.Duration
		if ts >= 0 {
			if ts >= len(row) {
				return nil, Method{}, &ParseError{Line: line, Err: fmt.Errorf("no t_s field")}
			}
			if t, err = parseSeconds(strings.TrimSpace(row[ts])); err != nil {
				return nil, Method{}, &ParseError{Line: line, Err: fmt.Errorf("t_s: %w", err)}
			}
		} else {
			if ms >= len(row) {
				return nil, Method{}, &ParseError{Line: line, Err: fmt.Errorf("no unix_ms field")}
			}
			v, err := strconv.ParseInt(strings.TrimSpace(row[ms]), 10, 64)
			if err != nil || v < -math.MaxInt64/int64(time.Millisecond) || v > math.MaxInt64/int64(time.Millisecond) {
				return nil, Method{}, &ParseError{Line: line, Err: fmt.Errorf("unix_ms: not a time in milliseconds: %q", row[ms])}
			}
			t = time.Duration(v) * time.Millisecond
		}
		if lagCol >= 0 && lagCol < len(row) && strings.TrimSpace(row[lagCol]) != "" {
			lag, err := strconv.ParseFloat(strings.TrimSpace(row[lagCol]), 64)
			if err != nil || !(lag >= 0 && lag < 1e12) {
				return nil, Method{}, &ParseError{Line: line, Err: fmt.Errorf("lag_ms: not a duration in milliseconds: %q", row[lagCol])}
			}
			lags = append(lags, lag)
		}
		h.Add(t)
	}
	if h.Count() == 0 {
		return nil, Method{}, ErrNoArrivals
	}
	m := DefaultMethod
	if len(lags) > 0 {
		m.MinWidth = time.Duration(2 * Percentile(lags, 99) * float64(time.Millisecond))
	}
	return h, m, nil
}

// csvError gives a CSV syntax error its line; any other is the reader's.
func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{Line: pe.StartLine, Err: pe.Err}
	}
	return err
}

// parseSeconds reads a finite time in seconds.
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > maxSeconds {
		return 0, fmt.Errorf("not a time in seconds: %q", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}
