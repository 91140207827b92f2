package arrivallog_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/disruption"
	"github.com/herdguard/herdguard/internal/fileline"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// sinceEpoch is a Unix time in seconds and nanoseconds, as a Log holds it.
func sinceEpoch(s, ns int64) time.Duration { return time.Duration(s)*time.Second + time.Duration(ns) }

// A mosquitto log, as it is: its "New client connected" lines are the
// arrivals, with their client IDs; the rest is skipped.
func ExampleParseLog() {
	const log = `1700000000: mosquitto version 2.0.11 running
1700000001: New connection from 10.0.3.17:53522 on port 1883.
1700000001: New client connected from 10.0.3.17:53522 as dev-17 (p2, c1, k30).
1700000002: New connection from 10.0.3.18:40112 on port 1883.
1700000002: New client connected from 10.0.3.18:40112 as dev-18 (p5, c1, k60, u'fleet').
`
	l, err := arrivallog.ParseLog(strings.NewReader(log), arrivallog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d arrivals, %d lines skipped\n", l.Format, len(l.Times), l.Skipped)
	for i, t := range l.Times {
		fmt.Printf("line %d: %s at %s\n", l.Lines[i], l.Clients[i], time.Unix(0, int64(t)).UTC().Format(time.RFC3339))
	}
	// Output:
	// mosquitto: 2 arrivals, 3 lines skipped
	// line 3: dev-17 at 2023-11-14T22:13:21Z
	// line 5: dev-18 at 2023-11-14T22:13:22Z
}

// An error names the line and what was expected there.
func ExampleParseLog_error() {
	_, err := arrivallog.ParseLog(strings.NewReader("t_s,client_id\n1.5,dev-1\nsoon,dev-2\n"), arrivallog.Options{})
	fmt.Println(err)
	// Output:
	// line 3: t_s: expected a time in seconds (such as 1700000000 or 12.25), got "soon"
}

func TestParseLogMosquittoGolden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "mosquitto.log"))
	require.NoError(t, err)
	defer f.Close()
	l, err := arrivallog.ParseLog(f, arrivallog.Options{})
	require.NoError(t, err)
	assert.Equal(t, &arrivallog.Log{
		Format:  "mosquitto",
		Times:   []time.Duration{sinceEpoch(1700000001, 0), sinceEpoch(1700000001, 0), sinceEpoch(1700000002, 0), sinceEpoch(1700000031, 0), sinceEpoch(1700000032, 0)},
		Lines:   []int32{7, 9, 11, 19, 22},
		Clients: []string{"dev-17", "dev-18", "weird id (p1)", "dev-17", "dev-18"},
		// the bridge's, every New connection, Client ... and the broker's own lines
		Skipped: 26 - 5,
	}, exported(l))
	assert.Empty(t, disruption.Find(l), "the broker's start and stop lines come before and after every arrival")
}

// exported is l as a caller sees it: what its other lines said about
// disruptions (package disruption) left out.
func exported(l *arrivallog.Log) *arrivallog.Log {
	return &arrivallog.Log{Format: l.Format, Times: l.Times, Lines: l.Lines, Clients: l.Clients, Lags: l.Lags, Refused: l.Refused, Skipped: l.Skipped}
}

