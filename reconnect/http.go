package reconnect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTTPError is a response that was not a success, classified for retrying.
// It is a plain value: safe to share once built. The zero HTTPError (status
// 0) is not meaningful.
type HTTPError struct {
	StatusCode int
	// RetryAfter is the server's Retry-After, parsed; 0 if absent or malformed.
	RetryAfter time.Duration
	// Reasons are the error reasons of a Google-style JSON error body, in
	// the order they appear: every error.errors[].reason and every
	// error.details[].reason ({"error":{"errors":[{"reason":"rateLimitExceeded"}]}}).
	// nil if the body is not one.
	Reasons []string
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("http %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if len(e.Reasons) > 0 {
		s += " (" + strings.Join(e.Reasons, ", ") + ")"
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(", retry after %v", e.RetryAfter)
	}
	return s
}

// Retryable reports whether the request is worth repeating; see
// [RetryableStatus].
func (e *HTTPError) Retryable() bool {
	return RetryableStatus(e.StatusCode, e.Reasons...)
}

// RetryAfterHint returns the parsed Retry-After.
func (e *HTTPError) RetryAfterHint() time.Duration { return e.RetryAfter }

// RetryableStatus classifies a status code as IoT Core's guidance does.
// That guidance is to back off and retry on 429 and on every 5xx. 501 is
// included: a caller whose server means it for good opts in with
// [NotImplementedIsPermanent]. A 403 is retried too when any of reasons
// names a rate limit. Google APIs answer flood protection that way. Every
// other status is permanent. reasons are the body's error reasons (see
// [ErrorReasons]). Only a 403 consults them.
func RetryableStatus(code int, reasons ...string) bool {
	switch {
	case code == http.StatusTooManyRequests, code >= 500 && code <= 599:
		return true
	case code == http.StatusForbidden:
		for _, r := range reasons {
			if rateLimitReasons[r] {
				return true
			}
		}
	}
	return false
}

// rateLimitReasons are the reasons Google APIs give a 403 (or 429) that
// means "slow down" rather than "never": the classic errors[].reason values
// and the google.rpc.ErrorInfo reason of the newer APIs.
var rateLimitReasons = map[string]bool{
	"rateLimitExceeded": true, "userRateLimitExceeded": true, "RATE_LIMIT_EXCEEDED": true,
}

// NotImplementedIsPermanent is a [Retry.Retryable] predicate for callers
// whose server answers 501 Not Implemented for something it will never do.
// It is [IsRetryable], except that an *HTTPError with status 501 is
// permanent. Without it a 501 is retried like any 5xx.
func NotImplementedIsPermanent(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) && he.StatusCode == http.StatusNotImplemented {
		return false
	}
	return IsRetryable(err)
}

// maxErrorBody bounds how much of an error response is read for its reasons.
const maxErrorBody = 64 << 10

// maxReasons bounds how many reasons one body contributes.
const maxReasons = 32

// CheckResponse returns nil for a response below 400 and an *HTTPError
// otherwise. For an error it reads (at most 64 KiB of) the body for its
// Google-style reasons and parses Retry-After. A Retry-After given as an
// HTTP-date is measured against the response's own Date header when that is
// valid. A device whose clock is wrong (one without a real-time clock that
// booted in 1970) thus waits what the server meant. Without a valid Date,
// now is the fallback. The caller still closes the body. A malformed
// Retry-After is ignored, not an error.
func CheckResponse(resp *http.Response, now time.Time) error {
	if resp.StatusCode < 400 {
		return nil
	}
	e := &HTTPError{StatusCode: resp.StatusCode}
	ref := now
	if served, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		ref = served
	}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), ref); ok {
		e.RetryAfter = d
	}
	if resp.Body != nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		e.Reasons = ErrorReasons(body)
	}
	return e
}

// ErrorReasons extracts every reason from a Google-style JSON error body, in
// order (error.errors[].reason, then error.details[].reason; empty ones
// skipped, at most 32), or nil if body is not one.
func ErrorReasons(body []byte) []string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil
	}
	type reasoned struct {
		Reason string `json:"reason"`
	}
	var doc struct {
		Error struct {
			Errors  []reasoned `json:"errors"`
			Details []reasoned `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var out []string
	for _, e := range append(doc.Error.Errors, doc.Error.Details...) {
		if e.Reason != "" && len(out) < maxReasons {
			out = append(out, e.Reason)
		}
	}
	return out
}

// ParseRetryAfter parses a Retry-After value in either form RFC 9110 allows:
// delta-seconds ("120") or an HTTP-date, taken relative to now (pass the
// response's Date when there is one; [CheckResponse] does). A date in the
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
