package remoteconfig_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/remoteconfig"
)

// t0 is the fetcher's clock at the start of each test.
var t0 = time.Unix(1_700_000_000, 0)

// bound is how long a round may take in real time before a test fails.
const bound = 10 * time.Second

const goodDoc = `{"reconnect":{"base":"1s","jitter":"1s","max_backoff":"64s"},"heartbeat_interval":"30s"}`

type fetchRig struct {
	srv     *configserver.Server
	clock   *fakeclock.Clock
	f       *remoteconfig.Fetcher
	applied chan remoteconfig.Document
	events  chan device.Event
}

func newFetchRig(t *testing.T, store remoteconfig.Store) *fetchRig {
	return newFetchRigWith(t, store, nil)
}

func newFetchRigWith(t *testing.T, store remoteconfig.Store, mod func(*remoteconfig.Config)) *fetchRig {
	srv := configserver.NewServer()
	t.Cleanup(srv.Close)
	r := &fetchRig{srv: srv, clock: fakeclock.New(t0), applied: make(chan remoteconfig.Document, 10), events: make(chan device.Event, 10)}
	cfg := remoteconfig.Config{URL: srv.DeviceURL("dev-1"), AllowPlaintext: true, Clock: r.clock, Source: rand.NewPCG(3, 3),
		Store: store, OnApply: func(c remoteconfig.Document) { r.applied <- c }, OnEvent: func(e device.Event) { r.events <- e }}
	if mod != nil {
		mod(&cfg)
	}
	var err error
	r.f, err = remoteconfig.New(cfg)
	require.NoError(t, err)
	return r
}

// fetch runs one round in the background, advancing the fake clock through
// each retry wait, and returns the round's error and the waits it took.
func (r *fetchRig) fetch(t *testing.T) (error, []time.Duration) {
	done := make(chan error, 1)
	go func() { done <- r.f.Fetch(context.Background()) }()
	var waits []time.Duration
	deadline := time.Now().Add(bound)
	for {
		select {
		case err := <-done:
			return err, waits
		default:
		}
		require.True(t, time.Now().Before(deadline), "fetch round did not finish")
		p, err := r.clock.WaitTimers(1, 50*time.Millisecond)
		if err != nil {
			continue // no wait pending yet: the request is in flight or the round is done
		}
		waits = append(waits, p[0])
		r.clock.Advance(p[0])
	}
}

func TestFetchAppliesThenNotModified(t *testing.T) {
	r := newFetchRig(t, nil)
	r.srv.SetConfig("dev-1", []byte(goodDoc))
	err, waits := r.fetch(t)
	require.NoError(t, err)
	assert.Empty(t, waits)
	c := <-r.applied
	assert.Equal(t, remoteconfig.Duration(64*time.Second), c.Reconnect.MaxBackoff)
	p, err := c.Policy()
	require.NoError(t, err)
	assert.Equal(t, 64*time.Second, p.Delay(30, 0, 0.5))

	err, _ = r.fetch(t)
	require.NoError(t, err)
	reqs := r.srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, 304, reqs[1].Status)
	assert.Equal(t, r.srv.ETag("dev-1"), reqs[1].IfNoneMatch)
	assert.Len(t, r.applied, 0, "304 applies nothing new")
	got, ok := r.f.Current()
	assert.True(t, ok)
	assert.Equal(t, c, got)
}

func TestFetch503RetryAfterWaitsAtLeastHint(t *testing.T) {
	r := newFetchRig(t, nil)
	r.srv.SetConfig("dev-1", []byte(goodDoc))
	require.NoError(t, r.srv.AddFault(configserver.Fault{Kind: configserver.Unavailable, RetryAfter: 7 * time.Second, Times: 1}))
	err, waits := r.fetch(t)
	require.NoError(t, err)
	require.Len(t, waits, 1)
	assert.GreaterOrEqual(t, waits[0], 7*time.Second)
	assert.Len(t, r.srv.Requests(), 2)
}