func TestParseLogFormats(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	for name, tc := range map[string]struct {
		in, format string
		want       arrivallog.Log
	}{
		// mosquitto
		"mosquitto, ISO stamps": {in: "2024-01-02T03:04:05: mosquitto version 2.0.11 running\n" +
			"2024-01-02T03:04:06: New client connected from 127.0.0.1:57690 as dev-1 (p2, c1, k30).\n",
			want: arrivallog.Log{Format: "mosquitto (ISO times); times without a zone read as UTC (-tz names another zone)", Times: []time.Duration{sinceEpoch(1704164646, 0)},
				Lines: []int32{2}, Clients: []string{"dev-1"}, Skipped: 1}},
		"mosquitto, one line not cut": {in: "1700000000: New client connected from 127.0.0.1:53522 as dev-17 (p2, c1, k30).\n",
			want: arrivallog.Log{Format: "mosquitto", Times: []time.Duration{sinceEpoch(1700000000, 0)}, Lines: []int32{1}, Clients: []string{"dev-17"}}},
		"mosquitto, CRLF, BOM, blank and # lines": {in: bom + "# from the broker\r\n\r\n1700000000: New connection from ::1:53522 on port 1883.\r\n" +
			"1700000000: New client connected from ::1:53522 as auto-13E1AA9D (p2, c1, k30, u'a b').\r\n",
			want: arrivallog.Log{Format: "mosquitto", Times: []time.Duration{sinceEpoch(1700000000, 0)}, Lines: []int32{4},
				Clients: []string{"auto-13E1AA9D"}, Skipped: 3}},
		"mosquitto 1.x flags": {in: "1500000000: New client connected from 10.0.0.1 as old (c1, k60).\n",
			want: arrivallog.Log{Format: "mosquitto", Times: []time.Duration{sinceEpoch(1500000000, 0)}, Lines: []int32{1}, Clients: []string{"old"}}},

		// JSON lines
		"jsonl ts, Unix ms": {in: `{"ts":1700000000120,"clientid":"dev-1","msg":"connected"}` + "\n" + `{"ts": 1700000000121, "level": "info"}` + "\n",
			want: arrivallog.Log{Format: "jsonl (field ts, Unix ms)", Times: []time.Duration{sinceEpoch(1700000000, 120e6), sinceEpoch(1700000000, 121e6)},
				Lines: []int32{1, 2}, Clients: []string{"dev-1", ""}}},
		"jsonl timestamp, seconds": {in: `{"timestamp":1700000000.5}` + "\n" + `{"timestamp":"1700000000.25","client_id":"b"}` + "\n",
			want: arrivallog.Log{Format: "jsonl (field timestamp, seconds)", Times: []time.Duration{sinceEpoch(1700000000, 5e8), sinceEpoch(1700000000, 25e7)},
				Lines: []int32{1, 2}, Clients: []string{"", "b"}}},
		"jsonl @timestamp, RFC 3339": {in: `{"@timestamp":"2024-01-02T03:04:05.123456789+01:00","clientId":7}` + "\n" +
			"# a comment\n" + `{"@timestamp":"2024-01-02 02:04:06Z","clientId":"x"}` + "\n",
			want: arrivallog.Log{Format: "jsonl (field @timestamp, RFC 3339)", Times: []time.Duration{sinceEpoch(1704161045, 123456789), sinceEpoch(1704161046, 0)},
				Lines: []int32{1, 3}, Clients: []string{"7", "x"}, Skipped: 1}},
		"jsonl t, seconds as written, the field the first line's": {in: `{"t":12.3,"client":"a"}` + "\n" + `{"t":1.5e1,"time":"2024-01-02T03:04:05Z"}` + "\n",
			want: arrivallog.Log{Format: "jsonl (field t, seconds)", Times: []time.Duration{12300 * time.Millisecond, 15 * time.Second},
				Lines: []int32{1, 2}, Clients: []string{"a", ""}}},

		// CSV and TSV
		"devicesim events.csv": {in: "t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0000,1795305094626,dev-1,accepted,0,2.5\n1.5000,1795305095126,dev-2,refused,3,\n",
			want: arrivallog.Log{Format: "events.csv", Times: []time.Duration{time.Second, 1500 * time.Millisecond}, Lines: []int32{2, 3},
				Clients: []string{"dev-1", "dev-2"}, Lags: []float64{2.5}, Refused: []bool{false, true}}},
		"csv t_s, a device column": {in: "device,t_s\nd1,0.1\nd2,0.3\n",
			want: arrivallog.Log{Format: "csv (t_s)", Times: []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}, Lines: []int32{2, 3},
				Clients: []string{"d1", "d2"}}},
		"csv unix_ms": {in: "client,unix_ms\na,1000\nb,2500\n",
			want: arrivallog.Log{Format: "csv (unix_ms)", Times: []time.Duration{time.Second, 2500 * time.Millisecond}, Lines: []int32{2, 3},
				Clients: []string{"a", "b"}}},
		"csv t_s preferred": {in: "unix_ms,t_s\n5000,0.25\n",
			want: arrivallog.Log{Format: "csv (t_s)", Times: []time.Duration{250 * time.Millisecond}, Lines: []int32{2}}},
		"tsv t_s": {in: "t_s\tclient_id\n12.3\tdev-1\n12.4\tdev-2\n",
			want: arrivallog.Log{Format: "tsv (t_s)", Times: []time.Duration{12300 * time.Millisecond, 12400 * time.Millisecond}, Lines: []int32{2, 3},
				Clients: []string{"dev-1", "dev-2"}}},
		"tsv unix_ms, spreadsheet-quoted": {in: "\"unix_ms\"\t\"note\"\n1700000000120\t\"a\ttab\"\n",
			want: arrivallog.Log{Format: "tsv (unix_ms)", Times: []time.Duration{sinceEpoch(1700000000, 120e6)}, Lines: []int32{2}}},
		"csv rfc3339 column time": {in: "time,clientid\n2024-01-02T03:04:05.25Z,a\n2024-01-02T03:04:06Z,b\n",
			want: arrivallog.Log{Format: "csv (rfc3339 column time)", Times: []time.Duration{sinceEpoch(1704164645, 25e7), sinceEpoch(1704164646, 0)},
				Lines: []int32{2, 3}, Clients: []string{"a", "b"}}},
		"csv column ts, Unix ms": {in: "ts,level\n1700000000120,info\n",
			want: arrivallog.Log{Format: "csv (column ts, Unix ms)", Times: []time.Duration{sinceEpoch(1700000000, 120e6)}, Lines: []int32{2}}},
		"csv one column": {in: "t_s\n3\n4\n",
			want: arrivallog.Log{Format: "csv (t_s)", Times: []time.Duration{3 * time.Second, 4 * time.Second}, Lines: []int32{2, 3}}},
		"csv quoted fields, one across lines": {in: "id,t_s,note\n\"a,b\",7,\"said \"\"hi\"\"\nthen left\"\n\"c\",8,\n",
			want: arrivallog.Log{Format: "csv (t_s)", Times: []time.Duration{7 * time.Second, 8 * time.Second}, Lines: []int32{2, 4}}},
		"csv behind a BOM, CRLF": {in: bom + "t_s,client_id\r\n1,a\r\n\r\n2,b\r\n",
			want: arrivallog.Log{Format: "csv (t_s)", Times: []time.Duration{time.Second, 2 * time.Second}, Lines: []int32{2, 4},
				Clients: []string{"a", "b"}, Skipped: 1}},

		// plain
		"plain seconds": {in: "0.5\n\n1.25\r\n  2  \n",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{500 * time.Millisecond, 1250 * time.Millisecond, 2 * time.Second},
				Lines: []int32{1, 3, 4}, Skipped: 1}},
		"plain seconds, a blank first line": {in: "\n1700000000\n1700000001\n",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{sinceEpoch(1700000000, 0), sinceEpoch(1700000001, 0)}, Lines: []int32{2, 3}, Skipped: 1}},
		"plain seconds, a # comment first": {in: "# connects, cut from the log\n12.3\n",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{12300 * time.Millisecond}, Lines: []int32{2}, Skipped: 1}},
		"plain seconds behind a BOM": {in: bom + "12.3\n",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{12300 * time.Millisecond}, Lines: []int32{1}}},
		"plain unix ms": {in: "1700000000120\n1700000000121\n",
			want: arrivallog.Log{Format: "unix ms", Times: []time.Duration{sinceEpoch(1700000000, 120e6), sinceEpoch(1700000000, 121e6)}, Lines: []int32{1, 2}}},
		"plain, exact to the nanosecond": {in: "12.3\n-2.5\n1.5e3\n0.000000001\n.5\n1700000000.123456789\n",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{12300 * time.Millisecond, -2500 * time.Millisecond, 1500 * time.Second,
				time.Nanosecond, 500 * time.Millisecond, sinceEpoch(1700000000, 123456789)}, Lines: []int32{1, 2, 3, 4, 5, 6}}},
		"plain, rounded to the nanosecond, ties to even": {in: "0.0000000015\n0.0000000025\n0.00000000250001\n0.30000000000000004\n",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{2, 2, 3, 300 * time.Millisecond}, Lines: []int32{1, 2, 3, 4}}},

		// forced
		"-format unix-ms on small numbers": {in: "1000\n2500\n", format: "unix-ms",
			want: arrivallog.Log{Format: "unix ms", Times: []time.Duration{time.Second, 2500 * time.Millisecond}, Lines: []int32{1, 2}}},
		"-format seconds on small numbers": {in: "1000\n2500\n", format: "seconds",
			want: arrivallog.Log{Format: "seconds", Times: []time.Duration{1000 * time.Second, 2500 * time.Second}, Lines: []int32{1, 2}}},
		"-format csv on a header with a tab and a comma": {in: "t_s,x\ty\n1,2\n", format: "csv",
			want: arrivallog.Log{Format: "csv (t_s)", Times: []time.Duration{time.Second}, Lines: []int32{2}}},
		"-format tsv on the same": {in: "x,y\tt_s\n1,2\t3\n", format: "tsv",
			want: arrivallog.Log{Format: "tsv (t_s)", Times: []time.Duration{3 * time.Second}, Lines: []int32{2}}},
		"-format mosquitto on lines without its stamp": {in: "junk\n1700000000: New client connected from a:1 as c (p2, c1, k30).\n", format: "mosquitto",
			want: arrivallog.Log{Format: "mosquitto", Times: []time.Duration{sinceEpoch(1700000000, 0)}, Lines: []int32{2}, Clients: []string{"c"}, Skipped: 1}},
	} {
		l, err := arrivallog.ParseLog(strings.NewReader(tc.in), arrivallog.Options{Format: tc.format})
		require.NoError(t, err, name)
		assert.Equal(t, &tc.want, exported(l), name)
	}
}

