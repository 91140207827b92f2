package logtime

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/decimal"
	"github.com/herdguard/herdguard/internal/fileline"
)

// Times are read exactly, from their decimal digits: "12.3" is 12.3 s to
// the nanosecond. A float64 holds it as 12.300000000000000711 s. A tick
// found in the times would be found in the float's error instead.

// IsUnixMillis reports whether a number is beyond 1e11 either side of 0:
// Unix milliseconds (since March 1973), where seconds would be 3,000 years.
func IsUnixMillis[T string | []byte](s T) bool {
	v, err := decimal.Parse(s, 0)
	return errors.Is(err, decimal.ErrTooFar) || v > 1e11 || v < -1e11
}

// What a time in each form looks like, for errors.
const (
	secondsExpected = "a time in seconds (such as 1700000000 or 12.25)"
	millisExpected  = "a time in Unix milliseconds (such as 1700000000123)"
	rfc3339Expected = "an RFC 3339 time (such as 2024-01-02T03:04:05.25Z)"
	StampExpected   = "a time: Unix seconds or milliseconds (such as 1700000000 or 1700000000123) or RFC 3339 (such as 2024-01-02T03:04:05.25Z)"
)

// ParseSeconds reads a time in seconds, exactly.
func ParseSeconds[T string | []byte](s T) (time.Duration, error) {
	v, err := decimal.Parse(s, 9)
	return time.Duration(v), Expected(secondsExpected, s, err)
}

// ParseMillis reads a time in milliseconds, exactly.
func ParseMillis[T string | []byte](s T) (time.Duration, error) {
	v, err := decimal.Parse(s, 6)
	return time.Duration(v), Expected(millisExpected, s, err)
}

// Expected is the error for s, read as what, failing with err.
func Expected[T string | []byte](what string, s T, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, decimal.ErrTooFar):
		return fmt.Errorf("expected %s, got %q: %w", what, fileline.Excerpt(s), decimal.ErrTooFar)
	}
	return fmt.Errorf("expected %s, got %q", what, fileline.Excerpt(s))
}

// ParseDated reads v, all of it one dated stamp ScanStamp knows (RFC 3339
// and its kin, 2024-01-02T03:04:05.25Z), one without a zone as UTC, as
// mosquitto writes its ISO stamps.
func ParseDated(v string) (time.Duration, error) {
	b := []byte(strings.TrimSpace(v))
	c, n, ok := ScanStamp(b)
	if !ok || n != len(b) || c.Unix || c.Year == 0 || c.Month <= 0 {
		return 0, Expected(rfc3339Expected, v, decimal.ErrNotNumber)
	}
	t, err := NewClock(time.UTC, time.Time{}, nil).At(c)
	return t, Expected(rfc3339Expected, v, err)
}

// StampKind is how a time column or field writes its times: found from its
// first value, the same for every other.
type StampKind int

// The ways a column or field writes its times.
const (
	StampUnknown StampKind = iota
	StampRFC3339           // any time stamp ScanStamp reads, RFC 3339 the most common
	StampSeconds
	StampMillis
	StampMicros
	StampNanos
)

// String names the kind as an error or a format's name says it.
func (k StampKind) String() string {
	switch k {
	case StampRFC3339:
		return "RFC 3339"
	case StampSeconds:
		return "seconds"
	case StampMillis:
		return "Unix ms"
	case StampMicros:
		return "Unix µs"
	case StampNanos:
		return "Unix ns"
	}
	return "unknown"
}

// numberKind is the unit a Unix time is written in, by its magnitude:
// seconds up to 1e11 (the year 5138), then ms, µs and ns.
func numberKind[T string | []byte](v T) StampKind {
	n, err := decimal.Parse(v, 0)
	switch {
	case errors.Is(err, decimal.ErrTooFar), n > 1e17 || n < -1e17:
		return StampNanos
	case n > 1e14 || n < -1e14:
		return StampMicros
	case n > 1e11 || n < -1e11:
		return StampMillis
	}
	return StampSeconds
}

// Stamps reads a column or field of times, all like the first. They may
// be numbers (Unix seconds, ms, µs or ns, by magnitude). They may instead
// be stamps (RFC 3339 and the other forms ScanStamp reads).
type Stamps struct {
	Kind  StampKind
	First int    // the line of the first
	Clock *Clock // for stamps without a zone; nil: UTC
}

// Digits is how finely the last value read was written: the digits after
// the second.
func (s *Stamps) Digits(v string) int {
	f := fractionDigits([]byte(v))
	switch s.Kind {
	case StampMillis:
		return min(9, 3+f)
	case StampMicros:
		return min(9, 6+f)
	case StampNanos:
		return 9
	case StampRFC3339:
		if c, _, ok := ScanStamp([]byte(strings.TrimSpace(v))); ok {
			return c.Digits
		}
	}
	return f
}

// Read reads v, the value on line line, written as the first value was;
// the first value read sets how.
func (s *Stamps) Read(v string, line int) (time.Duration, error) {
	if s.Kind == StampUnknown {
		switch _, err := decimal.Parse(v, 0); {
		case err == nil || errors.Is(err, decimal.ErrTooFar):
			s.Kind = numberKind(v)
		default:
			if _, err := s.text(v); err != nil {
				return 0, fmt.Errorf("expected %s, got %q", StampExpected, fileline.Excerpt(v))
			}
			s.Kind = StampRFC3339
		}
		s.First = line
	}
	var t time.Duration
	var err error
	switch s.Kind {
	case StampSeconds:
		t, err = ParseSeconds(v)
	case StampMillis:
		t, err = ParseMillis(v)
	case StampMicros:
		var n int64
		n, err = decimal.Parse(v, 3)
		t, err = time.Duration(n), Expected("a time in Unix µs (such as 1700000000123456)", v, err)
	case StampNanos:
		var n int64
		n, err = decimal.Parse(v, 0)
		t, err = time.Duration(n), Expected("a time in Unix ns", v, err)
	default:
		t, err = s.text(v)
	}
	if err != nil && line != s.First {
		err = fmt.Errorf("%w (as on line %d)", err, s.First)
	}
	return t, err
}

// text reads a stamp that is text, all of it.
func (s *Stamps) text(v string) (time.Duration, error) {
	b := []byte(strings.TrimSpace(v))
	c, n, ok := ScanStamp(b)
	if !ok || n != len(b) || c.Unix {
		return 0, Expected(rfc3339Expected, v, decimal.ErrNotNumber)
	}
	k := s.Clock
	if k == nil {
		k = NewClock(time.UTC, time.Now(), nil)
		s.Clock = k
	}
	t, err := k.At(c)
	if err != nil {
		return 0, Expected(rfc3339Expected, v, err)
	}
	return t, nil
}
