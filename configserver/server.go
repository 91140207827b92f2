// Package configserver is an HTTP server that serves each device its JSON
// configuration. It misbehaves on a schedule, as a cloud API has a bad
// minute. It can answer 503 and 429 with Retry-After: seconds, an
// HTTP-date, or the time left until the fault's end, as a maintenance page
// sends. It can answer 500, 403 with a rate-limit reason or without, and
// 404. It can hang, send malformed JSON, or send an oversized body. It
// records every request.
//
// A Server has httptest.Server's lifecycle: NewServer is NewUnstartedServer
// and Start. Fields are set before Start. Close blocks until every request
// has ended. StartInMemory serves on an in-process listener instead of a
// socket, so that a test runs it inside a testing/synctest bubble. A fault
// AddFault cannot apply is an error wrapping [ErrInvalid].
package configserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/memnet"
	"github.com/herdguard/herdguard/internal/waitfor"
)

// FaultKind is how the server misbehaves. The zero FaultKind is Unavailable.
// It is a plain value, safe to share.
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

// Fault is one entry in the server's fault schedule. It applies to
// requests that arrive in [From, Until) (zero values leave that end open),
// from the listed devices (all if empty), at most Times times (0: no limit).
// The zero Fault answers every request 503, without Retry-After, for ever.
// It is a plain value, safe to share while no one changes Devices: AddFault
// copies it, but not Devices, which must not change afterwards.
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

// Request is one request the server answered (or hung up on). The zero
// Request is not meaningful. Requests hands out copies: plain values, safe
// to share.
type Request struct {
	Time        time.Time
	Device      string
	Status      int    // 0 for a hang the client abandoned
	Fault       string // the fault served, "" for a normal answer
	IfNoneMatch string
}

// Server serves each device its JSON configuration at GET /config/{device},
// with an ETag (304 on If-None-Match), and misbehaves on a schedule. It
// records every request. Its methods are safe for concurrent use once it
// has started; its fields are set before Start and only read after. The
// zero value is not usable: use NewServer, NewMemoryServer or
// NewUnstartedServer.
type Server struct {
	// URL is the base URL, http://127.0.0.1:port (or http://config.mem in
	// memory), set by Start; a device's document is at DeviceURL.
	URL string
	// OversizeBytes is the body size of the Oversized fault: 2 MiB unless
	// set before Start.
	OversizeBytes int

	srv  *httptest.Server
	mem  *memnet.Listener // StartInMemory's listener, nil on TCP
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

// NewServer starts a Server on 127.0.0.1. The caller Closes it.
func NewServer() *Server {
	s := NewUnstartedServer()
	s.Start()
	return s
}

// NewMemoryServer starts a Server on an in-process listener. Reach it with
// Client. The caller Closes it.
func NewMemoryServer() *Server {
	s := NewUnstartedServer()
	s.StartInMemory()
	return s
}

// NewUnstartedServer returns a Server that serves nothing until Start or
// StartInMemory: set its fields first.
func NewUnstartedServer() *Server {
	s := &Server{docs: map[string]doc{}, done: make(chan struct{}), OversizeBytes: 2 << 20}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config/{device}", s.serve)
	s.srv = httptest.NewUnstartedServer(mux)
	return s
}

// Start serves on 127.0.0.1 and sets URL. It panics if the server was
// started already, as httptest's does.
func (s *Server) Start() {
	s.srv.Start()
	s.URL = s.srv.URL
}

// StartInMemory serves on an in-process listener (no socket, so it runs
// inside a testing/synctest bubble) and sets URL; Client reaches it.
func (s *Server) StartInMemory() {
	s.mem = memnet.Listen("config.mem")
	s.srv.Listener = s.mem
	s.Start()
}

// Client returns an HTTP client for the server, with room for conns
// connections: one that dials the in-process listener of a server started
// in memory, an ordinary one otherwise.
func (s *Server) Client(conns int) *http.Client {
	t := &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	if s.mem != nil {
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return s.mem.Dial(ctx) }
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// Close unblocks hanging requests and shuts the server down, blocking
// until every request has ended. It is idempotent.
func (s *Server) Close() {
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
func (s *Server) DeviceURL(device string) string { return s.URL + "/config/" + device }

// SetConfig sets the document served to device ("" sets the one served to
// every device without its own).
func (s *Server) SetConfig(device string, body []byte) {
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
func (s *Server) ETag(device string) string {
	d, ok := s.docFor(device)
	if !ok {
		return ""
	}
	return d.etag
}

// ErrInvalid: every invalid input (a Fault AddFault refuses) is an error
// wrapping it.
var ErrInvalid = errors.New("configserver: invalid input")

// AddFault appends f to the schedule; the first matching fault applies.
func (s *Server) AddFault(f Fault) error {
	if f.RetryAfter < 0 || f.Times < 0 {
		return fmt.Errorf("%w: fault needs RetryAfter >= 0 and Times >= 0, got %+v", ErrInvalid, f)
	}
	if f.RetryAtEnd && f.Until.IsZero() {
		return fmt.Errorf("%w: a fault that sends the time left until its end needs an Until", ErrInvalid)
	}
	if f.Kind < Unavailable || f.Kind > Oversized {
		return fmt.Errorf("%w: unknown fault kind %d", ErrInvalid, f.Kind)
	}
	if !f.Until.IsZero() && f.Until.Before(f.From) {
		return fmt.Errorf("%w: fault window ends (%v) before it starts (%v)", ErrInvalid, f.Until, f.From)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
	return nil
}

// ClearFaults empties the schedule.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns a copy of every request recorded so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Await blocks until cond holds for the number of requests recorded, ctx
// ends (ctx.Err()), or timeout passes. cond runs with the server locked
// after every request: it must be quick and must not call the Server.
func (s *Server) Await(ctx context.Context, timeout time.Duration, cond func(requests int) bool) error {
	err := waitfor.UntilContext(ctx, &s.mu, &s.changed, timeout, func() bool { return cond(len(s.requests)) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("configserver: condition not met after %v; %d requests", timeout, len(s.Requests()))
}

func (s *Server) docFor(device string) (doc, bool) {
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
func (s *Server) faultFor(device string, now time.Time) *Fault {
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

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	s.changed.Notify()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	device := r.PathValue("device")
	req := Request{Time: now, Device: device, IfNoneMatch: r.Header.Get("If-None-Match")}
	status := s.respond(w, r, device, now, &req)
	req.Status = status
	s.record(req)
}

// respond writes the answer and returns the status sent (0: none).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, device string, now time.Time, req *Request) int {
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

func (s *Server) misbehave(w http.ResponseWriter, r *http.Request, f *Fault, now time.Time) int {
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
