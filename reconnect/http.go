package reconnect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTTPError is a response that was not a success, classified for retrying.
type HTTPError struct {
	StatusCode int
	// RetryAfter is the server's Retry-After, parsed; 0 if absent or malformed.
	RetryAfter time.Duration
	// Reason is the first error reason of a Google-style JSON error body
	// ({"error":{"errors":[{"reason":"rateLimitExceeded"}]}}), if any.
	Reason string
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("http %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(", retry after %v", e.RetryAfter)
	}
	return s
}

// Retryable reports whether the request is worth repeating: 429, 500, 502,
// 503 and 504, and a 403 whose body names a rate limit (Google APIs answer
// flood protection that way). 501 and every other 4xx are permanent.
func (e *HTTPError) Retryable() bool {
	return RetryableStatus(e.StatusCode, e.Reason)
}

// RetryAfterHint returns the parsed Retry-After.
func (e *HTTPError) RetryAfterHint() time.Duration { return e.RetryAfter }

// RetryableStatus classifies a status code, with reason the error reason from
// the body (only consulted for 403).
func RetryableStatus(code int, reason string) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusForbidden:
		return reason == "rateLimitExceeded" || reason == "userRateLimitExceeded"
	}
	return false
}

// maxErrorBody bounds how much of an error response is read for its reason.
const maxErrorBody = 64 << 10

// CheckResponse returns nil for a response below 400 and an *HTTPError
// otherwise. For an error it reads (at most 64 KiB of) the body, looking for a
// Google-style reason, and parses Retry-After against now; the caller still
// closes the body. A malformed Retry-After is ignored, not an error.
func CheckResponse(resp *http.Response, now time.Time) error {
	if resp.StatusCode < 400 {
		return nil
	}
	e := &HTTPError{StatusCode: resp.StatusCode}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
		e.RetryAfter = d
	}
	if resp.Body != nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		e.Reason = ErrorReason(body)
	}
	return e
}

// ErrorReason extracts the first reason from a Google-style JSON error body,
// or "" if body is not one.
func ErrorReason(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return ""
	}
	var doc struct {
		Error struct {
			Errors []struct {
				Reason string `json:"reason"`
			} `json:"errors"`
			Status string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	for _, e := range doc.Error.Errors {
		if e.Reason != "" {
			return e.Reason
		}
	}
	return ""
}

// ParseRetryAfter parses a Retry-After value in either form RFC 9110 allows:
// delta-seconds ("120") or an HTTP-date, taken relative to now. A date in the
// past means 0. ok is false for an empty or malformed value, which callers
// should ignore rather than treat as fatal.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange {
				return maxDuration, true
			}
			return 0, false
		}
		if secs > uint64(maxDuration/time.Second) {
			return maxDuration, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if !t.After(now) {
		return 0, true
	}
	return t.Sub(now), true
}

const maxDuration = time.Duration(1<<63 - 1)
