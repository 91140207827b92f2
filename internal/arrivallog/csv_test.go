package arrivallog

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
)

// devicesim's events.csv means the same to the judge as to the report: the
// judge splits its rows with csvrow and decodes them with attempt, as
// attempt's reader does, so the instants, lags and refusals of a file
// attempt.Writer wrote are attempt.ReadCSV's, to the nanosecond, at random
// times and at halfway points.
func TestEventsCSVReadAsTheReportReadsIt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	var buf bytes.Buffer
	w := attempt.NewWriter(&buf, time.Unix(1_795_000_000, 0), 1)
	for i := range 5_000 {
		rec := attempt.Record{T: time.Duration(r.Int64N(int64(time.Hour))), Lag: -1, Device: int32(i), Kind: attempt.Attempt,
			Outcome: fault.Accepted, Seen: attempt.Fleet}
		if i%3 == 0 {
			rec.Outcome, rec.Code = fault.Refused, 3
		}
		if i%2 == 0 {
			rec.Lag = time.Duration(r.Int64N(int64(time.Second)))
		}
		if i%7 == 0 {
			rec.T = rec.T.Truncate(100*time.Microsecond) + 50*time.Microsecond // halfway between t_s's places
		}
		w.Add(rec)
	}
	require.NoError(t, w.Flush())
	want, err := attempt.ReadCSV(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	l, err := ParseLog(bytes.NewReader(buf.Bytes()), Options{})
	require.NoError(t, err)
	require.Equal(t, "events.csv", l.Format)
	require.Len(t, l.Times, len(want))
	var lags []float64
	for i, rec := range want {
		require.Equal(t, rec.T, l.Times[i], "row %d", i+2)
		require.Equal(t, attempt.ClientID(int(rec.Device)), l.Clients[i], "row %d", i+2)
		require.Equal(t, rec.Outcome != fault.Accepted, l.Refused[i], "row %d", i+2)
		if rec.Lag >= 0 {
			lags = append(lags, float64(rec.Lag)/float64(time.Millisecond))
		}
	}
	assert.Equal(t, lags, l.Lags)

	_, err = ParseLog(strings.NewReader(strings.Join(attempt.Header, ",")+"\n1.0000,0,dev-1,landed,0,\n"), Options{})
	assert.ErrorContains(t, err, `line 2: unknown outcome "landed"`)
}
