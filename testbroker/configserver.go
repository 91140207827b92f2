package testbroker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/waitfor"
)

// FaultKind is how the config server misbehaves.
type FaultKind int

const (
	Unavailable     FaultKind = iota // 503, with Retry-After if set
	TooManyRequests                  // 429, with Retry-After if set
	InternalError                    // 500
	RateLimited403                   // 403 with a Google-style rateLimitExceeded body
	Forbidden                        // 403 with no rate-limit reason (not retryable)
	NotFound                         // 404
	Hang                             // never answer; ends when the client gives up
	MalformedJSON                    // 200 with a truncated JSON body
	Oversized                        // 200 with a body of OversizeBytes
)

var faultNames = map[FaultKind]string{
	Unavailable: "503", TooManyRequests: "429", InternalError: "500", RateLimited403: "403-rate-limit",
	Forbidden: "403", NotFound: "404", Hang: "hang", MalformedJSON: "malformed-json", Oversized: "oversized",
}

func (k FaultKind) String() string {
	if s, ok := faultNames[k]; ok {
		return s
	}
	return "fault(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one entry in the config server's fault schedule. It applies to
// requests that arrive in [From, Until) (zero values leave that end open),
// from the listed devices (all if empty), at most Times times (0: no limit).
type Fault struct {
	Kind       FaultKind
	RetryAfter time.Duration // sent with 503 and 429 when > 0
	// RetryAtEnd sends, instead of RetryAfter, the time left until Until,
	// as a maintenance page does: every device gets the same instant.
	RetryAtEnd bool
	AsDate     bool // send Retry-After as an HTTP-date instead of seconds
	From       time.Time
	Until      time.Time
	Devices    []string
	Times      int
}

// Request is one request the config server answered (or hung up on).
type Request struct {
	Time        time.Time
	Device      string
	Status      int    // 0 for a hang the client abandoned
	Fault       string // the fault served, "" for a normal answer
	IfNoneMatch string
}

// ConfigServer serves each device its JSON configuration at
// GET /config/{device}, with an ETag (304 on If-None-Match), and misbehaves on
// a schedule. It records every request. Safe for concurrent use.
type ConfigServer struct {
	// URL is the base URL, e.g. http://127.0.0.1:port; a device's document is
	// at URL + "/config/" + device.
	URL string
	// OversizeBytes is the body size for the Oversized fault (default 2 MiB).
	OversizeBytes int

	srv  *httptest.Server
	mem  *memListener // NewMemoryConfigServer's listener, nil on TCP
	done chan struct{}

	mu       sync.Mutex
	docs     map[string]doc
	fallback *doc
	faults   []*Fault
	requests []Request
	changed  waitfor.Broadcast
}

type doc struct {
	body []byte
	etag string
}

// NewConfigServer starts a config server on 127.0.0.1.
func NewConfigServer() *ConfigServer {
	s := newConfigServer()
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// NewMemoryConfigServer starts a config server on an in-process listener:
// no socket, so it runs inside a testing/synctest bubble (a real socket's
// Accept is not a wait synctest can see). Reach it with Client.
func NewMemoryConfigServer() *ConfigServer {
	s := newConfigServer()
	s.mem = newMemListener("config.mem")
	s.srv.Listener = s.mem
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

func newConfigServer() *ConfigServer {
	s := &ConfigServer{docs: map[string]doc{}, done: make(chan struct{}), OversizeBytes: 2 << 20}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config/{device}", s.serve)
	s.srv = httptest.NewUnstartedServer(mux)
	return s
}

// Client returns an HTTP client for the server, with room for conns
// connections: one that dials the in-process listener of a
// NewMemoryConfigServer, an ordinary one otherwise.
func (s *ConfigServer) Client(conns int) *http.Client {
	t := &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	if s.mem != nil {
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return s.mem.dial(ctx) }
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// Close unblocks hanging requests and shuts the server down.
func (s *ConfigServer) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// DeviceURL is the address of one device's configuration.
func (s *ConfigServer) DeviceURL(device string) string { return s.URL + "/config/" + device }

// SetConfig sets the document served to device ("" sets the one served to
// every device without its own).
func (s *ConfigServer) SetConfig(device string, body []byte) {
	sum := sha256.Sum256(body)
	d := doc{body: append([]byte(nil), body...), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	s.mu.Lock()
	defer s.mu.Unlock()
	if device == "" {
		s.fallback = &d
	} else {
		s.docs[device] = d
	}
}

// ETag returns the ETag served with device's current document.
func (s *ConfigServer) ETag(device string) string {
	d, ok := s.docFor(device)
	if !ok {
		return ""
	}
	return d.etag
}

// AddFault appends f to the schedule; the first matching fault applies.
func (s *ConfigServer) AddFault(f Fault) error {
	if f.RetryAfter < 0 || f.Times < 0 {
		return fmt.Errorf("testbroker: fault needs RetryAfter >= 0 and Times >= 0, got %+v", f)
	}
	if f.RetryAtEnd && f.Until.IsZero() {
		return fmt.Errorf("testbroker: a fault that sends the time left until its end needs an Until")
	}
	if f.Kind < Unavailable || f.Kind > Oversized {
		return fmt.Errorf("testbroker: unknown fault kind %d", f.Kind)
	}
	if !f.Until.IsZero() && f.Until.Before(f.From) {
		return fmt.Errorf("testbroker: fault window ends (%v) before it starts (%v)", f.Until, f.From)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
	return nil
}

// ClearFaults empties the schedule.
func (s *ConfigServer) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns a copy of every request recorded so far.
func (s *ConfigServer) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// AwaitRequests blocks until at least n requests are recorded, or fails after
// the real-time bound timeout.
func (s *ConfigServer) AwaitRequests(n int, timeout time.Duration) error {
	if err := waitfor.Until(&s.mu, &s.changed, timeout, func() bool { return len(s.requests) >= n }); err != nil {
		return fmt.Errorf("testbroker: %d config requests after %v, want %d", len(s.Requests()), timeout, n)
	}
	return nil
}

func (s *ConfigServer) docFor(device string) (doc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.docs[device]; ok {
		return d, true
	}
	if s.fallback != nil {
		return *s.fallback, true
	}
	return doc{}, false
}

// faultFor takes the first scheduled fault matching this request.
func (s *ConfigServer) faultFor(device string, now time.Time) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if (!f.From.IsZero() && now.Before(f.From)) || (!f.Until.IsZero() && !now.Before(f.Until)) {
			continue
		}
		if len(f.Devices) > 0 && !contains(f.Devices, device) {
			continue
		}
		if f.Times < 0 {
			continue // used up
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				f.Times = -1
			}
		}
		return f
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (s *ConfigServer) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	s.changed.Notify()
}

func (s *ConfigServer) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	device := r.PathValue("device")
	req := Request{Time: now, Device: device, IfNoneMatch: r.Header.Get("If-None-Match")}
	status := s.respond(w, r, device, now, &req)
	req.Status = status
	s.record(req)
}

// respond writes the answer and returns the status sent (0: none).
func (s *ConfigServer) respond(w http.ResponseWriter, r *http.Request, device string, now time.Time, req *Request) int {
	if f := s.faultFor(device, now); f != nil {
		req.Fault = f.Kind.String()
		return s.misbehave(w, r, f, now)
	}
	d, ok := s.docFor(device)
	if !ok {
		http.NotFound(w, r)
		return http.StatusNotFound
	}
	w.Header().Set("ETag", d.etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, d.etag) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(d.body)
	return http.StatusOK
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

func (s *ConfigServer) misbehave(w http.ResponseWriter, r *http.Request, f *Fault, now time.Time) int {
	retryAfter := func() {
		hint := f.RetryAfter
		if f.RetryAtEnd {
			hint = max(f.Until.Sub(now), time.Nanosecond)
		}
		if hint <= 0 {
			return
		}
		if f.AsDate {
			// HTTP-dates have whole seconds: round up so the hint is never short.
			w.Header().Set("Retry-After", now.Add(hint+time.Second-1).UTC().Format(http.TimeFormat))
		} else {
			w.Header().Set("Retry-After", strconv.Itoa(int((hint+time.Second-1)/time.Second)))
		}
	}
	switch f.Kind {
	case Unavailable:
		retryAfter()
		w.WriteHeader(http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	case TooManyRequests:
		retryAfter()
		w.WriteHeader(http.StatusTooManyRequests)
		return http.StatusTooManyRequests
	case InternalError:
		w.WriteHeader(http.StatusInternalServerError)
		return http.StatusInternalServerError
	case RateLimited403, Forbidden:
		reason := "forbidden"
		if f.Kind == RateLimited403 {
			reason = "rateLimitExceeded"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"error":{"code":403,"message":"%s","errors":[{"domain":"usageLimits","reason":"%s"}]}}`, reason, reason)
		return http.StatusForbidden
	case NotFound:
		http.NotFound(w, r)
		return http.StatusNotFound
	case Hang:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return 0
	case MalformedJSON:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"reconnect":{"max_backoff":`))
		return http.StatusOK
	case Oversized:
		w.Header().Set("Content-Type", "application/json")
		pad := strings.Repeat("x", max(s.OversizeBytes-len(`{"pad":""}`), 0))
		_, _ = w.Write([]byte(`{"pad":"` + pad + `"}`))
		return http.StatusOK
	}
	w.WriteHeader(http.StatusInternalServerError)
	return http.StatusInternalServerError
}
