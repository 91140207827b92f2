package remoteconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/endpoint"
	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/reconnect"
)

// Config configures a Fetcher. URL is required: the zero
// Config is invalid and New refuses it. New copies it,
// with its Client and Bounds; Store and Source are used as given, so do not
// share a Source.
type Config struct {
	// URL is the device's configuration document: https, unless
	// AllowPlaintext. A configuration tunes the device's reconnects, so it is
	// taken only from a server the device can authenticate.
	URL string
	// TLS is used for https (nil: the system pool): a private CA's pool
	// and, for mutual TLS, the device certificate, as for the broker (see
	// LoadTLS). It applies to the default client only: set it or Client.
	// As for the broker, TLS is 1.2 or later and InsecureSkipVerify is
	// refused.
	TLS *tls.Config
	// AllowPlaintext accepts an http:// URL (a lab, a server on the same
	// host): anyone on the path could then rewrite the device's settings
	// within Bounds.
	AllowPlaintext bool
	// Client, if set, makes the requests (nil: a client with a 30 s
	// timeout). Whichever client is used, a redirect is followed only to
	// https on the URL's own host. With AllowPlaintext, a redirect to the
	// URL's own scheme is followed too. TLS is 1.2 or later with the server
	// verified. New refuses a Client whose *http.Transport skips
	// verification. New raises a lower MinVersion on a copy of that
	// transport. A response over a weaker connection (from a RoundTripper
	// it cannot look into) is refused unread. The request, with any token
	// in URL, has gone out over it by then.
	Client *http.Client
	// Retry times a round's retries as reconnect.Do does. It uses its
	// Policy, MaxRetryAfter, RetryAfterJitter, Retryable and Notify. A nil
	// Policy means IoTCore, 1 s base, 1000 ms jitter, 32 s cap, 5 retries:
	// 1, 2, 4, 8, 16 s plus jitter. A Retry-After is a floor:
	// RetryAfterJitter 0 waits a hint h for h + U[0, min(h, 1 min)). A nil
	// Retryable means 429, every 5xx and a 403 whose body names a rate
	// limit. Notify is called beside the fetcher's own log line. Its Clock
	// and Source must be nil: the fetcher's Clock and Source time its
	// refresh too.
	Retry reconnect.Retry
	// Refresh is the time between rounds unless the config sets its own (0:
	// 1 h). Each wait is jittered to Refresh x U[0.75, 1.25), so a fleet
	// does not poll in step. The first round waits U[0, FirstSpread) (0:
	// 10 s).
	Refresh     time.Duration
	FirstSpread time.Duration
	Bounds      *Bounds // nil: DefaultBounds
	Store       Store   // nil: nothing survives a restart
	Clock       reconnect.Clock
	Source      rand.Source
	Logger      *slog.Logger
	// OnEvent receives device.EventConfigApplied and
	// device.EventConfigRejected. It must not block.
	OnEvent func(device.Event)
	OnApply func(Document) // called with each newly applied config
}

// Fetcher keeps a device's configuration fresh over HTTP. It GETs with
// If-None-Match. It retries 429, every 5xx and a 403 whose body names a
// rate limit, with backoff. It takes a Retry-After as a floor and adds
// jitter on top. By reconnect.Retry.RetryAfterJitter's default, a hint h is
// waited h + U[0, min(h, 1 min)). It measures an HTTP-date against the
// response's Date, so that a device without a real-time clock waits what
// the server meant. It rejects bad documents and keeps the last good one.
// Its methods are safe for concurrent use. The zero value is not usable:
// use New.
type Fetcher struct {
	cfg    Config
	shown  string // the URL as logs and errors show it
	https  bool   // the URL is https: so must every answer be
	bounds Bounds
	log    *slog.Logger
	clock  reconnect.Clock

	mu      sync.Mutex
	src     rand.Source
	current *Document
	etag    string
}