// The log of the issue: each was rejected, the mosquitto line, the
// milliseconds and the comment with "the header names neither t_s nor
// unix_ms".
func TestParseLogAcceptsWhatWasRejected(t *testing.T) {
	for name, tc := range map[string]struct{ in, format string }{
		"a UTF-8 byte-order mark":       {"\xef\xbb\xbft_s,client_id\n1,a\n", "csv (t_s)"},
		"a blank first line":            {"\n1\n2\n", "seconds"},
		"a tab-separated t_s header":    {"t_s\tclient_id\n1\ta\n", "tsv (t_s)"},
		"a mosquitto line, not cut":     {"1700000000: New client connected from 127.0.0.1:53522 as dev-17 (p2, c1, k30).\n", "mosquitto"},
		"Unix milliseconds, plain text": {"1700000000120\n", "unix ms"},
		"a # comment":                   {"# t_s\n1\n", "seconds"},
	} {
		l, err := arrivallog.ParseLog(strings.NewReader(tc.in), arrivallog.Options{})
		require.NoError(t, err, name)
		assert.Equal(t, tc.format, l.Format, name)
	}
}

// Lines of any length up to MaxLineBytes are read; a longer one is an
// error that names it.
func TestParseLogLongLines(t *testing.T) {
	long := strings.Repeat("x", 2<<20)
	for name, in := range map[string]string{
		"a 2 MiB JSON field":  `{"ts":1700000000120,"msg":"` + long + `"}` + "\n" + `{"ts":1700000000121}` + "\n",
		"a 2 MiB CSV field":   "t_s,note\n1," + long + "\n2,\n",
		"a 2 MiB comment":     "# " + long + "\n1\n2\n",
		"a 2 MiB client ID":   "t_s,client\n1," + long + "\n2,b\n",
		"a 2 MiB last line":   "1\n2\n#" + long,
		"a 2 MiB CSV record":  "t_s,note\n1,\"" + strings.Repeat("a\n", 1<<20) + "\"\n2,\n",
		"a 2 MiB mosquito ID": "1700000000: New client connected from a:1 as " + long + " (p2, c1, k30).\n1700000001: Client x closed its connection.\n",
	} {
		l, err := arrivallog.ParseLog(strings.NewReader(in), arrivallog.Options{})
		require.NoError(t, err, name)
		assert.NotEmpty(t, l.Times, name)
	}
	l, err := arrivallog.ParseLog(strings.NewReader("t_s,client\n1,"+long+"\n"), arrivallog.Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{long}, l.Clients, "the whole of it")

	tooLong := "1\n2\n" + strings.Repeat("3", arrivallog.MaxLineBytes+1) + "\n4\n"
	_, err = arrivallog.ParseLog(strings.NewReader(tooLong), arrivallog.Options{})
	var pe *fileline.Error
	require.True(t, errors.As(err, &pe), "%v", err)
	assert.Equal(t, 3, pe.Line)
	assert.ErrorIs(t, err, arrivallog.ErrLineTooLong)
	assert.EqualError(t, err, "line 3: longer than 16 MiB")
}

