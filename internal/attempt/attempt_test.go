package attempt_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/fileline"
)

func TestRecordsRoundTripThroughEventsCSV(t *testing.T) {
	t0 := time.UnixMilli(1_795_466_393_000)
	in := []attempt.Record{
		{T: 0, Lag: -1, Device: 0, Outcome: fault.Dropped},
		{T: 1500 * time.Millisecond, Lag: 12500 * time.Microsecond, Device: 41, Code: 3, Outcome: fault.Refused},
		// no row
		{T: 1500 * time.Millisecond, Lag: -1, Device: 41, Outcome: fault.Accepted, Seen: attempt.Broker},
		{T: 31 * time.Second, Lag: 0, Device: -1, Outcome: fault.Accepted},
		{T: 32 * time.Second, Lag: -1, Device: 7, Code: 503, Outcome: fault.Unreachable},
	}
	var buf bytes.Buffer
	w := attempt.NewWriter(&buf, t0, 2)
	for _, r := range in {
		w.Add(r)
	}
	require.NoError(t, w.Flush())
	assert.Equal(t, `t_s,unix_ms,client_id,outcome,code,lag_ms
0.0000,1795466393000,dev-0,dropped,0,
1.5000,1795466393750,dev-41,refused,3,12.500
31.0000,1795466408500,?,accepted,0,0.000
32.0000,1795466409000,dev-7,unreachable,503,
`, buf.String(), "unix_ms is the wall clock: t0 + t / time scale")

	out, err := attempt.ReadCSV(&buf)
	require.NoError(t, err)
	want := []attempt.Record{in[0], in[1], in[3], in[4]}
	assert.Equal(t, want, out, "every Fleet record back as it was written")
}

// A blank line or a # comment is no row, as the judge reads the file too.
func TestReadCSVSkipsBlankLinesAndComments(t *testing.T) {
	head := strings.Join(attempt.Header, ",") + "\n"
	want, err := attempt.ReadCSV(strings.NewReader(head + "1.0,0,dev-1,accepted,0,\n2.5,0,dev-2,refused,5,1.5\n"))
	require.NoError(t, err)
	require.Len(t, want, 2)
	got, err := attempt.ReadCSV(strings.NewReader("\n" + head + "1.0,0,dev-1,accepted,0,\r\n\r\n# a note\n2.5,0,dev-2,refused,5,1.5\n\n"))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = attempt.ReadCSV(strings.NewReader("\n\nt_s\n"))
	assert.ErrorContains(t, err, "line 3: header")
}

func TestReadCSVNamesTheLine(t *testing.T) {
	for in, msg := range map[string]string{
		"t_s,unix_ms,client_id,outcome,code\n":                                                        "line 1: header",
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,0,dev-1,accepted,0,\nx,0,dev-1,accepted,0,\n": "line 3",
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,0,dev-1,admitted,0,\n":                        `line 2: unknown outcome "admitted"`,
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,0,dev-1,accepted,0,soon\n":                    "line 2",
	} {
		_, err := attempt.ReadCSV(strings.NewReader(in))
		assert.ErrorContains(t, err, msg, in)
		var at *fileline.Error
		assert.ErrorAs(t, err, &at, "the line, typed: %q", in)
	}
}

func TestClientIDs(t *testing.T) {
	assert.Equal(t, "dev-42", attempt.ClientID(42))
	for id, want := range map[string]int{"dev-42": 42, "dev-000007": 7, "dev-": -1, "dev-x": -1, "dev--1": -1, "car-1": -1, "dev-99999999999": -1} {
		got, ok := attempt.DeviceIndex(id)
		assert.Equal(t, want, got, id)
		assert.Equal(t, want >= 0, ok, id)
	}
}

// A large virtual run makes tens of millions of records: keep them small.
func TestRecordIs32Bytes(t *testing.T) {
	assert.EqualValues(t, 32, unsafe.Sizeof(attempt.Record{}))
}

// A live stream carries every kind of record, to the nanosecond, and its
// reader gets each one back as it was written, instants included.
func TestRecordsRoundTripThroughAStream(t *testing.T) {
	at := time.Unix(1_795_466_393, 123_456_789)
	in := []attempt.Record{
		{T: time.Duration(at.UnixNano()), Lag: 1234567 * time.Nanosecond, Device: 3, Outcome: fault.Pending, Kind: attempt.Begun},
		{T: time.Duration(at.UnixNano()), Lag: 1234567 * time.Nanosecond, Device: 3, Outcome: fault.Accepted},
		{T: time.Duration(at.Add(time.Nanosecond).UnixNano()), Lag: -1, Device: 7, Code: 3, Outcome: fault.Refused},
		{T: time.Duration(at.Add(2 * time.Second).UnixNano()), Lag: -1, Device: 3, Kind: attempt.Lost},
	}
	var buf bytes.Buffer
	w := attempt.NewStreamWriter(&buf)
	for i, r := range in {
		w.Add(r)
		assert.Equal(t, i+2, strings.Count(buf.String(), "\n"), "each row written through as it is added")
	}
	assert.Equal(t, `t_s,unix_ms,client_id,outcome,code,lag_ms,kind
1795466393.123456789,1795466393123,dev-3,pending,0,1.234567,begun
1795466393.123456789,1795466393123,dev-3,accepted,0,1.234567,attempt
1795466393.123456790,1795466393123,dev-7,refused,3,,attempt
1795466395.123456789,1795466395123,dev-3,pending,0,,lost
`, buf.String())
	out, err := attempt.ReadCSV(&buf)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	assert.Equal(t, at, time.Unix(0, int64(out[0].T)), "the instant, exactly")

	_, err = attempt.ReadCSV(strings.NewReader("t_s,unix_ms,client_id,outcome,code,lag_ms,kind\n1.0,0,dev-1,accepted,0,,landed\n"))
	assert.ErrorContains(t, err, `line 2: unknown kind "landed"`)
	_, err = attempt.ReadCSV(strings.NewReader("t_s,unix_ms,client_id,outcome,code,lag_ms,kind\n1.0,0,dev-1,accepted,0,\n"))
	assert.ErrorContains(t, err, "line 2: 6 fields, want 7")
}

// events.csv's times read back as exactly as they were written, and a time
// finer than a nanosecond rounds to the nearest, ties to even, as every
// reader of times in the module rounds (internal/decimal).
func TestTimesReadBackExactly(t *testing.T) {
	for text, want := range map[string]time.Duration{
		"0.0000": 0, "1.5000": 1500 * time.Millisecond, "31.0001": 31*time.Second + 100*time.Microsecond,
		"-2.25": -2250 * time.Millisecond, ".5": 500 * time.Millisecond, "7": 7 * time.Second,
		"0.0000000004": 0, "0.0000000005": 0, "0.0000000015": 2, "0.00000000051": 1,
		"1795466393.123456789": 1795466393123456789, "1.5e3": 1500 * time.Second,
	} {
		rows := "t_s,unix_ms,client_id,outcome,code,lag_ms\n" + text + ",0,dev-1,accepted,0,\n"
		got, err := attempt.ReadCSV(strings.NewReader(rows))
		require.NoError(t, err, text)
		assert.Equal(t, want, got[0].T, text)
	}
	for _, text := range []string{"", "-", ".", "1.x", "1.5e", "0.00000000051x", "99999999999999999999"} {
		rows := "t_s,unix_ms,client_id,outcome,code,lag_ms\n" + text + ",0,dev-1,accepted,0,\n"
		_, err := attempt.ReadCSV(strings.NewReader(rows))
		assert.ErrorContains(t, err, "line 2", "%q", text)
	}
}