// New validates cfg and loads the stored configuration, if any. A
// stored file that is not the device's own (an error wrapping
// ErrNotPrivate) fails it: the device neither reads nor replaces it. One
// it cannot read or parse is logged, and the device starts without it.
func New(cfg Config) (*Fetcher, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("%w: Config.URL is required", ErrInvalid)
	}
	u, err := endpoint.ParseURL("Config.URL", cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch {
	case u.Scheme == "http" && !cfg.AllowPlaintext:
		return nil, fmt.Errorf("%w: Config.URL %s is plain http: anyone on the path could rewrite the device's settings; "+
			"use https, or set AllowPlaintext", ErrInvalid, redactQuery(u))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: Config.URL scheme %q (https)", ErrInvalid, u.Scheme)
	case cfg.TLS != nil && cfg.Client != nil:
		return nil, fmt.Errorf("%w: Config.TLS applies to the default client; set the TLS of your Client's transport instead", ErrInvalid)
	}
	if cfg.Refresh < 0 || cfg.FirstSpread < 0 {
		return nil, fmt.Errorf("%w: Config durations must be >= 0", ErrInvalid)
	}
	if cfg.Retry.Clock != nil || cfg.Retry.Source != nil {
		return nil, fmt.Errorf("%w: Config.Retry's Clock and Source are the fetcher's: set Config.Clock and Source", ErrInvalid)
	}
	if cfg.TLS, err = endpoint.StrictTLS("Config.TLS", cfg.TLS); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if cfg.Client, err = strictClient(cfg.Client); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxResponseHeaderBytes = maxConfigHeaderBytes
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		cfg.Client = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	}
	c := *cfg.Client // the caller's client keeps its own redirect policy
	c.CheckRedirect = redirectPolicy(u, cfg.AllowPlaintext)
	cfg.Client = &c
	if cfg.Retry.Policy == nil {
		p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 5})
		if err != nil {
			return nil, err
		}
		cfg.Retry.Policy = p
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = time.Hour
	}
	if cfg.FirstSpread == 0 {
		cfg.FirstSpread = 10 * time.Second
	}
	f := &Fetcher{cfg: cfg, shown: redactQuery(u), https: u.Scheme == "https", bounds: DefaultBounds, log: cfg.Logger, clock: cfg.Clock, src: cfg.Source}
	if cfg.Bounds != nil {
		f.bounds = *cfg.Bounds
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if f.clock == nil {
		f.clock = reconnect.SystemClock
	}
	if f.src == nil {
		f.src = jitter.NewSource()
	}
	if cfg.Store != nil {
		doc, etag, err := cfg.Store.Load()
		switch {
		case errors.Is(err, ErrNotPrivate):
			return nil, err // someone else's file in the device's place: not read, not replaced
		case err != nil:
			f.log.Warn("stored config unreadable; starting without it", "error", err)
		case doc != nil:
			if c, err := parseDocument(doc, f.bounds); err != nil {
				f.log.Warn("stored config rejected; starting without it", "error", err)
			} else {
				f.current, f.etag = &c, f.keptETag(etag)
			}
		}
	}
	return f, nil
}

// Current returns the configuration in force, if any.
func (f *Fetcher) Current() (Document, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return Document{}, false
	}
	return *f.current, true
}

func (f *Fetcher) emit(e device.Event) {
	e.Time = f.clock.Now()
	if f.cfg.OnEvent != nil {
		f.cfg.OnEvent(e)
	}
}

// Fetch runs one round: GET, retrying what is worth retrying within the
// Retry policy. It returns nil when the config is unchanged (304) or a new
// one was applied. A rejected document is an error wrapping ErrBadDocument
// or ErrTooLarge. A refused redirect is one wrapping ErrRedirectRefused. A
// round that runs out of retries wraps reconnect.ErrExhausted. In every
// error case the last good configuration stays in force.
func (f *Fetcher) Fetch(ctx context.Context) error {
	f.mu.Lock()
	etag := f.etag
	// one round's jitter, from the device's sequence
	src := rand.NewPCG(f.src.Uint64(), f.src.Uint64())
	f.mu.Unlock()

	ans, err := reconnect.DoValue(ctx, f.roundRetry(src), func(ctx context.Context) (*configAnswer, error) {
		return f.get(ctx, etag)
	})
	if err != nil {
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrRedirectRefused) || errors.Is(err, ErrWeakTLS) {
			f.reject(err)
		}
		return err
	}
	if ans == nil {
		return nil // 304: the config in force is current
	}
	return f.apply(ans)
}