func TestParseLogErrorsNameTheLineAndWhatWasExpected(t *testing.T) {
	for name, tc := range map[string]struct{ in, format, want string }{
		"plain seconds": {"1\n2\n3\n4\n5\n6\nabc\n", "",
			`line 7: expected a time in seconds (such as 1700000000 or 12.25), got "abc"`},
		"plain NaN": {"1\nNaN\n", "", `line 2: expected a time in seconds (such as 1700000000 or 12.25), got "NaN"`},
		"plain Inf": {"1\n+Inf\n", "", `line 2: expected a time in seconds (such as 1700000000 or 12.25), got "+Inf"`},
		"plain hex": {"1\n0x10\n", "", `line 2: expected a time in seconds (such as 1700000000 or 12.25), got "0x10"`},
		"beyond 285 years": {"1\n1e10\n", "",
			`line 2: expected a time in seconds (such as 1700000000 or 12.25), got "1e10": more than 285 years from 0`},
		"plain unix ms": {"1700000000120\n1700000000121.5\nsoon\n", "",
			`line 3: expected a time in Unix milliseconds (such as 1700000000123), got "soon"`},
		"a long line, cut in the error": {"1\n" + strings.Repeat("y", 100) + "\n", "",
			`line 2: expected a time in seconds (such as 1700000000 or 12.25), got "` + strings.Repeat("y", 64) + `..."`},
		"a header without a time column": {"a,b,c\n1,2,3\n", "",
			"line 1: a CSV header needs a t_s, unix_ms or RFC 3339 time column (named time, timestamp, ts or @timestamp); this one has: a, b, c"},
		"a TSV header without one": {"\n\na\tb\n", "",
			"line 3: a TSV header needs a t_s, unix_ms or RFC 3339 time column (named time, timestamp, ts or @timestamp); this one has: a, b"},
		"-format csv on a TSV header": {"t_s\tclient\n1\ta\n", "csv",
			`line 1: a CSV header needs a t_s, unix_ms or RFC 3339 time column (named time, timestamp, ts or @timestamp); this one has: "t_s\tclient"`},
		"bad t_s": {"t_s,x\n1,2\nx,3\n", "", `line 3: t_s: expected a time in seconds (such as 1700000000 or 12.25), got "x"`},
		"missing t_s field": {"x,t_s\n1,2\n3\n", "",
			"line 3: expected a t_s value in column 2, got a row of 1 fields with none there"},
		"bad unix_ms":  {"unix_ms\n1\n1.5x\n", "", `line 3: unix_ms: expected a time in Unix milliseconds (such as 1700000000123), got "1.5x"`},
		"huge unix_ms": {"unix_ms\n99999999999999999\n", "", `line 2: unix_ms: expected a time in Unix milliseconds (such as 1700000000123), got "99999999999999999": more than 285 years from 0`},
		"bad lag":      {"t_s,lag_ms\n1,-1\n", "", `line 2: lag_ms: expected a lag in milliseconds (such as 2.5), got "-1"`},
		"bad quoting":  {"t_s,x\n1,\"open\n2,3\n", "", "line 2: a quoted field that starts on this line is never closed"},
		"RFC 3339 column, a number later": {"time\n2024-01-02T03:04:05Z\n\n1700000000\n", "",
			`line 4: time: expected an RFC 3339 time (such as 2024-01-02T03:04:05.25Z), got "1700000000" (as on line 2)`},
		"a time column of neither": {"timestamp,x\nyesterday,1\n", "",
			`line 2: timestamp: expected a time: Unix seconds or milliseconds (such as 1700000000 or 1700000000123) or RFC 3339 (such as 2024-01-02T03:04:05.25Z), got "yesterday"`},
		"JSON without a time field": {`{"level":"info","clientid":"a"}` + "\n", "",
			"line 1: a JSON line needs a time field, one of ts, timestamp, @timestamp, time, t, eventTime, date or datetime; this one has: clientid, level"},
		"JSON, a later line without it": {`{"ts":1}` + "\n" + `{"ts":2}` + "\n" + `{"time":3,"x":1}` + "\n", "",
			`line 3: expected a time in field "ts", as on line 1; this one has: time, x`},
		"JSON, not an object": {`{"ts":1}` + "\n" + `{"ts":2` + "\n", "", `line 2: expected a JSON object (JSON lines: one a line), got "{\"ts\":2"`},
		"JSON, a null time": {`{"ts":null}` + "\n", "",
			`line 1: expected a time: Unix seconds or milliseconds (such as 1700000000 or 1700000000123) or RFC 3339 (such as 2024-01-02T03:04:05.25Z) in field "ts", got null`},
		"JSON, ms then seconds": {`{"ts":1700000000120}` + "\n" + `{"ts":"2024-01-02T03:04:05Z"}` + "\n", "",
			`line 2: field "ts": expected a time in Unix milliseconds (such as 1700000000123), got "2024-01-02T03:04:05Z" (as on line 1)`},
		"a JSON document cut short": {"[\n" + `{"ts":1},` + "\n" + `{"ts":2` + "\n", "",
			"line 3: the JSON document ends before its arrays and objects close"},
		"mosquitto, no stamp": {"mosquitto version 2.0.11 running\nNew client connected from a:1 as b (p2, c1, k30).\n", "",
			`line 2: expected a time stamp before "New client connected from a:1 as b (p2, c1, k30).": judging needs the time of each connect (mosquitto: log_timestamp true, its default)`},
		"mosquitto, a stamp too far": {"99999999999: New client connected from a:1 as b (p2, c1, k30).\n", "",
			`line 1: the time stamp "99999999999": more than 285 years from 0`},
		"mosquitto, a bad ISO stamp": {"2024-13-02T03:04:05: New client connected from a:1 as b (p2, c1, k30).\n", "",
			`line 1: cannot read the time stamp "2024-13-02T03:04:05": name its layout with -time-layout (as mosquitto's log_timestamp_format, such as %Y-%m-%d %H:%M:%S)`},
		"-format seconds on mosquitto": {"1700000000: mosquitto version 2.0.11 running\n", "seconds",
			`line 1: expected a time in seconds (such as 1700000000 or 12.25), got "1700000000: mosquitto version 2.0.11 running"`},
		"-format jsonl on a CSV": {"t_s\n1\n", "jsonl", `line 1: expected a JSON object (JSON lines: one a line), got "t_s"`},
		"UTF-16": {"\xff\xfet\x00_\x00s\x00", "",
			`line 1: the file is UTF-16 text (as a spreadsheet's "Unicode text"); save it as UTF-8 (CSV UTF-8, say)`},
		"gzip": {"\x1f\x8b\x08\x00", "", "line 1: the file is gzip-compressed; decompress it first (zcat FILE | devicesim judge -)"},
	} {
		_, err := arrivallog.ParseLog(strings.NewReader(tc.in), arrivallog.Options{Format: tc.format})
		var pe *fileline.Error
		require.True(t, errors.As(err, &pe), "%s: %v", name, err)
		assert.EqualError(t, err, tc.want, name)
	}
}

