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
)

func TestRecordsRoundTripThroughEventsCSV(t *testing.T) {
	t0 := time.UnixMilli(1_795_466_393_000)
	in := []attempt.Record{
		{T: 0, Lag: -1, Device: 0, Outcome: fault.Dropped},
		{T: 1500 * time.Millisecond, Lag: 12500 * time.Microsecond, Device: 41, Code: 3, Outcome: fault.Refused},
		{T: 1500 * time.Millisecond, Lag: -1, Device: 41, Outcome: fault.Accepted, Side: attempt.Broker}, // no row
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

func TestReadCSVNamesTheLine(t *testing.T) {
	for in, msg := range map[string]string{
		"t_s,unix_ms,client_id,outcome,code\n":                                                        "line 1: header",
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,0,dev-1,accepted,0,\nx,0,dev-1,accepted,0,\n": "line 3",
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,0,dev-1,admitted,0,\n":                        `line 2: unknown outcome "admitted"`,
		"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0,0,dev-1,accepted,0,soon\n":                    "line 2",
	} {
		_, err := attempt.ReadCSV(strings.NewReader(in))
		assert.ErrorContains(t, err, msg, in)
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
