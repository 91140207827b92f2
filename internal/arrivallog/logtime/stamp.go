// Package logtime reads the time stamps of logs exactly: the forms
// brokers, syslog, journald, docker and kubectl write (ScanStamp, into a
// Civil that a Clock turns into a time), a column or field of times all
// written like its first (Stamps), and a layout the user names
// (ParseLayout).
package logtime

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/decimal"
)

// Civil is a log line's time stamp in its parts, as brokers, syslog,
// journald, docker and kubectl write it: ScanStamp reads it, and a Clock
// turns those into a time. It supplies what the text left out: the zone
// (-tz), the year (syslog's "Nov 27 03:12:00") or the whole date (a time
// of day alone).
//
// The forms read, each optionally in [brackets]:
//
//	1700000000  1700000000.123  1704164645123456     Unix s, ms, µs or ns, by magnitude
//	2026-11-27T03:12:00.123456+01:00                  ISO 8601 / RFC 3339: T or space,
//	2026-11-27 03:12:00,123 +0100   2026/11/27 ...    fraction after . or ,, zone Z, ±hh:mm,
//	                                                  ±hhmm, ±hh or a name (UTC, CET ...)
//	Nov 27 03:12:00  Nov  7 03:12:00.123456           syslog (RFC 3164), no year
//	Fri Nov 27 03:12:00 2026   Fri 2026-11-27 03:12:00 CET   ctime, journalctl short-full
//	03:12:00.123                                      a time of day alone
type Civil struct {
	Unix   bool          // a Unix number: At is the time, nothing else is set
	Far    bool          // a Unix number beyond 285 years from 0
	At     time.Duration // since the epoch (unix only)
	Year   int           // 0: not written
	Month  int           // 0: no date written
	Day    int
	Hour   int
	Min    int
	Sec    int
	Nanos  int
	Digits int // fraction digits written: 0 whole seconds, 3 ms, 6 µs, 9 ns
	Zone   ZoneKind
	Offset int // seconds east of UTC, where Zone is ZoneOffset
}

// ZoneKind says whether a stamp wrote its zone.
type ZoneKind uint8

const (
	ZoneNone   ZoneKind = iota // local to whoever wrote it: the clock's -tz
	ZoneOffset                 // written: Z, +01:00, UTC, CET ...
)

// ScanStamp reads a time stamp at the start of s. It returns its parts and
// the bytes it took (a closing bracket included). ok is false when s does
// not start with one.
func ScanStamp(s []byte) (c Civil, n int, ok bool) {
	open := len(s) > 0 && s[0] == '['
	i := 0
	if open {
		i = 1
	}
	j, ok := scanStampBody(s, i, &c)
	if !ok {
		return Civil{}, 0, false
	}
	if open {
		if j >= len(s) || s[j] != ']' {
			return Civil{}, 0, false
		}
		j++
	}
	return c, j, true
}

func scanStampBody(s []byte, i int, c *Civil) (int, bool) {
	switch {
	case i < len(s) && isDigit(s[i]):
		d := DigitsAt(s, i)
		switch {
		case d == 4 && i+4 < len(s) && (s[i+4] == '-' || s[i+4] == '/'):
			return scanISO(s, i, c)
		case d == 2 && i+2 < len(s) && s[i+2] == ':':
			return scanClock(s, i, c)
		}
		return scanUnix(s, i, c)
	case monthAt(s, i) > 0:
		return scanSyslog(s, i, c)
	case weekdayAt(s, i) && i+4 < len(s) && s[i+3] == ' ':
		k := i + 4
		if monthAt(s, k) > 0 { // ctime: Fri Nov 27 03:12:00 [ZONE] 2026
			j, ok := scanSyslog(s, k, c)
			if !ok {
				return 0, false
			}
			if j+5 <= len(s) && s[j] == ' ' && DigitsAt(s, j+1) == 4 {
				c.Year = atoi(s[j+1 : j+5])
				j += 5
			}
			return j, true
		}
		if DigitsAt(s, k) == 4 { // journalctl short-full: Fri 2026-11-27 03:12:00 CET
			return scanISO(s, k, c)
		}
	}
	return 0, false
}