func TestFetchRetryAfterJitterIsConfigurable(t *testing.T) {
	for _, tc := range []struct {
		jitter   time.Duration
		min, max time.Duration
	}{
		{-1, 7 * time.Second, 7 * time.Second},               // none: the hint exactly
		{3 * time.Second, 7 * time.Second, 10 * time.Second}, // up to 3 s on top
		{0, 7 * time.Second, 14 * time.Second},               // the default: up to the hint again
	} {
		var notices []reconnect.Notice
		r := newFetchRigWith(t, nil, func(c *remoteconfig.Config) {
			c.Retry.RetryAfterJitter = tc.jitter
			c.Retry.Notify = func(n reconnect.Notice) { notices = append(notices, n) }
		})
		r.srv.SetConfig("dev-1", []byte(goodDoc))
		require.NoError(t, r.srv.AddFault(configserver.Fault{Kind: configserver.Unavailable, RetryAfter: 7 * time.Second, Times: 1}))
		err, waits := r.fetch(t)
		require.NoError(t, err)
		require.Len(t, waits, 1)
		assert.GreaterOrEqual(t, waits[0], tc.min, "jitter %v", tc.jitter)
		assert.LessOrEqual(t, waits[0], tc.max, "jitter %v", tc.jitter)
		require.Len(t, notices, 1, "the caller's Notify beside the fetcher's log")
		assert.Equal(t, 7*time.Second, notices[0].Hint)
		assert.Equal(t, waits[0], notices[0].Delay)
	}
}

// The device's clock (t0, years before the server's) does not matter: an
// HTTP-date hint is measured against the response's Date, and the wait is the
// hint plus jitter, never the 5-minute cap.
func TestFetchRetryAfterDateWithoutRealTimeClock(t *testing.T) {
	r := newFetchRig(t, nil)
	r.srv.SetConfig("dev-1", []byte(goodDoc))
	require.NoError(t, r.srv.AddFault(configserver.Fault{Kind: configserver.Unavailable, RetryAfter: 9 * time.Second, AsDate: true, Times: 1}))
	err, waits := r.fetch(t)
	require.NoError(t, err)
	require.Len(t, waits, 1)
	// The date is sent in whole seconds, rounded up: a hint of 9 or 10 s.
	assert.GreaterOrEqual(t, waits[0], 9*time.Second)
	assert.Less(t, waits[0], 20*time.Second)
}

// A 501 is a 5xx like the others: retried.
func TestFetchRetries501(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusNotImplemented)
			return
		}
		_, _ = w.Write([]byte(goodDoc))
	}))
	defer srv.Close()
	r := &fetchRig{clock: fakeclock.New(t0)}
	var err error
	r.f, err = remoteconfig.New(remoteconfig.Config{URL: srv.URL, AllowPlaintext: true, Clock: r.clock, Source: rand.NewPCG(3, 3)})
	require.NoError(t, err)
	err, waits := r.fetch(t)
	require.NoError(t, err)
	assert.Len(t, waits, 1)
	assert.Equal(t, int32(2), calls.Load())
}

func TestFetchRetriesRateLimit403ButNot404(t *testing.T) {
	r := newFetchRig(t, nil)
	r.srv.SetConfig("dev-1", []byte(goodDoc))
	require.NoError(t, r.srv.AddFault(configserver.Fault{Kind: configserver.RateLimited403, Times: 2}))
	err, waits := r.fetch(t)
	require.NoError(t, err)
	require.Len(t, waits, 2)
	assert.GreaterOrEqual(t, waits[0], time.Second)
	assert.GreaterOrEqual(t, waits[1], 2*time.Second)

	r2 := newFetchRig(t, nil)
	require.NoError(t, r2.srv.AddFault(configserver.Fault{Kind: configserver.NotFound}))
	err, waits = r2.fetch(t)
	assert.ErrorIs(t, err, reconnect.ErrPermanent)
	assert.Empty(t, waits)
	assert.Len(t, r2.srv.Requests(), 1, "404 is not retried")
}

