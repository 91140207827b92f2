package stormstats_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/stormstats"
)

func TestReadArrivalsFormats(t *testing.T) {
	for name, tc := range map[string]struct {
		in    string
		count int64
		first time.Duration
	}{
		"devicesim events.csv": {"t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0000,1795305094626,dev-1,accepted,0,2.5\n1.5000,1795305095126,dev-2,refused,3,\n", 2, time.Second},
		"unix_ms only":         {"client,unix_ms\na,1000\nb,2500\nc,2500\n", 3, time.Second},
		"t_s preferred":        {"unix_ms,t_s\n5000,0.25\n", 1, 250 * time.Millisecond},
		"a single column":      {"t_s\n3\n4\n", 2, 3 * time.Second},
		"quoted fields":        {"id,t_s\n\"a,b\",7\n", 1, 7 * time.Second},
		"plain seconds":        {"0.5\n\n1.25\r\n  2  \n", 3, 500 * time.Millisecond},
	} {
		h, m, err := stormstats.ReadArrivals(strings.NewReader(tc.in))
		require.NoError(t, err, name)
		assert.Equal(t, tc.count, h.Count(), name)
		assert.Equal(t, []int{int(tc.count)}, h.Counts(tc.first, 24*time.Hour), "%s: none before the first", name)
		if tc.count > 1 {
			assert.Equal(t, []int{int(tc.count) - 1}, h.Counts(tc.first+time.Millisecond, 24*time.Hour), "%s: the first at its time", name)
		}
		if name == "devicesim events.csv" {
			assert.Equal(t, 5*time.Millisecond, m.MinWidth, "twice the lag's p99, as the run judged it")
		} else {
			assert.Equal(t, stormstats.DefaultMethod, m, name)
		}
	}
}

func TestReadArrivalsErrorsNameTheLine(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		line int
		want string
	}{
		"plain garbage":     {"1\n2\nthree\n", 3, "not a time in seconds"},
		"plain NaN":         {"1\nNaN\n", 2, "not a time"},
		"plain Inf":         {"1\n+Inf\n", 2, "not a time"},
		"beyond 285 years":  {"1\n1e10\n", 2, "not a time"},
		"no time column":    {"a,b\n1,2\n", 1, "neither t_s"},
		"bad t_s":           {"t_s,x\n1,2\nx,3\n", 3, "t_s"},
		"missing t_s field": {"x,t_s\n1,2\n3\n", 3, "no t_s field"},
		"bad unix_ms":       {"unix_ms\n1\n1.5\n", 3, "unix_ms"},
		"huge unix_ms":      {"unix_ms\n99999999999999999\n", 2, "unix_ms"},
		"bad lag":           {"t_s,lag_ms\n1,-1\n", 2, "lag_ms"},
		"bad quoting":       {"t_s,x\n1,\"open\n", 2, ""},
	} {
		_, _, err := stormstats.ReadArrivals(strings.NewReader(tc.in))
		var pe *stormstats.ParseError
		require.True(t, errors.As(err, &pe), "%s: %v", name, err)
		assert.Equal(t, tc.line, pe.Line, "%s: %v", name, err)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	for name, in := range map[string]string{"empty": "", "blank lines": "\n\n", "header only": "t_s,unix_ms\n"} {
		_, _, err := stormstats.ReadArrivals(strings.NewReader(in))
		assert.ErrorIs(t, err, stormstats.ErrNoArrivals, name)
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
		h, m, err := stormstats.ReadArrivals(strings.NewReader(string(in)))
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