// scanUnix reads a Unix time: seconds, ms, µs or ns by magnitude, with an
// optional fraction, read exactly.
func scanUnix(s []byte, i int, c *Civil) (int, bool) {
	j := i + DigitsAt(s, i)
	if j < len(s) && s[j] == '.' && DigitsAt(s, j+1) > 0 {
		j += 1 + DigitsAt(s, j+1)
	}
	if j < len(s) && (IsLetter(s[j]) || s[j] == '-' && j+1 < len(s) && isDigit(s[j+1])) {
		return 0, false // a word or a range that starts with a digit
	}
	num := s[i:j]
	scale := 9 // seconds
	switch v, err := decimal.Parse(num, 0); {
	case errors.Is(err, decimal.ErrTooFar) || v > 1e17:
		scale = 0 // ns
	case v > 1e14:
		scale = 3 // µs
	case v > 1e11:
		scale = 6 // ms
	case err != nil:
		return 0, false
	}
	v, err := decimal.Parse(num, scale)
	if errors.Is(err, decimal.ErrTooFar) {
		c.Unix, c.Far = true, true
		return j, true
	}
	if err != nil {
		return 0, false
	}
	c.Unix, c.At, c.Zone = true, time.Duration(v), ZoneOffset
	c.Digits = fractionDigits(num) + 9 - scale
	if c.Digits > 9 {
		c.Digits = 9
	}
	return j, true
}

func fractionDigits(num []byte) int {
	for k, b := range num {
		if b == '.' {
			return len(num) - k - 1
		}
	}
	return 0
}

// scanISO reads 2026-11-27[T ]03:12:00[.frac][zone], or with slashes.
func scanISO(s []byte, i int, c *Civil) (int, bool) {
	sep := s[i+4]
	if !(DigitsAt(s, i+5) == 2 && i+7 < len(s) && s[i+7] == sep && DigitsAt(s, i+8) == 2) {
		return 0, false
	}
	c.Year, c.Month, c.Day = atoi(s[i:i+4]), atoi(s[i+5:i+7]), atoi(s[i+8:i+10])
	j := i + 10
	if j >= len(s) || !(s[j] == 'T' || s[j] == 't' || s[j] == ' ' || s[j] == '_') {
		return 0, false
	}
	j, ok := scanClock(s, j+1, c)
	if !ok || !validDate(c.Year, c.Month, c.Day) {
		return 0, false
	}
	return scanZone(s, j, c), true
}

// scanClock reads 03:12:00[.frac] (and, alone, a zone after it).
func scanClock(s []byte, i int, c *Civil) (int, bool) {
	if !(DigitsAt(s, i) == 2 && i+5 < len(s) && s[i+2] == ':' && DigitsAt(s, i+3) == 2 && s[i+5] == ':' && DigitsAt(s, i+6) == 2) {
		return 0, false
	}
	c.Hour, c.Min, c.Sec = atoi(s[i:i+2]), atoi(s[i+3:i+5]), atoi(s[i+6:i+8])
	if c.Hour > 24 || c.Min > 59 || c.Sec > 60 || c.Hour == 24 && (c.Min > 0 || c.Sec > 0) {
		return 0, false
	}
	j := i + 8
	if j+1 < len(s) && (s[j] == '.' || s[j] == ',') && isDigit(s[j+1]) {
		d := DigitsAt(s, j+1)
		frac := s[j+1 : j+1+d]
		c.Digits = min(d, 9)
		for k := range 9 {
			c.Nanos *= 10
			if k < d {
				c.Nanos += int(frac[k] - '0')
			}
		}
		j += 1 + d
	}
	if c.Month == 0 {
		return scanZone(s, j, c), true
	}
	return j, true
}

// scanSyslog reads Nov 27 03:12:00[.frac] (the day padded with a space
// or a zero).
func scanSyslog(s []byte, i int, c *Civil) (int, bool) {
	c.Month = monthAt(s, i)
	j := i + 3
	if j >= len(s) || s[j] != ' ' {
		return 0, false
	}
	j++
	if j < len(s) && s[j] == ' ' {
		j++
	}
	d := DigitsAt(s, j)
	if d < 1 || d > 2 {
		return 0, false
	}
	c.Day = atoi(s[j : j+d])
	j += d
	if j >= len(s) || s[j] != ' ' || c.Day < 1 || c.Day > 31 {
		return 0, false
	}
	month := c.Month
	c.Month = -1 // a date without its year: scanClock reads no zone
	j, ok := scanClock(s, j+1, c)
	c.Month = month
	if !ok {
		return 0, false
	}
	return scanZone(s, j, c), true
}

