package logtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func utc(y int, m time.Month, d, h, mi, s, ns int) time.Duration {
	return time.Duration(time.Date(y, m, d, h, mi, s, ns, time.UTC).UnixNano())
}

// Every stamp form the brokers and their carriers write, read to the
// nanosecond, and the bytes each takes.
func TestScanStamp(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	ref := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		loc  *time.Location
		want time.Duration
		n    int
	}{
		// mosquitto
		{"1795756003: New client", nil, 1795756003 * time.Second, 10},
		// EMQX epoch
		{"1704164647454059 [warning]", nil, 1704164647454059 * time.Microsecond, 16},
		// journalctl -o short-unix
		{"1795756079.601235 vm mosquitto", nil, 1795756079*time.Second + 601235*time.Microsecond, 17},
		// Unix ms
		{"1700000000123 x", nil, 1700000000123 * time.Millisecond, 13},
		// Unix ns
		{"1704164645123456789 x", nil, 1704164645123456789, 19},
		// RabbitMQ
		{"2026-11-27 04:02:33.046092+00:00 [info]", nil, utc(2026, 11, 27, 4, 2, 33, 46092000), 32},
		// mosquitto %z
		{"2026-11-27T06:07:05+0100: mosquitto", nil, utc(2026, 11, 27, 5, 7, 5, 0), 24},
		// mosquitto, no zone
		{"2026-11-27T06:07:05: mosquitto", nil, utc(2026, 11, 27, 6, 7, 5, 0), 19},
		// ... with -tz
		{"2026-11-27T06:07:05: mosquitto", berlin, utc(2026, 11, 27, 5, 7, 5, 0), 19},
		// HiveMQ
		{"2024-05-06 10:11:12,345 - Client", nil, utc(2024, 5, 6, 10, 11, 12, 345000000), 23},
		// Event Grid's 7 digits
		{"2018-06-02T19:17:44.4383997Z", nil, utc(2018, 6, 2, 19, 17, 44, 438399700), 28},
		// docker
		{"2026-11-27T05:08:45.924768120Z 1795", nil, utc(2026, 11, 27, 5, 8, 45, 924768120), 30},
		// slashes
		{"2026/11/27 05:08:45 x", nil, utc(2026, 11, 27, 5, 8, 45, 0), 19},
		// RFC 3164
		{"Nov 27 06:10:11 vm", berlin, utc(2026, 11, 27, 5, 10, 11, 0), 15},
		// space-padded day, µs
		{"Nov  7 06:10:11.123456 vm", nil, utc(2026, 11, 7, 6, 10, 11, 123456000), 22},
		// journalctl -o short-full
		{"Fri 2026-11-27 06:07:59 CET vm", nil, utc(2026, 11, 27, 5, 7, 59, 0), 27},
		// ctime
		{"Fri Nov 27 06:07:59 2026: x", nil, utc(2026, 11, 27, 6, 7, 59, 0), 24},
		// bracketed, a zone's name
		{"[2026-11-27 06:07:59.5 UTC] x", nil, utc(2026, 11, 27, 6, 7, 59, 500000000), 27},
		// a negative offset
		{"2026-11-27T06:07:59-05:30 x", nil, utc(2026, 11, 27, 11, 37, 59, 0), 25},
		// an offset after a space
		{"2026-11-27 06:07:59 +0100 x", nil, utc(2026, 11, 27, 5, 7, 59, 0), 25},
		// not an offset: " - "
		{"2026-11-27 06:07:59 - Client ID: x", nil, utc(2026, 11, 27, 6, 7, 59, 0), 19},
	} {
		c, n, ok := ScanStamp([]byte(tc.in))
		require.True(t, ok, tc.in)
		assert.Equal(t, tc.n, n, "%s: the bytes taken", tc.in)
		at, err := NewClock(tc.loc, ref, nil).At(c)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, at, "%s: %v", tc.in, time.Unix(0, int64(at)).UTC())
	}
	for _, bad := range []string{"", "hello", "2026-13-01T00:00:00", "2026-02-30 00:00:00", "Nov 32 00:00:00", "25:00:00",
		"2026-11-27 06:07", "Foo 27 06:07:59", "12ab", "[2026-11-27 06:07:59 x"} {
		_, _, ok := ScanStamp([]byte(bad))
		assert.False(t, ok, bad)
	}
}

// What a stamp leaves out, the clock supplies: syslog's year from when the
// log was written (the year before for a December log read in January),
// rolling on at New Year; a time of day's date, rolling on at midnight.
func TestClockSuppliesYearAndDay(t *testing.T) {
	read := func(k *Clock, s string) time.Duration {
		c, _, ok := ScanStamp([]byte(s))
		require.True(t, ok, s)
		at, err := k.At(c)
		require.NoError(t, err, s)
		return at
	}
	k := NewClock(nil, time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC), nil)
	assert.Equal(t, utc(2026, 12, 31, 23, 59, 59, 0), read(k, "Dec 31 23:59:59"))
	assert.Equal(t, utc(2027, 1, 1, 0, 0, 1, 0), read(k, "Jan  1 00:00:01"))
	assert.Equal(t, "times without a zone read as UTC (-tz names another zone); years 2026 to 2027 assumed", k.Assumed())

	k = NewClock(nil, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), nil)
	assert.Equal(t, utc(2026, 11, 27, 23, 59, 59, 0), read(k, "23:59:59"))
	assert.Equal(t, utc(2026, 11, 28, 0, 0, 2, 0), read(k, "00:00:02"))
	assert.Contains(t, k.Assumed(), "times of day from 2026-11-27 on")
}

func TestParseLayout(t *testing.T) {
	k := NewClock(nil, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), nil)
	for _, tc := range []struct {
		layout, in string
		want       time.Duration
		n          int
	}{
		{"%Y-%m-%d %H:%M:%S", "2026-11-27 06:07:59: New", utc(2026, 11, 27, 6, 7, 59, 0), 19},
		{"%d/%m/%Y %H:%M:%S", "27/11/2026 06:07:59: New", utc(2026, 11, 27, 6, 7, 59, 0), 19},
		{"%Y-%m-%dT%H:%M:%S%z", "2026-11-27T06:07:59+0100 x", utc(2026, 11, 27, 5, 7, 59, 0), 24},
		{"%b %e %H:%M:%S", "Nov  7 06:07:59 x", utc(2026, 11, 7, 6, 7, 59, 0), 15},
		{"%H:%M:%S.%f", "06:07:59.25 x", utc(2026, 11, 27, 6, 7, 59, 250000000), 11},
		{"%s", "1795756003: x", 1795756003 * time.Second, 10},
		{"2006/01/02 15:04:05.000", "2026/11/27 06:07:59.125] x", utc(2026, 11, 27, 6, 7, 59, 125000000), 23},
	} {
		l, err := ParseLayout(tc.layout)
		require.NoError(t, err, tc.layout)
		at, n, err := l.Scan([]byte(tc.in), k)
		require.NoError(t, err, tc.layout)
		assert.Equal(t, tc.n, n, tc.layout)
		assert.Equal(t, tc.want, at, tc.layout)
	}
	for _, bad := range []string{"", "%Q", "%Y %", "%s %Y", "%M%f", "yesterday"} {
		_, err := ParseLayout(bad)
		assert.ErrorIs(t, err, ErrBadLayout, bad)
	}
}