func TestFetchGivesUpAfterFiveRetries(t *testing.T) {
	r := newFetchRig(t, nil)
	require.NoError(t, r.srv.AddFault(configserver.Fault{Kind: configserver.InternalError}))
	err, waits := r.fetch(t)
	assert.ErrorIs(t, err, reconnect.ErrExhausted)
	require.Len(t, waits, 5)
	for i, w := range waits {
		low := time.Duration(1<<i) * time.Second
		assert.GreaterOrEqual(t, w, low)
		assert.Less(t, w, low+time.Second)
	}
	assert.Len(t, r.srv.Requests(), 6)
}

func TestBadDocumentsKeepLastGoodConfig(t *testing.T) {
	cases := map[string]func(*configserver.Server){
		"malformed JSON": func(s *configserver.Server) {
			_ = s.AddFault(configserver.Fault{Kind: configserver.MalformedJSON, Times: 1})
		},
		"oversized": func(s *configserver.Server) {
			_ = s.AddFault(configserver.Fault{Kind: configserver.Oversized, Times: 1})
		},
		"hostile: jitter zero": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"reconnect":{"base":"1s","jitter":"0s","max_backoff":"32s"}}`))
		},
		"hostile: no backoff": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"reconnect":{"base":"1ms","jitter":"1s","max_backoff":"1ms"}}`))
		},
		"hostile: poll every second": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"refresh_interval":"1s"}`))
		},
		"wrong type": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"heartbeat_interval":30}`))
		},
		"unknown key": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"reconect":{}}`))
		},
		// encoding/json would take each of these: the last of two keys
		// wins, keys match in any case, a trailing } goes unread, and null
		// is the zero config.
		"strict: a key twice": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"heartbeat_interval":"30s","heartbeat_interval":"5s"}`))
		},
		"strict: keys differing only in case": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"heartbeat_interval":"30s","Heartbeat_Interval":"5s"}`))
		},
		"strict: a key in another case": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"HEARTBEAT_INTERVAL":"5s"}`))
		},
		"strict: a nested key in another case": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"reconnect":{"Base":"1s","jitter":"1s","max_backoff":"64s"}}`))
		},
		"strict: a settings key twice": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"settings":{"mode":"a","mode":"b"}}`))
		},
		"strict: a trailing brace": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"heartbeat_interval":"5s"}}`))
		},
		"strict: a second document": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"heartbeat_interval":"5s"} {}`))
		},
		"strict: null": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`null`))
		},
		"strict: a null key": func(s *configserver.Server) {
			s.SetConfig("dev-1", []byte(`{"reconnect":null}`))
		},
		"strict: nested too deep": func(s *configserver.Server) {
			deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
			s.SetConfig("dev-1", []byte(`{"settings":{"x":`+deep+`}}`))
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			r := newFetchRig(t, nil)
			r.srv.SetConfig("dev-1", []byte(goodDoc))
			err, _ := r.fetch(t)
			require.NoError(t, err)
			good := <-r.applied
			<-r.events

			breakIt(r.srv)
			err, waits := r.fetch(t)
			require.Error(t, err)
			assert.Empty(t, waits, "a bad document is not retried")
			e := <-r.events
			assert.Equal(t, device.EventConfigRejected, e.Kind)
			cur, ok := r.f.Current()
			assert.True(t, ok)
			assert.Equal(t, good, cur, "the last good config stays in force")
		})
	}
}

func TestConfigSurvivesRestart(t *testing.T) {
	store := remoteconfig.FileStore{Path: filepath.Join(t.TempDir(), "config.json")}
	r := newFetchRig(t, store)
	r.srv.SetConfig("dev-1", []byte(goodDoc))
	err, _ := r.fetch(t)
	require.NoError(t, err)

	again, err := remoteconfig.New(remoteconfig.Config{URL: r.srv.DeviceURL("dev-1"), AllowPlaintext: true, Store: store})
	require.NoError(t, err)
	c, ok := again.Current()
	require.True(t, ok, "loaded from the store")
	assert.Equal(t, remoteconfig.Duration(30*time.Second), c.HeartbeatInterval)

	require.NoError(t, os.WriteFile(store.Path, []byte("{garbage"), 0o644))
	broken, err := remoteconfig.New(remoteconfig.Config{URL: r.srv.DeviceURL("dev-1"), AllowPlaintext: true, Store: store})
	require.NoError(t, err, "an unreadable store is logged, not fatal")
	_, ok = broken.Current()
	assert.False(t, ok)
}