// scanZone reads a zone after a time, if one is there: Z, +01:00, +0100,
// +01, or, after a space, a name (UTC, GMT, CET ...) or an offset.
func scanZone(s []byte, j int, c *Civil) int {
	if j >= len(s) {
		return j
	}
	switch b := s[j]; {
	case b == 'Z' || b == 'z':
		if j+1 == len(s) || !IsLetter(s[j+1]) {
			c.Zone, c.Offset = ZoneOffset, 0
			return j + 1
		}
	case b == '+' || b == '-':
		if k, off, ok := scanOffset(s, j); ok {
			c.Zone, c.Offset = ZoneOffset, off
			return k
		}
	case b == ' ':
		if j+1 < len(s) && (s[j+1] == '+' || s[j+1] == '-') {
			// " +0100", not " -" before a message
			if k, off, ok := scanOffset(s, j+1); ok && k-j-1 >= 5 {
				c.Zone, c.Offset = ZoneOffset, off
				return k
			}
		}
		k := j + 1
		for k < len(s) && s[k] >= 'A' && s[k] <= 'Z' {
			k++
		}
		if off, ok := zoneNames[string(s[j+1:k])]; ok && (k == len(s) || !IsLetter(s[k])) {
			c.Zone, c.Offset = ZoneOffset, off
			if k+1 < len(s) && (s[k] == '+' || s[k] == '-') { // UTC+01:00
				if e, o, ok := scanOffset(s, k); ok {
					c.Offset += o
					k = e
				}
			}
			return k
		}
	}
	return j
}

// scanOffset reads ±hh:mm, ±hhmm or ±hh at s[j].
func scanOffset(s []byte, j int) (end, offset int, ok bool) {
	sign := 1
	if s[j] == '-' {
		sign = -1
	}
	k := j + 1
	if DigitsAt(s, k) < 2 {
		return 0, 0, false
	}
	h, m := atoi(s[k:k+2]), 0
	switch {
	case k+4 < len(s)+1 && k+2 < len(s) && s[k+2] == ':' && DigitsAt(s, k+3) == 2:
		m = atoi(s[k+3 : k+5])
		k += 5
	case DigitsAt(s, k) == 4:
		m = atoi(s[k+2 : k+4])
		k += 4
	case DigitsAt(s, k) == 2:
		k += 2
	default:
		return 0, 0, false
	}
	if h > 18 || m > 59 {
		return 0, 0, false
	}
	return k, sign * (h*3600 + m*60), true
}

// zoneNames are the zone abbreviations a stamp may carry (journalctl's
// short-full, ctime, date(1)): those that name one offset.
var zoneNames = map[string]int{
	"UTC": 0, "GMT": 0, "UT": 0, "WET": 0, "WEST": 3600, "BST": 3600, "CET": 3600, "CEST": 7200, "MET": 3600,
	"MEST": 7200, "EET": 7200, "EEST": 10800, "MSK": 10800, "EST": -5 * 3600, "EDT": -4 * 3600, "CST": -6 * 3600,
	"CDT": -5 * 3600, "MST": -7 * 3600, "MDT": -6 * 3600, "PST": -8 * 3600, "PDT": -7 * 3600, "AKST": -9 * 3600,
	"AKDT": -8 * 3600, "HST": -10 * 3600, "JST": 9 * 3600, "KST": 9 * 3600, "HKT": 8 * 3600, "SGT": 8 * 3600,
	"AWST": 8 * 3600, "ACST": 34200, "ACDT": 37800, "AEST": 10 * 3600, "AEDT": 11 * 3600, "NZST": 12 * 3600,
	"NZDT": 13 * 3600,
}

var monthNames = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// monthAt is the month (1-12) whose English abbreviation starts s[i:], 0
// for none.
func monthAt(s []byte, i int) int {
	if i+3 > len(s) {
		return 0
	}
	for m, name := range monthNames {
		if string(s[i:i+3]) == name {
			return m + 1
		}
	}
	return 0
}

