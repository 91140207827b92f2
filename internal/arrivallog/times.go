package arrivallog

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herdguard/herdguard/internal/decimal"
)

// Times are read exactly, from their decimal digits: "12.3" is 12.3 s to
// the nanosecond. A float64 holds it as 12.300000000000000711 s. A tick
// found in the times would be found in the float's error instead.

// isUnixMillis reports whether a number is beyond 1e11 either side of 0:
// Unix milliseconds (since March 1973), where seconds would be 3,000 years.
func isUnixMillis[T string | []byte](s T) bool {
	v, err := decimal.Parse(s, 0)
	return errors.Is(err, decimal.ErrTooFar) || v > 1e11 || v < -1e11
}

// What a time in each form looks like, for errors.
const (
	secondsExpected = "a time in seconds (such as 1700000000 or 12.25)"
	millisExpected  = "a time in Unix milliseconds (such as 1700000000123)"
	rfc3339Expected = "an RFC 3339 time (such as 2024-01-02T03:04:05.25Z)"
	stampExpected   = "a time: Unix seconds or milliseconds (such as 1700000000 or 1700000000123) or RFC 3339 (such as 2024-01-02T03:04:05.25Z)"
)

// parseSeconds reads a time in seconds, exactly.
func parseSeconds[T string | []byte](s T) (time.Duration, error) {
	v, err := decimal.Parse(s, 9)
	return time.Duration(v), expected(secondsExpected, s, err)
}

// parseMillis reads a time in milliseconds, exactly.
func parseMillis[T string | []byte](s T) (time.Duration, error) {
	v, err := decimal.Parse(s, 6)
	return time.Duration(v), expected(millisExpected, s, err)
}

// expected is the error for s, read as what, failing with err.
func expected[T string | []byte](what string, s T, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, decimal.ErrTooFar):
		return fmt.Errorf("expected %s, got %q: %w", what, excerpt(s), decimal.ErrTooFar)
	}
	return fmt.Errorf("expected %s, got %q", what, excerpt(s))
}

// excerpt is as much of s as an error shows.
func excerpt[T string | []byte](s T) string {
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

// parseDated reads v, all of it one dated stamp scanStamp knows (RFC 3339
// and its kin, 2024-01-02T03:04:05.25Z), one without a zone as UTC, as
// mosquitto writes its ISO stamps.
func parseDated(v string) (time.Duration, error) {
	b := []byte(strings.TrimSpace(v))
	c, n, ok := scanStamp(b)
	if !ok || n != len(b) || c.unix || c.year == 0 || c.month <= 0 {
		return 0, expected(rfc3339Expected, v, decimal.ErrNotNumber)
	}
	t, err := newClock(time.UTC, time.Time{}, nil).at(c)
	return t, expected(rfc3339Expected, v, err)
}

// stampKind is how a time column or field writes its times: found from its
// first value, the same for every other.
type stampKind int

const (
	stampUnknown stampKind = iota
	stampRFC3339           // any time stamp scanStamp reads, RFC 3339 the most common
	stampSeconds
	stampMillis
	stampMicros
	stampNanos
)

func (k stampKind) String() string {
	switch k {
	case stampRFC3339:
		return "RFC 3339"
	case stampSeconds:
		return "seconds"
	case stampMillis:
		return "Unix ms"
	case stampMicros:
		return "Unix µs"
	case stampNanos:
		return "Unix ns"
	}
	return "unknown"
}

// numberKind is the unit a Unix time is written in, by its magnitude:
// seconds up to 1e11 (the year 5138), then ms, µs and ns.
func numberKind[T string | []byte](v T) stampKind {
	n, err := decimal.Parse(v, 0)
	switch {
	case errors.Is(err, decimal.ErrTooFar), n > 1e17 || n < -1e17:
		return stampNanos
	case n > 1e14 || n < -1e14:
		return stampMicros
	case n > 1e11 || n < -1e11:
		return stampMillis
	}
	return stampSeconds
}

// stamps reads a column or field of times, all like the first. They may
// be numbers (Unix seconds, ms, µs or ns, by magnitude). They may instead
// be stamps (RFC 3339 and the other forms scanStamp reads).
type stamps struct {
	kind  stampKind
	first int    // the line of the first
	clock *clock // for stamps without a zone; nil: UTC
}

// digits is how finely the last value read was written: the digits after
// the second.
func (s *stamps) digits(v string) int {
	f := fractionDigits([]byte(v))
	switch s.kind {
	case stampMillis:
		return min(9, 3+f)
	case stampMicros:
		return min(9, 6+f)
	case stampNanos:
		return 9
	case stampRFC3339:
		if c, _, ok := scanStamp([]byte(strings.TrimSpace(v))); ok {
			return c.digits
		}
	}
	return f
}

func (s *stamps) read(v string, line int) (time.Duration, error) {
	if s.kind == stampUnknown {
		switch _, err := decimal.Parse(v, 0); {
		case err == nil || errors.Is(err, decimal.ErrTooFar):
			s.kind = numberKind(v)
		default:
			if _, err := s.text(v); err != nil {
				return 0, fmt.Errorf("expected %s, got %q", stampExpected, excerpt(v))
			}
			s.kind = stampRFC3339
		}
		s.first = line
	}
	var t time.Duration
	var err error
	switch s.kind {
	case stampSeconds:
		t, err = parseSeconds(v)
	case stampMillis:
		t, err = parseMillis(v)
	case stampMicros:
		var n int64
		n, err = decimal.Parse(v, 3)
		t, err = time.Duration(n), expected("a time in Unix µs (such as 1700000000123456)", v, err)
	case stampNanos:
		var n int64
		n, err = decimal.Parse(v, 0)
		t, err = time.Duration(n), expected("a time in Unix ns", v, err)
	default:
		t, err = s.text(v)
	}
	if err != nil && line != s.first {
		err = fmt.Errorf("%w (as on line %d)", err, s.first)
	}
	return t, err
}

// text reads a stamp that is text, all of it.
func (s *stamps) text(v string) (time.Duration, error) {
	b := []byte(strings.TrimSpace(v))
	c, n, ok := scanStamp(b)
	if !ok || n != len(b) || c.unix {
		return 0, expected(rfc3339Expected, v, decimal.ErrNotNumber)
	}
	k := s.clock
	if k == nil {
		k = newClock(time.UTC, time.Now(), nil)
		s.clock = k
	}
	t, err := k.at(c)
	if err != nil {
		return 0, expected(rfc3339Expected, v, err)
	}
	return t, nil
}