func TestRefreshIsJitteredPerDevice(t *testing.T) {
	waits := map[time.Duration]bool{}
	for i := uint64(0); i < 50; i++ {
		f, err := remoteconfig.New(remoteconfig.Config{URL: "http://127.0.0.1:1/config/x", AllowPlaintext: true, Source: rand.NewPCG(i, 9)})
		require.NoError(t, err)
		w := f.NextRefresh()
		assert.GreaterOrEqual(t, w, 45*time.Minute)
		assert.Less(t, w, 75*time.Minute)
		waits[w] = true
	}
	assert.Len(t, waits, 50, "no two devices poll in step")
}

func TestFetcherRejectsBadConfig(t *testing.T) {
	_, err := remoteconfig.New(remoteconfig.Config{})
	assert.ErrorIs(t, err, remoteconfig.ErrInvalid)
	_, err = remoteconfig.New(remoteconfig.Config{URL: "http://x", Refresh: -1})
	assert.ErrorIs(t, err, remoteconfig.ErrInvalid)
	_, err = remoteconfig.New(remoteconfig.Config{URL: "http://x", AllowPlaintext: true, Retry: reconnect.Retry{Clock: fakeclock.New(t0)}})
	assert.ErrorIs(t, err, remoteconfig.ErrInvalid)
	assert.ErrorContains(t, err, "set Config.Clock and Source")
}

// An ETag is kept only if it is short and visible ASCII: a server that
// sends a long one has its config applied and stored all the same, the
// stored config survives a restart, and the next fetch is unconditional.
// One whose headers run past 64 KiB is refused whole, and the last good
// config stays.
func TestALongETagIsNotKept(t *testing.T) {
	var etag atomic.Pointer[string]
	var conditional atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" {
			conditional.Add(1)
		}
		w.Header().Set("ETag", *etag.Load())
		_, _ = w.Write([]byte(goodDoc))
	}))
	t.Cleanup(srv.Close)
	store := remoteconfig.FileStore{Path: filepath.Join(t.TempDir(), "config.json")}
	once, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 0})
	require.NoError(t, err)
	fetcher := func() *remoteconfig.Fetcher {
		f, err := remoteconfig.New(remoteconfig.Config{URL: srv.URL, AllowPlaintext: true, Store: store, Source: rand.NewPCG(1, 1),
			Retry: reconnect.Retry{Policy: once}})
		require.NoError(t, err)
		return f
	}
	for _, long := range []string{`"` + strings.Repeat("e", remoteconfig.MaxETagBytes-1) + `"`, "\"a\tb\"", `"` + strings.Repeat("e", 4<<10) + `"`} {
		etag.Store(&long)
		f := fetcher()
		require.NoError(t, f.Fetch(context.Background()))
		require.NoError(t, f.Fetch(context.Background()))
		_, ok := fetcher().Current()
		assert.True(t, ok, "the stored config survives a restart")
	}
	assert.Equal(t, int32(0), conditional.Load(), "no ETag was kept to send back")

	fine := `"v1"`
	etag.Store(&fine)
	f := fetcher()
	require.NoError(t, f.Fetch(context.Background()))
	require.NoError(t, f.Fetch(context.Background()))
	assert.Equal(t, int32(1), conditional.Load(), "a short one is sent back")

	huge := `"` + strings.Repeat("e", 4<<20) + `"`
	etag.Store(&huge)
	err = f.Fetch(context.Background())
	require.ErrorContains(t, err, "server response headers exceeded")
	_, ok := fetcher().Current()
	assert.True(t, ok, "the last good config stays")
}
