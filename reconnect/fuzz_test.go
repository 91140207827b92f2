package reconnect_test

import (
	"math"
	"testing"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// FuzzNew feeds arbitrary parameters to every shape's constructor: the result
// is an error or a policy whose delays are never negative and never past the
// documented bound. Never a panic.
func FuzzNew(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Second), int64(32*time.Second), 2.0, 3, 0.5, int64(0), false)
	f.Add(int64(-1), int64(0), int64(0), math.NaN(), 0, 0.0, int64(1), true)
	f.Add(int64(1), int64(math.MaxInt64), int64(math.MaxInt64), math.Inf(1), 1<<30, 0.999, int64(5*time.Second), true)
	f.Fuzz(func(t *testing.T, base, jitter, maxD int64, mult float64, n int, u float64, prev int64, atCap bool) {
		if !(u >= 0 && u < 1) {
			u = 0.5
		}
		b, j, m := time.Duration(base), time.Duration(jitter), time.Duration(maxD)
		shapes := []reconnect.Shape{
			reconnect.IoTCore{Base: b, Jitter: j, MaxBackoff: m, JitterAtCap: atCap},
			reconnect.Exponential{Base: b, Multiplier: mult, Max: m},
			reconnect.FullJitter{Base: b, Max: m},
			reconnect.EqualJitter{Base: b, Max: m},
			reconnect.Decorrelated{Base: b, Max: m},
			reconnect.Linear{Initial: b, Step: j, Max: m},
			reconnect.Constant{Interval: b},
		}
		for _, s := range shapes {
			p, err := reconnect.New(s, reconnect.Limits{MaxRetries: n % 100})
			if err != nil {
				continue
			}
			d := p.Delay(n, time.Duration(prev), u)
			limit := m
			if iot, ok := s.(reconnect.IoTCore); ok && iot.JitterAtCap {
				limit = m + j
			}
			if _, ok := s.(reconnect.Constant); ok {
				limit = b
			}
			if d < 0 || d > limit {
				t.Fatalf("%v: Delay(%d, %v, %v) = %v, outside [0, %v]", s, n, prev, u, d, limit)
			}
		}
	})
}

// FuzzParseRetryAfter: any header value parses to a non-negative duration or
// is reported malformed. Never a panic.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"7", "Sat, 21 Nov 2026 12:00:30 GMT", "", "-1", "99999999999999999999", "Mon, 02 Jan 2006 15:04:05 MST"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := reconnect.ParseRetryAfter(v, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}