// roundRetry is the Retry policy of one round, on the fetcher's clock and
// the round's jitter, logging each failure it retries.
func (f *Fetcher) roundRetry(src rand.Source) reconnect.Retry {
	r := f.cfg.Retry
	r.Clock, r.Source = f.clock, src
	notify := r.Notify
	r.Notify = func(n reconnect.Notice) {
		f.log.Info("config fetch failed; retrying", "attempt", n.Attempt, "delay", n.Delay, "error", n.Cause)
		if notify != nil {
			notify(n)
		}
	}
	return r
}

// configAnswer is a configuration document the server sent, and its ETag.
type configAnswer struct {
	body []byte
	etag string
}

// get is one attempt: a GET, conditional on etag. It returns nil, nil when
// the configuration is unchanged (304), and marks permanent what no retry
// would change.
func (f *Fetcher) get(ctx context.Context, etag string) (*configAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.cfg.URL, nil)
	if err != nil {
		return nil, reconnect.Permanent(err)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		err = f.redactErr(err)
		if errors.Is(err, ErrRedirectRefused) {
			return nil, reconnect.Permanent(err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if err := checkConnection(resp.TLS, f.https); err != nil {
		return nil, reconnect.Permanent(err)
	}
	if err := reconnect.CheckResponse(resp, f.clock.Now()); err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotModified {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, reconnect.Permanent(fmt.Errorf("remoteconfig: config answered %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, err // cut off mid-body: worth another try
	}
	if len(body) > MaxDocumentBytes {
		return nil, reconnect.Permanent(ErrTooLarge)
	}
	return &configAnswer{body: body, etag: f.keptETag(resp.Header.Get("ETag"))}, nil
}

// keptETag is e if it is valid, else "" (logged): a config with an ETag
// not worth keeping is applied and stored all the same.
func (f *Fetcher) keptETag(e string) string {
	if validETag(e) {
		return e
	}
	f.log.Warn("config ETag ignored: over MaxETagBytes or not visible ASCII", "bytes", len(e), "max", MaxETagBytes)
	return ""
}

// apply puts a new document in force, if it is valid, and stores it.
func (f *Fetcher) apply(ans *configAnswer) error {
	c, err := parseDocument(ans.body, f.bounds)
	if err != nil {
		f.reject(err)
		return err
	}
	f.mu.Lock()
	f.current, f.etag = &c, ans.etag
	f.mu.Unlock()
	if f.cfg.Store != nil {
		if err := f.cfg.Store.Save(ans.body, ans.etag); err != nil {
			f.log.Warn("could not store config", "error", err)
		}
	}
	f.log.Info("config applied", "etag", ans.etag)
	f.emit(device.Event{Kind: device.EventConfigApplied})
	if f.cfg.OnApply != nil {
		f.cfg.OnApply(c)
	}
	return nil
}

// redactErr rewrites an error from the HTTP client, which quotes the whole
// URL, to show the redacted one.
func (f *Fetcher) redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, f.shown, ue.Err)
	}
	return err
}

func (f *Fetcher) reject(err error) {
	f.log.Warn("config rejected; keeping the last good one", "error", err)
	f.emit(device.Event{Kind: device.EventConfigRejected, Err: err})
}

// NextRefresh returns the jittered wait before the next round.
func (f *Fetcher) NextRefresh() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	base := f.cfg.Refresh
	if f.current != nil && f.current.RefreshInterval > 0 {
		base = time.Duration(f.current.RefreshInterval)
	}
	return time.Duration(float64(base) * (0.75 + 0.5*jitter.Float64(f.src)))
}

// Run fetches after U[0, FirstSpread) and then every NextRefresh, until ctx
// ends. A round that fails is logged; the next scheduled round tries again.
func (f *Fetcher) Run(ctx context.Context) {
	f.mu.Lock()
	wait := time.Duration(jitter.Float64(f.src) * float64(f.cfg.FirstSpread))
	f.mu.Unlock()
	for {
		if reconnect.Sleep(ctx, f.clock, wait) != nil {
			return
		}
		if err := f.Fetch(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("config round failed; waiting for the next one", "error", err)
		}
		wait = f.NextRefresh()
	}
}
