package configserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/reconnect"
)

// bound is how long a test waits for a request it caused: far beyond any
// real answer, so that a failure means it never came.
const bound = time.Minute

func newConfigServer(t *testing.T) *configserver.Server {
	s := configserver.NewServer()
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

func TestServesWithETag(t *testing.T) {
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

func TestFaults(t *testing.T) {
	now := time.Now()
	cases := []struct {
		fault     configserver.Fault
		status    int
		retryable bool
		after     time.Duration // minimum parsed Retry-After
	}{
		{configserver.Fault{Kind: configserver.Unavailable, RetryAfter: 7 * time.Second}, 503, true, 7 * time.Second},
		{configserver.Fault{Kind: configserver.Unavailable, RetryAfter: 9 * time.Second, AsDate: true}, 503, true, 8 * time.Second},
		{configserver.Fault{Kind: configserver.TooManyRequests, RetryAfter: 3 * time.Second}, 429, true, 3 * time.Second},
		// the time left until the window ends, rounded up to whole seconds
		{configserver.Fault{Kind: configserver.TooManyRequests, RetryAtEnd: true, Until: now.Add(4500 * time.Millisecond)}, 429, true, 4 * time.Second},
		{configserver.Fault{Kind: configserver.InternalError}, 500, true, 0},
		{configserver.Fault{Kind: configserver.RateLimited403}, 403, true, 0},
		{configserver.Fault{Kind: configserver.Forbidden}, 403, false, 0},
		{configserver.Fault{Kind: configserver.NotFound}, 404, false, 0},
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

func TestBrokenBodies(t *testing.T) {
	s := configserver.NewUnstartedServer()
	s.OversizeBytes = 3 << 20 // before Start, as httptest's fields are set
	s.Start()
	t.Cleanup(s.Close)
	s.SetConfig("", []byte(`{}`))
	require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.MalformedJSON, Times: 1}))
	require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.Oversized, Times: 1}))

	resp, body := get(t, s.DeviceURL("d"), "")
	assert.Equal(t, 200, resp.StatusCode)
	var v any
	assert.Error(t, json.Unmarshal(body, &v), "malformed JSON")

	resp, body = get(t, s.DeviceURL("d"), "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 3<<20, len(body))
	assert.NoError(t, json.Unmarshal(body, &v), "oversized but valid")
}

func TestHangsUntilClientGivesUp(t *testing.T) {
	s := newConfigServer(t)
	require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.Hang}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.DeviceURL("d"), nil)
	_, err := http.DefaultClient.Do(req)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	require.NoError(t, s.Await(context.Background(), bound, func(n int) bool { return n >= 1 }))
	assert.Equal(t, 0, s.Requests()[0].Status)
	assert.Equal(t, "hang", s.Requests()[0].Fault)
}

func TestFaultWindowAndDevices(t *testing.T) {
	s := newConfigServer(t)
	s.SetConfig("", []byte(`{}`))
	now := time.Now()
	require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.InternalError, Devices: []string{"a"}}))
	// over
	require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.Unavailable, Until: now.Add(-time.Second)}))
	// not yet
	require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.NotFound, From: now.Add(time.Hour)}))
	r, _ := get(t, s.DeviceURL("a"), "")
	assert.Equal(t, 500, r.StatusCode)
	r, _ = get(t, s.DeviceURL("b"), "")
	assert.Equal(t, 200, r.StatusCode)
	s.ClearFaults()
	r, _ = get(t, s.DeviceURL("a"), "")
	assert.Equal(t, 200, r.StatusCode)
}

func TestRejectsBadFaults(t *testing.T) {
	s := newConfigServer(t)
	now := time.Now()
	for _, f := range []configserver.Fault{
		{Kind: configserver.Unavailable, RetryAfter: -time.Second},
		{Kind: configserver.Unavailable, Times: -1},
		{Kind: 99},
		{Kind: configserver.Unavailable, From: now, Until: now.Add(-time.Second)},
		{Kind: configserver.Unavailable, RetryAtEnd: true},
	} {
		assert.Error(t, s.AddFault(f), "%+v", f)
	}
	s.Close()
	s.Close() // harmless
}

// In memory the server runs inside a synctest bubble, where a maintenance
// window's Retry-After is exact: the time left until the window ends.
func TestInMemoryInsideABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := configserver.NewMemoryServer()
		defer s.Close()
		s.SetConfig("", []byte(`{"reconnect":{}}`))
		end := time.Now().Add(90 * time.Second)
		require.NoError(t, s.AddFault(configserver.Fault{Kind: configserver.Unavailable, RetryAtEnd: true, Until: end}))
		c := s.Client(1)
		defer c.CloseIdleConnections()

		time.Sleep(30 * time.Second)
		resp, err := c.Get(s.DeviceURL("dev-1"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "60", resp.Header.Get("Retry-After"), "the time left until the window ends")

		time.Sleep(60 * time.Second)
		resp, err = c.Get(s.DeviceURL("dev-1"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, s.Await(context.Background(), time.Second, func(n int) bool { return n == 2 }))

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, s.Await(ctx, time.Hour, func(n int) bool { return n == 3 }), context.Canceled)
		assert.ErrorContains(t, s.Await(context.Background(), time.Second, func(n int) bool { return n == 3 }), "2 requests")
	})
}

// Every fault AddFault refuses is an error wrapping ErrInvalid.
func TestAddFaultRefusesWhatCannotHappen(t *testing.T) {
	s := configserver.NewServer()
	defer s.Close()
	for name, f := range map[string]configserver.Fault{
		"negative retry-after":    {Kind: configserver.Unavailable, RetryAfter: -time.Second},
		"negative times":          {Kind: configserver.Unavailable, Times: -1},
		"time left without until": {Kind: configserver.Unavailable, RetryAtEnd: true},
		"unknown kind":            {Kind: 99},
		"ends before it starts":   {Kind: configserver.Unavailable, From: time.Unix(100, 0), Until: time.Unix(50, 0)},
	} {
		assert.ErrorIs(t, s.AddFault(f), configserver.ErrInvalid, name)
	}
}