// What the first line looked like, and the formats there are.
func TestParseLogDetectionError(t *testing.T) {
	_, err := arrivallog.ParseLog(strings.NewReader("\n# the log\nhello world\n1\n"), arrivallog.Options{})
	var pe *fileline.Error
	require.True(t, errors.As(err, &pe), "%v", err)
	assert.Equal(t, 3, pe.Line, "the first line with something on it")
	for _, want := range []string{`"hello world"`, "a broker's log", "JSON lines", "CSV or TSV header", "one time a line",
		"the formats: " + strings.Join(arrivallog.FormatNames, ", "), "-pattern"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestParseLogNoArrivals(t *testing.T) {
	for name, tc := range map[string]struct{ in, format, want string }{
		"empty":       {"", "", "no arrivals: the log is empty"},
		"blank lines": {"\n\r\n  \n", "", "no arrivals: 3 lines, all blank or # comments"},
		"a BOM alone": {"\xef\xbb\xbf", "", "no arrivals: 1 line, all blank or # comments"},
		"header only": {"t_s,unix_ms\n# nothing yet\n", "", "no arrivals: csv (t_s) with no row after its header"},
		"a mosquitto log, no client": {"1700000000: mosquitto version 2.0.11 running\n", "",
			"no arrivals: 1 line, read as mosquitto, and none a connect; 1 other (broker running 1) (mosquitto logs connects with connection_messages true, its default, at log_type notice)"},
		"-format mosquitto on a CSV": {"t_s\n1\n", "mosquitto",
			"no arrivals: 2 lines, read as mosquitto, and none a connect; no line of a kind it knows (mosquitto logs connects with connection_messages true, its default, at log_type notice)"},
	} {
		l, err := arrivallog.ParseLog(strings.NewReader(tc.in), arrivallog.Options{Format: tc.format})
		assert.Nil(t, l, name)
		assert.ErrorIs(t, err, arrivallog.ErrNoArrivals, name)
		assert.EqualError(t, err, tc.want, name)
	}
}

func TestParseLogUnknownFormat(t *testing.T) {
	_, err := arrivallog.ParseLog(strings.NewReader("1\n"), arrivallog.Options{Format: "excel"})
	assert.ErrorIs(t, err, arrivallog.ErrUnknownFormat)
	assert.EqualError(t, err, `unknown format "excel": want one of `+strings.Join(arrivallog.FormatNames, ", ")+` (or none, to detect it)`)
	for _, name := range arrivallog.FormatNames {
		_, err := arrivallog.ParseLog(strings.NewReader(""), arrivallog.Options{Format: name})
		assert.ErrorIs(t, err, arrivallog.ErrNoArrivals, "%s is known", name)
	}
}

// A reader that fails is the reader's error, not a line's.
func TestParseLogReaderError(t *testing.T) {
	broken := errors.New("disk on fire")
	_, err := arrivallog.ParseLog(&failingReader{data: "t_s\n1\n2", err: broken}, arrivallog.Options{})
	assert.ErrorIs(t, err, broken)
}

type failingReader struct {
	data string
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// ReadArrivals prepares what it reads (Prepare): the times are exact at
// ParseLog; here each arrival lies within its stamp's tick, and no burst
// narrower than the tick is looked for.
func TestReadArrivalsFormats(t *testing.T) {
	for name, tc := range map[string]struct {
		in    string
		count int64
		first time.Duration
		tick  time.Duration
	}{
		"devicesim events.csv": {"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0003,1795305094626,dev-1,accepted,0,2.5\n1.5,1795305095126,dev-2,refused,3,\n", 2, time.Second, 0},
		"unix_ms only":         {"client,unix_ms\na,1000\nb,2500\nc,2500\n", 3, time.Second, 100 * time.Millisecond},
		"t_s preferred":        {"unix_ms,t_s\n5000,0.25\n", 1, 250 * time.Millisecond, 0},
		"a single column":      {"t_s\n3\n4\n", 2, 3 * time.Second, time.Second},
		"quoted fields":        {"id,t_s\n\"a,b\",7\n", 1, 7 * time.Second, 0},
		"plain seconds":        {"0.5\n\n1.25\r\n  2  \n", 3, 500 * time.Millisecond, 10 * time.Millisecond},
		"mosquitto":            {"1700000000: New client connected from a:1 as b (p2, c1, k30).\n1700000000: New client connected from a:2 as c (p2, c1, k30).\n", 2, sinceEpoch(1700000000, 0), time.Second},
	} {
		h, m, err := arrivallog.ReadArrivals(strings.NewReader(tc.in))
		require.NoError(t, err, name)
		assert.Equal(t, tc.count, h.Count(), name)
		assert.Equal(t, []int{int(tc.count)}, h.Counts(tc.first, 24*time.Hour), "%s: none before the first", name)
		if tc.tick > 0 {
			assert.GreaterOrEqual(t, h.Counts(tc.first, tc.tick)[0], 1, "%s: the first within its tick", name)
		}
		want := stormstats.DefaultMethod
		want.MinWidth = tc.tick
		if name == "devicesim events.csv" {
			want.MinWidth = 5 * time.Millisecond // twice the lag's p99, as the run judged it
		}
		assert.Equal(t, want, m, name)
	}
}

func TestReadArrivalsFormatForces(t *testing.T) {
	h, _, err := arrivallog.ReadArrivalsFormat(strings.NewReader("1000\n2000\n"), "unix-ms")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1}, h.Counts(time.Second, time.Second), "milliseconds: 1 s and 2 s")
	h, _, err = arrivallog.ReadArrivalsFormat(strings.NewReader("1000\n2000\n"), "")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1}, h.Counts(1000*time.Second, 1000*time.Second), "detected: seconds")
	_, _, err = arrivallog.ReadArrivalsFormat(strings.NewReader("1\n"), "nope")
	assert.ErrorIs(t, err, arrivallog.ErrUnknownFormat)
}

