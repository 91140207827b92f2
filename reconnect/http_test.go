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
		reasons   []string
	}{
		{"ok", 200, "", "", false, 0, nil},
		{"not modified", 304, "", "", false, 0, nil},
		{"429 with seconds", 429, "7", "", true, 7 * time.Second, nil},
		{"503 with date", 503, "Sat, 21 Nov 2026 12:00:09 GMT", "", true, 9 * time.Second, nil},
		{"503 malformed hint ignored", 503, "later", "", true, 0, nil},
		{"500", 500, "", "", true, 0, nil},
		{"501 is retried like any 5xx", 501, "", "", true, 0, nil},
		{"502", 502, "", "", true, 0, nil},
		{"504", 504, "", "", true, 0, nil},
		{"505", 505, "", "", true, 0, nil},
		{"507", 507, "", "", true, 0, nil},
		{"511", 511, "", "", true, 0, nil},
		{"599", 599, "", "", true, 0, nil},
		{"404 is permanent", 404, "", "", false, 0, nil},
		{"400 is permanent", 400, "", "", false, 0, nil},
		{"403 plain is permanent", 403, "", `{"error":{"errors":[{"reason":"forbidden"}]}}`, false, 0, []string{"forbidden"}},
		{"403 rateLimitExceeded", 403, "", rateLimitBody, true, 0, []string{"rateLimitExceeded"}},
		{"403 userRateLimitExceeded", 403, "", `{"error":{"errors":[{"reason":"userRateLimitExceeded"}]}}`, true, 0, []string{"userRateLimitExceeded"}},
		{"403 rate limit as the second reason", 403, "",
			`{"error":{"errors":[{"reason":"forbidden"},{"reason":""},{"reason":"rateLimitExceeded"}]}}`,
			true, 0, []string{"forbidden", "rateLimitExceeded"}},
		{"403 rate limit in ErrorInfo details", 403, "",
			`{"error":{"code":403,"status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}`,
			true, 0, []string{"RATE_LIMIT_EXCEEDED"}},
		{"403 garbage body", 403, "", `{"error":`, false, 0, nil},
	}
	served := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Date", served.Format(http.TimeFormat))
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
			err = reconnect.CheckResponse(resp, served)
			if c.status < 400 {
				assert.NoError(t, err)
				return
			}
			var he *reconnect.HTTPError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, c.status, he.StatusCode)
			assert.Equal(t, c.retryable, reconnect.IsRetryable(err))
			assert.Equal(t, c.after, he.RetryAfter)
			assert.Equal(t, c.reasons, he.Reasons)
		})
	}
}

// A device without a real-time clock boots in 1970: an HTTP-date hint is
// measured against the response's Date, not against that clock.
func TestRetryAfterDateMeasuredAgainstResponseDate(t *testing.T) {
	served := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", served.Format(http.TimeFormat))
		w.Header().Set("Retry-After", served.Add(30*time.Second).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	deviceClock := time.Unix(42, 0) // no RTC
	hint, ok := reconnect.RetryAfterOf(reconnect.CheckResponse(resp, deviceClock))
	require.True(t, ok)
	assert.Equal(t, 30*time.Second, hint)

	// Without a usable Date the device clock is all there is.
	for _, date := range []string{"", "yesterday"} {
		r := &http.Response{StatusCode: 503, Header: http.Header{}}
		r.Header.Set("Retry-After", served.Add(30*time.Second).Format(http.TimeFormat))
		if date != "" {
			r.Header.Set("Date", date)
		}
		hint, _ = reconnect.RetryAfterOf(reconnect.CheckResponse(r, served.Add(10*time.Second)))
		assert.Equal(t, 20*time.Second, hint, "Date %q", date)
	}
}

// A 501 is retried unless the caller opts in to treating it as permanent.
func TestNotImplementedIsPermanentOptIn(t *testing.T) {
	p := mustPolicy(t, reconnect.Constant{Interval: time.Nanosecond}, reconnect.Limits{MaxRetries: 2})
	for _, c := range []struct {
		pred     func(error) bool
		attempts int
		reason   error
	}{
		{nil, 3, reconnect.ErrExhausted},
		{reconnect.NotImplementedIsPermanent, 1, reconnect.ErrPermanent},
	} {
		calls := 0
		err := reconnect.Retry{Policy: p, Retryable: c.pred}.Do(context.Background(), func(context.Context) error {
			calls++
			return &reconnect.HTTPError{StatusCode: http.StatusNotImplemented}
		})
		assert.ErrorIs(t, err, c.reason)
		assert.Equal(t, c.attempts, calls)
	}
	assert.True(t, reconnect.NotImplementedIsPermanent(&reconnect.HTTPError{StatusCode: 503}))
	assert.True(t, reconnect.NotImplementedIsPermanent(errFlaky))
	assert.False(t, reconnect.NotImplementedIsPermanent(reconnect.Permanent(errFlaky)))
}

func TestRetryableStatusEveryCode(t *testing.T) {
	for code := 100; code <= 599; code++ {
		want := code == 429 || code >= 500
		assert.Equal(t, want, reconnect.RetryableStatus(code), "%d", code)
	}
	assert.False(t, reconnect.RetryableStatus(403, "forbidden", "dailyLimitExceeded"))
	assert.True(t, reconnect.RetryableStatus(403, "forbidden", "userRateLimitExceeded"))
	assert.False(t, reconnect.RetryableStatus(404, "rateLimitExceeded"), "reasons matter for a 403 only")
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
	// clamp the 1 s hint so the test is quick
	r := reconnect.Retry{Policy: p, MaxRetryAfter: 2 * time.Millisecond,
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
	require.Len(t, waits, 2)
	for _, w := range waits { // the clamped hint, plus up to as much jitter
		assert.GreaterOrEqual(t, w, 2*time.Millisecond)
		assert.Less(t, w, 4*time.Millisecond)
	}
	assert.False(t, errors.Is(err, reconnect.ErrExhausted))
}
