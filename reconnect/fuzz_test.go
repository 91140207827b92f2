package reconnect_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
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

// FuzzCheckResponse: any status, Retry-After, Date and error body from a
// server gives nil below 400 or an *HTTPError with a hint in [0, max] and
// non-empty reasons, and a 429 or 5xx is always retryable. Never a panic.
func FuzzCheckResponse(f *testing.F) {
	f.Add(503, "7", "", []byte(""))
	f.Add(503, "Sat, 21 Nov 2026 12:00:30 GMT", "Sat, 21 Nov 2026 12:00:00 GMT", []byte(""))
	f.Add(403, "", "", []byte(`{"error":{"errors":[{"reason":"forbidden"},{"reason":"rateLimitExceeded"}]}}`))
	f.Add(403, "", "", []byte(`{"error":{"details":[{"reason":"RATE_LIMIT_EXCEEDED"}],"errors":"x"}}`))
	f.Add(429, "-1", "yesterday", []byte(`{"error":`))
	f.Add(200, "", "", []byte("{}"))
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, retryAfter, date string, body []byte) {
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
		resp.Header.Set("Retry-After", retryAfter)
		resp.Header.Set("Date", date)
		err := reconnect.CheckResponse(resp, now)
		if status < 400 {
			if err != nil {
				t.Fatalf("status %d: %v", status, err)
			}
			return
		}
		var he *reconnect.HTTPError
		if !errors.As(err, &he) {
			t.Fatalf("status %d: %T %v", status, err, err)
		}
		if he.RetryAfter < 0 {
			t.Fatalf("negative hint %v", he.RetryAfter)
		}
		for _, r := range he.Reasons {
			if r == "" {
				t.Fatal("empty reason")
			}
		}
		if (status == 429 || (status >= 500 && status <= 599)) && !he.Retryable() {
			t.Fatalf("%d not retryable", status)
		}
		_ = he.Error()
	})
}