func weekdayAt(s []byte, i int) bool {
	if i+3 > len(s) {
		return false
	}
	switch string(s[i : i+3]) {
	case "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun":
		return true
	}
	return false
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// IsLetter reports whether b is an ASCII letter.
func IsLetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// DigitsAt counts the digits at s[i:].
func DigitsAt(s []byte, i int) int {
	n := 0
	for i+n < len(s) && isDigit(s[i+n]) {
		n++
	}
	return n
}

// atoi reads a few digits that are known to be digits.
func atoi(s []byte) int {
	v := 0
	for _, b := range s {
		v = v*10 + int(b-'0')
	}
	return v
}

func validDate(y, m, d int) bool {
	if m < 1 || m > 12 || d < 1 {
		return false
	}
	return d <= time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Clock turns stamps into times since the epoch. Where the stamp names no
// zone, the time is in loc. Where it names no year (or no day), the time
// is in the year (and on the day) the log is taken to run in. The clock
// rolls on when the stamps do: December to January, or a time of day that
// goes back by half a day. Its zero value is not ready: use NewClock. It
// is not safe for concurrent use.
type Clock struct {
	loc *time.Location
	// ref is when the log was written, as far as the reader knows (the
	// file's modification time, or now): the year and day of stamps that
	// lack them
	ref time.Time

	year, month int // the year taken, and the last month seen, for stamps without one
	day         time.Time
	lastOfDay   time.Duration
	yearless    bool // a stamp lacked its year
	dateless    bool // a stamp lacked its date
	zoneless    bool // a stamp lacked its zone
	written     bool // a stamp carried its zone (or was Unix time)
	started     bool
	dayStarted  bool
	firstYear   int
	// zone notes the zone of the first stamp it reads, for the log's
	// reader to write its times in; nil for a clock no one asks
	zone *ZoneNote
}

// ZoneNote is the zone a log's stamps were written in: the first stamp's
// own offset, the zone taken for stamps without one, nil for Unix time.
type ZoneNote struct {
	Loc  *time.Location
	seen bool
}

func (z *ZoneNote) note(loc *time.Location) {
	if z != nil && !z.seen {
		z.Loc, z.seen = loc, true
	}
}

// NewClock is a clock that reads stamps without a zone in loc (nil: UTC),
// and stamps without a year or day as written around ref; zone, if not
// nil, notes the zone of the first stamp it reads.
func NewClock(loc *time.Location, ref time.Time, zone *ZoneNote) *Clock {
	if loc == nil {
		loc = time.UTC
	}
	return &Clock{loc: loc, ref: ref, zone: zone}
}

// errTime is a stamp whose parts are not a time (a day past the month's
// end).
var errTime = errors.New("not a time")

// At is the time a stamp names.
func (k *Clock) At(c Civil) (time.Duration, error) {
	if c.Far {
		return 0, decimal.ErrTooFar
	}
	if c.Unix {
		k.written = true
		k.zone.note(nil)
		return c.At, nil
	}
	loc := k.loc
	if c.Zone == ZoneOffset {
		loc = time.FixedZone("", c.Offset)
		k.written = true
	} else {
		k.zoneless = true
	}
	k.zone.note(loc)
	year, month, day := c.Year, c.Month, c.Day
	switch {
	case month == 0: // a time of day alone
		k.dateless = true
		tod := time.Duration(c.Hour)*time.Hour + time.Duration(c.Min)*time.Minute + time.Duration(c.Sec)*time.Second
		if !k.dayStarted {
			r := k.ref.In(loc)
			k.day, k.dayStarted = time.Date(r.Year(), r.Month(), r.Day(), 0, 0, 0, 0, loc), true
		} else if tod < k.lastOfDay-12*time.Hour {
			k.day = k.day.AddDate(0, 0, 1)
		}
		k.lastOfDay = tod
		year, month, day = k.day.Year(), int(k.day.Month()), k.day.Day()
	case year == 0: // syslog: no year
		k.yearless = true
		if !k.started {
			r := k.ref.In(loc)
			k.year = r.Year()
			if month > int(r.Month()) { // a December log read in January
				k.year--
			}
			k.started, k.firstYear = true, k.year
		} else if month < k.month-6 {
			k.year++
		}
		k.month = month
		year = k.year
		if !validDate(year, month, day) {
			return 0, fmt.Errorf("%w: day %d of %s %d", errTime, day, time.Month(month), year)
		}
	}
	t := time.Date(year, time.Month(month), day, c.Hour, c.Min, c.Sec, c.Nanos, loc)
	sec := t.Unix()
	if sec > decimal.Max/1e9 || sec < -decimal.Max/1e9 {
		return 0, decimal.ErrTooFar
	}
	return time.Duration(sec)*time.Second + time.Duration(t.Nanosecond()), nil
}

// Assumed says what the clock supplied that the stamps left out, for the
// format's name: "" when they said it all.
func (k *Clock) Assumed() string {
	var parts []string
	if k.zoneless {
		name := k.loc.String()
		if k.loc == time.UTC {
			name = "UTC (-tz names another zone)"
		}
		parts = append(parts, "times without a zone read as "+name)
	}
	switch {
	case k.dateless:
		parts = append(parts, fmt.Sprintf("times of day from %s on", k.ref.In(k.loc).Format("2006-01-02")))
	case k.yearless && k.year != k.firstYear:
		parts = append(parts, fmt.Sprintf("years %d to %d assumed", k.firstYear, k.year))
	case k.yearless:
		parts = append(parts, fmt.Sprintf("year %d assumed", k.year))
	}
	return strings.Join(parts, "; ")
}

// LineTimes are the times a line carries: its own (the broker's) and its
// envelope's, each with whether it was read and the fraction digits it
// was written to. The zero LineTimes carries none.
type LineTimes struct {
	Own, Env             time.Duration
	OwnTimed, EnvTimed   bool
	OwnDigits, EnvDigits int
}
