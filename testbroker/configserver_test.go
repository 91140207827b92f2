package testbroker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

func newConfigServer(t *testing.T) *testbroker.ConfigServer {
	s := testbroker.NewConfigServer()
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, url, etag string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func TestConfigServerServesWithETag(t *testing.T) {
	s := newConfigServer(t)
	s.SetConfig("", []byte(`{"heartbeat":"30s"}`))
	s.SetConfig("dev-7", []byte(`{"heartbeat":"5s"}`))

	resp, body := get(t, s.DeviceURL("dev-7"), "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.JSONEq(t, `{"heartbeat":"5s"}`, string(body))
	etag := resp.Header.Get("ETag")
	assert.Equal(t, s.ETag("dev-7"), etag)
	assert.NotEmpty(t, etag)

	resp, body = get(t, s.DeviceURL("dev-7"), etag)
	assert.Equal(t, 304, resp.StatusCode)
	assert.Empty(t, body)

	resp, body = get(t, s.DeviceURL("other"), "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.JSONEq(t, `{"heartbeat":"30s"}`, string(body))

	s.SetConfig("dev-7", []byte(`{"heartbeat":"6s"}`))
	resp, _ = get(t, s.DeviceURL("dev-7"), etag)
	assert.Equal(t, 200, resp.StatusCode, "a changed document no longer matches the old ETag")

	reqs := s.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []int{200, 304, 200, 200}, []int{reqs[0].Status, reqs[1].Status, reqs[2].Status, reqs[3].Status})
	assert.Equal(t, etag, reqs[1].IfNoneMatch)
}

func TestConfigServerFaults(t *testing.T) {
	now := time.Now()
	cases := []struct {
		fault     testbroker.Fault
		status    int
		retryable bool
		after     time.Duration // minimum parsed Retry-After
	}{
		{testbroker.Fault{Kind: testbroker.Unavailable, RetryAfter: 7 * time.Second}, 503, true, 7 * time.Second},
		{testbroker.Fault{Kind: testbroker.Unavailable, RetryAfter: 9 * time.Second, AsDate: true}, 503, true, 8 * time.Second},
		{testbroker.Fault{Kind: testbroker.TooManyRequests, RetryAfter: 3 * time.Second}, 429, true, 3 * time.Second},
		// the time left until the window ends, rounded up to whole seconds
		{testbroker.Fault{Kind: testbroker.TooManyRequests, RetryAtEnd: true, Until: now.Add(4500 * time.Millisecond)}, 429, true, 4 * time.Second},
		{testbroker.Fault{Kind: testbroker.InternalError}, 500, true, 0},
		{testbroker.Fault{Kind: testbroker.RateLimited403}, 403, true, 0},
		{testbroker.Fault{Kind: testbroker.Forbidden}, 403, false, 0},
		{testbroker.Fault{Kind: testbroker.NotFound}, 404, false, 0},
	}
	for _, c := range cases {
		t.Run(c.fault.Kind.String(), func(t *testing.T) {
			s := newConfigServer(t)
			s.SetConfig("", []byte(`{}`))
			c.fault.Times = 1
			require.NoError(t, s.AddFault(c.fault))
			resp, err := http.Get(s.DeviceURL("dev-1"))
			require.NoError(t, err)
			cerr := reconnect.CheckResponse(resp, now)
			resp.Body.Close()
			assert.Equal(t, c.status, resp.StatusCode)
			var he *reconnect.HTTPError
			require.ErrorAs(t, cerr, &he)
			assert.Equal(t, c.retryable, reconnect.IsRetryable(cerr))
			assert.GreaterOrEqual(t, he.RetryAfter, c.after)
			assert.LessOrEqual(t, he.RetryAfter, c.after+2*time.Second)

			// Times: 1 means the next request is served normally.
			resp2, _ := get(t, s.DeviceURL("dev-1"), "")
			assert.Equal(t, 200, resp2.StatusCode)
			reqs := s.Requests()
			assert.Equal(t, c.fault.Kind.String(), reqs[0].Fault)
			assert.Equal(t, "", reqs[1].Fault)
		})
	}
}

func TestConfigServerBrokenBodies(t *testing.T) {
	s := newConfigServer(t)
	s.SetConfig("", []byte(`{}`))
	s.OversizeBytes = 3 << 20
	require.NoError(t, s.AddFault(testbroker.Fault{Kind: testbroker.MalformedJSON, Times: 1}))
	require.NoError(t, s.AddFault(testbroker.Fault{Kind: testbroker.Oversized, Times: 1}))

	resp, body := get(t, s.DeviceURL("d"), "")
	assert.Equal(t, 200, resp.StatusCode)
	var v any
	assert.Error(t, json.Unmarshal(body, &v), "malformed JSON")

	resp, body = get(t, s.DeviceURL("d"), "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 3<<20, len(body))
	assert.NoError(t, json.Unmarshal(body, &v), "oversized but valid")
}

func TestConfigServerHangsUntilClientGivesUp(t *testing.T) {
	s := newConfigServer(t)
	require.NoError(t, s.AddFault(testbroker.Fault{Kind: testbroker.Hang}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.DeviceURL("d"), nil)
	_, err := http.DefaultClient.Do(req)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	require.NoError(t, s.AwaitRequests(1, bound))
	assert.Equal(t, 0, s.Requests()[0].Status)
	assert.Equal(t, "hang", s.Requests()[0].Fault)
}

func TestConfigServerFaultWindowAndDevices(t *testing.T) {
	s := newConfigServer(t)
	s.SetConfig("", []byte(`{}`))
	now := time.Now()
	require.NoError(t, s.AddFault(testbroker.Fault{Kind: testbroker.InternalError, Devices: []string{"a"}}))
	require.NoError(t, s.AddFault(testbroker.Fault{Kind: testbroker.Unavailable, Until: now.Add(-time.Second)})) // over
	require.NoError(t, s.AddFault(testbroker.Fault{Kind: testbroker.NotFound, From: now.Add(time.Hour)}))        // not yet
	r, _ := get(t, s.DeviceURL("a"), "")
	assert.Equal(t, 500, r.StatusCode)
	r, _ = get(t, s.DeviceURL("b"), "")
	assert.Equal(t, 200, r.StatusCode)
	s.ClearFaults()
	r, _ = get(t, s.DeviceURL("a"), "")
	assert.Equal(t, 200, r.StatusCode)
}

func TestConfigServerRejectsBadFaults(t *testing.T) {
	s := newConfigServer(t)
	now := time.Now()
	for _, f := range []testbroker.Fault{
		{Kind: testbroker.Unavailable, RetryAfter: -time.Second},
		{Kind: testbroker.Unavailable, Times: -1},
		{Kind: 99},
		{Kind: testbroker.Unavailable, From: now, Until: now.Add(-time.Second)},
		{Kind: testbroker.Unavailable, RetryAtEnd: true},
	} {
		assert.Error(t, s.AddFault(f), "%+v", f)
	}
	s.Close()
	s.Close() // harmless
}
