package reconnect_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/reconnect"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"Sat, 21 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Saturday, 21-Nov-26 12:01:00 GMT", time.Minute, true}, // RFC 850
		{"Sat Nov 21 12:00:05 2026", 5 * time.Second, true},     // asctime
		{"Fri, 20 Nov 2026 12:00:00 GMT", 0, true},              // in the past
		{"99999999999999999999999", 1<<63 - 1, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"7s", 0, false},
	}
	for _, c := range cases {
		d, ok := reconnect.ParseRetryAfter(c.in, now)
		assert.Equal(t, c.ok, ok, "%q", c.in)
		assert.Equal(t, c.want, d, "%q", c.in)
	}
}

// TestCheckResponseAgainstRealServer classifies real responses from an
// httptest server.
func TestCheckResponseAgainstRealServer(t *testing.T) {
	rateLimitBody := `{"error":{"code":403,"errors":[{"domain":"usageLimits","reason":"rateLimitExceeded"}]}}`
	cases := []struct {
		name      string
		status    int
		header    string
		body      string
		retryable bool
		after     time.Duration
		reason    string
	}{
		{"ok", 200, "", "", false, 0, ""},
		{"not modified", 304, "", "", false, 0, ""},
		{"429 with seconds", 429, "7", "", true, 7 * time.Second, ""},
		{"503 with date", 503, "Sat, 21 Nov 2026 12:00:09 GMT", "", true, 9 * time.Second, ""},
		{"503 malformed hint ignored", 503, "later", "", true, 0, ""},
		{"500", 500, "", "", true, 0, ""},
		{"502", 502, "", "", true, 0, ""},
		{"504", 504, "", "", true, 0, ""},
		{"501 is permanent", 501, "", "", false, 0, ""},
		{"404 is permanent", 404, "", "", false, 0, ""},
		{"400 is permanent", 400, "", "", false, 0, ""},
		{"403 plain is permanent", 403, "", `{"error":{"errors":[{"reason":"forbidden"}]}}`, false, 0, "forbidden"},
		{"403 rateLimitExceeded", 403, "", rateLimitBody, true, 0, "rateLimitExceeded"},
		{"403 userRateLimitExceeded", 403, "", `{"error":{"errors":[{"reason":"userRateLimitExceeded"}]}}`, true, 0, "userRateLimitExceeded"},
		{"403 garbage body", 403, "", `{"error":`, false, 0, ""},
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.header != "" {
					w.Header().Set("Retry-After", c.header)
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			require.NoError(t, err)
			defer resp.Body.Close()
			err = reconnect.CheckResponse(resp, now)
			if c.status < 400 {
				assert.NoError(t, err)
				return
			}
			var he *reconnect.HTTPError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, c.status, he.StatusCode)
			assert.Equal(t, c.retryable, reconnect.IsRetryable(err))
			assert.Equal(t, c.after, he.RetryAfter)
			assert.Equal(t, c.reason, he.Reason)
		})
	}
}

func TestNetworkErrorsAreRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: connection refused
	_, err = http.Get("http://" + addr)
	require.Error(t, err)
	assert.True(t, reconnect.IsRetryable(err))

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	assert.True(t, reconnect.IsRetryable(ctx.Err()))
}

// TestRetryLoopOverHTTP: a server that answers 503 with Retry-After: 1 twice
// and then 200; the loop must follow the hint and succeed on the third try.
func TestRetryLoopOverHTTP(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if hits <= 2 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	p := mustPolicy(t, reconnect.Constant{Interval: time.Millisecond}, reconnect.Limits{MaxRetries: 5})
	var waits []time.Duration
	r := reconnect.Retry{Policy: p, MaxRetryAfter: 2 * time.Millisecond, // clamp the 1 s hint so the test is quick
		Notify: func(n reconnect.Notice) { waits = append(waits, n.Delay) }}
	err := r.Do(context.Background(), func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return reconnect.CheckResponse(resp, time.Now())
	})
	require.NoError(t, err)
	assert.Equal(t, 3, hits)
	assert.Equal(t, []time.Duration{2 * time.Millisecond, 2 * time.Millisecond}, waits)
	assert.False(t, errors.Is(err, reconnect.ErrExhausted))
}