func TestReadArrivalsErrorsNameTheLine(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		line int
		want string
	}{
		"plain garbage":     {"1\n2\nthree\n", 3, "expected a time in seconds"},
		"no time column":    {"a,b\n1,2\n", 1, "needs a t_s, unix_ms or RFC 3339 time column"},
		"bad t_s":           {"t_s,x\n1,2\nx,3\n", 3, "t_s"},
		"missing t_s field": {"x,t_s\n1,2\n3\n", 3, "expected a t_s value"},
		"bad unix_ms":       {"unix_ms\n1\n1.5x\n", 3, "unix_ms"},
		"bad lag":           {"t_s,lag_ms\n1,-1\n", 2, "lag_ms"},
		"bad quoting":       {"t_s,x\n1,\"open\n", 2, "never closed"},
	} {
		h, _, err := arrivallog.ReadArrivals(strings.NewReader(tc.in))
		assert.Nil(t, h, name)
		var pe *fileline.Error
		require.True(t, errors.As(err, &pe), "%s: %v", name, err)
		assert.Equal(t, tc.line, pe.Line, "%s: %v", name, err)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	for name, in := range map[string]string{"empty": "", "blank lines": "\n\n", "header only": "t_s,unix_ms\n"} {
		_, _, err := arrivallog.ReadArrivals(strings.NewReader(in))
		assert.ErrorIs(t, err, arrivallog.ErrNoArrivals, name)
	}
}

