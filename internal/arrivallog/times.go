package arrivallog

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Times are read exactly, from their decimal digits: "12.3" is 12.3 s to
// the nanosecond. A float64 holds it as 12.300000000000000711 s. A tick
// found in the times would be found in the float's error instead.

// maxNanos bounds a time: 9e9 s, 285 years either side of 0, inside what
// a time.Duration holds.
const maxNanos = 9e18

var (
	errNotNumber = errors.New("not a decimal number")
	errTooFar    = errors.New("more than 285 years from 0")
)

// maxExponent bounds an exponent's magnitude: beyond it a number is 0 or
// too far whatever its digits (a line holds at most MaxLineBytes of them).
const maxExponent = 1 << 30

// parseDecimal reads s, a decimal number such as -12.25, 1700000000, .5 or
// 1.5e3 (no spaces, no Inf or NaN), as a whole number of 10^-scale units.
// It reads it exactly, rounding digits beyond the scale to the nearest
// unit, ties to even. A number that is not within maxNanos units is
// errTooFar; anything else, errNotNumber.
func parseDecimal[T string | []byte](s T, scale int) (int64, error) {
	d, ok := scanDecimal(s)
	if !ok {
		return 0, errNotNumber
	}
	// The digits at index < keep are whole units; the one at keep rounds.
	keep := int64(d.intDigits) + d.exp + int64(scale)
	v, err := roundDigits(s[d.mantissa:d.end], keep)
	if d.neg {
		v = -v
	}
	return v, err
}

// decimal is the parts of a decimal number scanDecimal found in its text.
type decimal struct {
	neg           bool
	mantissa, end int   // where its digits and point are, s[mantissa:end]
	intDigits     int   // how many digits come before the point
	exp           int64 // its exponent, within maxExponent either side of 0
}

// scanDecimal finds the parts of s, a decimal number; ok false when s is
// not one.
func scanDecimal[T string | []byte](s T) (d decimal, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	d.mantissa = i
	digits, point := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			if !point {
				d.intDigits++
			}
			continue
		case c == '.' && !point:
			point = true
			continue
		}
		break
	}
	d.end = i
	if digits == 0 {
		return d, false
	}
	if i == len(s) {
		return d, true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return d, false
	}
	d.exp, ok = parseExponent(s[i+1:])
	return d, ok
}

// parseExponent reads the digits after an e, with their sign, capped at
// maxExponent either side of 0; ok false unless s is all of them.
func parseExponent[T string | []byte](s T) (exp int64, ok bool) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		exp = min(exp*10+int64(c-'0'), maxExponent)
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

// roundDigits is the whole number of units that digits (and a point,
// skipped) make when those before index keep are whole units. The digit
// at keep rounds to the nearest, ties to even. Those after it only break
// ties. Beyond maxNanos it is errTooFar.
func roundDigits[T string | []byte](digits T, keep int64) (int64, error) {
	var v, k int64
	round, sticky := byte(0), false
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c == '.' {
			continue
		}
		d := int64(c - '0')
		switch {
		case k < keep:
			if v > (maxNanos-d)/10 {
				return 0, errTooFar
			}
			v = v*10 + d
		case k == keep:
			round = byte(d)
		default:
			sticky = sticky || d != 0
		}
		k++
	}
	for ; k < keep && v != 0; k++ {
		if v > maxNanos/10 {
			return 0, errTooFar
		}
		v *= 10
	}
	if round > 5 || round == 5 && (sticky || v%2 == 1) {
		if v++; v > maxNanos {
			return 0, errTooFar
		}
	}
	return v, nil
}

// isUnixMillis reports whether a number is beyond 1e11 either side of 0:
// Unix milliseconds (since March 1973), where seconds would be 3,000 years.
func isUnixMillis[T string | []byte](s T) bool {
	v, err := parseDecimal(s, 0)
	return errors.Is(err, errTooFar) || v > 1e11 || v < -1e11
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
	v, err := parseDecimal(s, 9)
	return time.Duration(v), expected(secondsExpected, s, err)
}

// parseMillis reads a time in milliseconds, exactly.
func parseMillis[T string | []byte](s T) (time.Duration, error) {
	v, err := parseDecimal(s, 6)
	return time.Duration(v), expected(millisExpected, s, err)
}

// expected is the error for s, read as what, failing with err.
func expected[T string | []byte](what string, s T, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errTooFar):
		return fmt.Errorf("expected %s, got %q: %w", what, excerpt(s), errTooFar)
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

// parseISOTime reads an RFC 3339 time (2024-01-02T03:04:05.25Z) as the
// time since the Unix epoch. It also reads one with a space for the T.
// As in mosquitto's ISO stamps, it reads one without a zone as UTC.
func parseISOTime(s string) (time.Duration, error) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[13] != ':' {
		return 0, errNotNumber
	}
	if s[10] == ' ' || s[10] == 't' {
		s = s[:10] + "T" + s[11:]
	}
	if s[len(s)-1] == 'z' {
		s = s[:len(s)-1] + "Z"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if t, err = time.Parse("2006-01-02T15:04:05.999999999", s); err != nil {
			return 0, errNotNumber
		}
	}
	if sec := t.Unix(); sec > maxNanos/1e9 || sec < -maxNanos/1e9 {
		return 0, errTooFar
	}
	return time.Duration(t.Unix())*time.Second + time.Duration(t.Nanosecond()), nil
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
	n, err := parseDecimal(v, 0)
	switch {
	case errors.Is(err, errTooFar), n > 1e17 || n < -1e17:
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
		switch _, err := parseDecimal(v, 0); {
		case err == nil || errors.Is(err, errTooFar):
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
		n, err = parseDecimal(v, 3)
		t, err = time.Duration(n), expected("a time in Unix µs (such as 1700000000123456)", v, err)
	case stampNanos:
		var n int64
		n, err = parseDecimal(v, 0)
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
		if t, err := parseISOTime(v); err == nil { // 2024-01-02T03:04:05.25z and its like
			return t, nil
		}
		return 0, expected(rfc3339Expected, v, errNotNumber)
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