// FuzzReadArrivals feeds any bytes to the reader and, when it reads them,
// to Judge: neither may panic, and an error returns nothing.
func FuzzReadArrivals(f *testing.F) {
	for _, s := range []string{"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,1000,dev-1,accepted,0,1.5\n", "0.5\n1\n",
		"unix_ms\n-9000000000000\n9000000000000\n", "t_s\n-8e9\n8e9\n", "id,t_s\n\"a\"\"b\",1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, m, err := arrivallog.ReadArrivals(strings.NewReader(string(in)))
		if err != nil {
			if h != nil {
				t.Fatal("a histogram returned with an error")
			}
			return
		}
		j, err := stormstats.Judge(h, m)
		if err != nil {
			t.Fatal(err)
		}
		if j.Count != h.Count() || j.Synchrony < 0 || j.Synchrony > 1 {
			t.Fatalf("count %d of %d, synchrony %g", j.Count, h.Count(), j.Synchrony)
		}
	})
}

// FuzzParseLog feeds any bytes, in each format and detected, to ParseLog:
// it may not panic, returns nothing with an error, and a log it returns is
// whole: a line for each time, in file order, a client for each where
// any, every time within 285 years of 0.
func FuzzParseLog(f *testing.F) {
	seeds := []string{
		"1700000000: mosquitto version 2.0.11 running\n1700000001: New client connected from ::1:5 as a (b) (p2, c1, k30, u'x').\n",
		"2024-01-02T03:04:05: New client connected from 1.2.3.4:5 as dev-1 (p5, c0, k60).\n",
		`{"ts":1700000000120,"clientid":"dev-1"}` + "\n" + `{"ts":"1700000000121"}` + "\n",
		`{"@timestamp":"2024-01-02T03:04:05.123456789+01:00"}` + "\n",
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,1000,dev-1,accepted,0,1.5\n",
		"time\tclient\n2024-01-02T03:04:05Z\t\"a\"\"b\"\n",
		"id,t_s\n\"a\nb\",1\n",
		"\xef\xbb\xbf# c\r\n\r\n0.5\r\n1e3\r\n",
		"1700000000120\n-9e12\n",
		"0.00000000250001\n",
		"1: mosquitto version 2.0.11 starting\n2: New client connected from a:1 as a (p2, c1, k30).\n70: Client a closed its connection.\n" +
			"70: mosquitto version 2.0.11 terminating\n80: New client connected from a:1 as a (p2, c1, k30).\n",
	}
	for _, s := range seeds {
		for k := range len(arrivallog.FormatNames) + 1 {
			f.Add([]byte(s), uint8(k))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, k uint8) {
		format := ""
		if i := int(k) % (len(arrivallog.FormatNames) + 1); i > 0 {
			format = arrivallog.FormatNames[i-1]
		}
		l, err := arrivallog.ParseLog(bytes.NewReader(in), arrivallog.Options{Format: format})
		if err != nil {
			if l != nil {
				t.Fatal("a log returned with an error")
			}
			return
		}
		if l.Format == "" || len(l.Times) == 0 || len(l.Lines) != len(l.Times) || l.Clients != nil && len(l.Clients) != len(l.Times) {
			t.Fatalf("format %q, %d times, %d lines, %d clients", l.Format, len(l.Times), len(l.Lines), len(l.Clients))
		}
		lines := int32(bytes.Count(in, []byte("\n")) + 1)
		for i, n := range l.Lines {
			if n < 1 || n > lines || i > 0 && n <= l.Lines[i-1] {
				t.Fatalf("lines %v of %d", l.Lines, lines)
			}
		}
		for _, d := range l.Times {
			if d > 9e18 || d < -9e18 {
				t.Fatalf("time %d beyond 285 years", d)
			}
		}
		if l.Skipped < 0 || l.Skipped+len(l.Times) > int(lines) {
			t.Fatalf("%d skipped and %d arrivals in %d lines", l.Skipped, len(l.Times), lines)
		}
		if l.Refused != nil && len(l.Refused) != len(l.Times) {
			t.Fatalf("%d refused marks for %d arrivals", len(l.Refused), len(l.Times))
		}
		found, recs, err := disruption.Recoveries(l)
		if err != nil || found != nil && len(recs) != len(found)+1 {
			t.Fatalf("%d disruptions found, %d recoveries: %v", len(found), len(recs), err)
		}
		for i, d := range found {
			if d.At <= slices.Min(l.Times) || i > 0 && d.At <= found[i-1].At || recs[i+1].Count == 0 {
				t.Fatalf("disruptions %v: not after the first arrival, in order, each with arrivals", found)
			}
		}
	})
}
