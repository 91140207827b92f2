// The remote-config fetcher: the device's settings over HTTP, retried
// with the same backoff, kept across reboots.

package device

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/reconnect"
)

// Errors a configuration is rejected with; the last good one stays in force.
var (
	ErrConfigTooLarge = errors.New("device: config body over 1 MiB")
	ErrConfigInvalid  = errors.New("device: invalid config")
	// ErrRedirectRefused: the config server redirected to plain http or to
	// another host. The round ends at once; nothing from there is applied.
	ErrRedirectRefused = errors.New("device: config redirect refused")
	// ErrWeakTLS: the config server answered over TLS older than 1.2, or
	// without its certificate verified (a Client's RoundTripper that the
	// Fetcher could not look into). Nothing it sent is read.
	ErrWeakTLS = errors.New("device: config connection below TLS 1.2 or unverified")
)

// MaxConfigBytes bounds a configuration document.
const MaxConfigBytes = 1 << 20

// maxConfigHeaderBytes bounds the default client's response headers
// (net/http's own default is 10 MiB).
const maxConfigHeaderBytes = 64 << 10

// MaxETagBytes bounds the ETag a device keeps and sends back. Servers use
// a hash or a version, far shorter; a longer one, or one with bytes an
// ETag may not hold, is not kept (the next fetch is unconditional).
const MaxETagBytes = 256

// validETag says whether an ETag is one to keep: at most MaxETagBytes of
// visible ASCII (RFC 9110's etagc, less obs-text, and without the quotes
// some servers leave out).
func validETag(e string) bool {
	if len(e) > MaxETagBytes {
		return false
	}
	for i := 0; i < len(e); i++ {
		if e[i] < 0x21 || e[i] > 0x7e {
			return false
		}
	}
	return true
}

// Duration is a time.Duration written in JSON as a Go duration string ("30s").
// The zero Duration is 0, which a RemoteConfig reads as unset. It is a plain
// value, safe to share.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// RemoteConfig is the document a device fetches. Zero fields keep the
// firmware's own values, so the zero RemoteConfig changes nothing. Copies
// share Reconnect and Settings: treat one as read-only once shared.
type RemoteConfig struct {
	Reconnect         *ReconnectTuning `json:"reconnect,omitempty"`
	HeartbeatInterval Duration         `json:"heartbeat_interval,omitempty"`
	RefreshInterval   Duration         `json:"refresh_interval,omitempty"`
	// Settings carries the application's own keys, untouched.
	Settings map[string]json.RawMessage `json:"settings,omitempty"`
}

// ReconnectTuning adjusts the IoTCore formula's parameters. The zero
// ReconnectTuning is invalid (Base must be > 0): a document carrying one is
// rejected. It is a plain value, safe to share.
type ReconnectTuning struct {
	Base       Duration `json:"base"`
	Jitter     Duration `json:"jitter"`
	MaxBackoff Duration `json:"max_backoff"`
}

// Bounds are the limits the firmware puts on what a remote configuration may
// set. A value outside them rejects the whole document: a broken or hostile
// config must not be able to turn backoff off and the fleet into a storm.
// The zero Bounds allows no tuning: a document that sets reconnect,
// heartbeat_interval or refresh_interval is rejected. Bounds is a plain
// value that NewFetcher copies: safe to share.
type Bounds struct {
	Base, Jitter, MaxBackoff [2]time.Duration // [min, max]
	Heartbeat, Refresh       [2]time.Duration
}

// DefaultBounds keeps jitter at least 500 ms and the cap at least 16 s.
var DefaultBounds = Bounds{
	Base:       [2]time.Duration{500 * time.Millisecond, 10 * time.Second},
	Jitter:     [2]time.Duration{500 * time.Millisecond, 10 * time.Second},
	MaxBackoff: [2]time.Duration{16 * time.Second, 15 * time.Minute},
	Heartbeat:  [2]time.Duration{5 * time.Second, time.Hour},
	Refresh:    [2]time.Duration{time.Minute, 24 * time.Hour},
}

func within(name string, v Duration, b [2]time.Duration) error {
	if time.Duration(v) < b[0] || time.Duration(v) > b[1] {
		return fmt.Errorf("%w: %s %v outside [%v, %v]", ErrConfigInvalid, name, time.Duration(v), b[0], b[1])
	}
	return nil
}

// Check reports the first value of c outside b.
func (b Bounds) Check(c RemoteConfig) error {
	if r := c.Reconnect; r != nil {
		if err := errors.Join(within("reconnect.base", r.Base, b.Base), within("reconnect.jitter", r.Jitter, b.Jitter),
			within("reconnect.max_backoff", r.MaxBackoff, b.MaxBackoff)); err != nil {
			return err
		}
		if r.MaxBackoff < r.Base {
			return fmt.Errorf("%w: reconnect.max_backoff below reconnect.base", ErrConfigInvalid)
		}
	}
	if c.HeartbeatInterval != 0 {
		if err := within("heartbeat_interval", c.HeartbeatInterval, b.Heartbeat); err != nil {
			return err
		}
	}
	if c.RefreshInterval != 0 {
		if err := within("refresh_interval", c.RefreshInterval, b.Refresh); err != nil {
			return err
		}
	}
	return nil
}

// Policy returns the reconnect policy c asks for (retrying forever), or nil
// if c does not tune reconnects.
func (c RemoteConfig) Policy() (*reconnect.Policy, error) {
	if c.Reconnect == nil {
		return nil, nil
	}
	return reconnect.New(reconnect.IoTCore{Base: time.Duration(c.Reconnect.Base), Jitter: time.Duration(c.Reconnect.Jitter),
		MaxBackoff: time.Duration(c.Reconnect.MaxBackoff)}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
}

// parseConfig decodes and checks a document: strictly (checkStrict),
// then within b.
func parseConfig(body []byte, b Bounds) (RemoteConfig, error) {
	if err := checkStrict(body); err != nil {
		return RemoteConfig{}, fmt.Errorf("%w: %v", ErrConfigInvalid, err)
	}
	var c RemoteConfig
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return RemoteConfig{}, fmt.Errorf("%w: %v", ErrConfigInvalid, err)
	}
	if err := b.Check(c); err != nil {
		return RemoteConfig{}, err
	}
	if _, err := c.Policy(); err != nil {
		return RemoteConfig{}, fmt.Errorf("%w: %v", ErrConfigInvalid, err)
	}
	return c, nil
}

// ConfigStore keeps the last good configuration across restarts. A nil
// ConfigStore (FetcherConfig.Store unset) keeps nothing. Fetch calls Save
// outside the Fetcher's lock, so a store used by concurrent Fetch calls must
// be safe for concurrent use.
type ConfigStore interface {
	// Load returns the stored document and its ETag, or nil if there is none.
	Load() (doc []byte, etag string, err error)
	Save(doc []byte, etag string) error
}

// FileStore is a ConfigStore in one file, replaced atomically on Save. The
// zero FileStore has no Path and is not usable: Load finds nothing and Save
// fails. It keeps no state but Path and Dir, and each Save renames a whole
// file into place, so it is safe for concurrent use.
//
// The file is opened through its directory's handle, never through a
// symbolic link, without waiting on a FIFO or a device; Load refuses,
// before reading it, a file that is not regular, belongs to another user
// or has more than one link (an error wrapping ErrNotPrivate).
type FileStore struct {
	// Path is the file; with Dir set, its name within Dir.
	Path string
	// Dir, when set, is the directory Path is in, held open (the
	// agent's data directory): the file is opened through it, so that no
	// link or rename of the directory's path can point it elsewhere. The
	// FileStore does not close it.
	Dir *os.File
}

// ErrNotPrivate is wrapped by a FileStore's error for a file, or a data
// directory, that is not the device's own: another user's, a link, a FIFO
// or a device, or a file with more than one link. Nothing in it was read,
// changed or renamed.
var ErrNotPrivate = datadir.ErrNotPrivate

type storedConfig struct {
	ETag string          `json:"etag"`
	Doc  json.RawMessage `json:"doc"`
}

// dir is the directory the file is in, and its name there; done lets the
// directory go if dir opened it.
func (s FileStore) dir() (dir *os.File, name string, done func(), err error) {
	if s.Dir != nil {
		return s.Dir, s.Path, func() {}, nil
	}
	d, name, err := datadir.OpenParent(s.Path)
	if err != nil {
		return nil, "", nil, err
	}
	return d, name, func() { d.Close() }, nil
}

// Load reads the file: nil when there is none.
func (s FileStore) Load() ([]byte, string, error) {
	dir, name, done, err := s.dir()
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("device: config store: %w", err)
	}
	defer done()
	f, err := datadir.OpenFile(dir, name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("device: config store: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 2*MaxConfigBytes+1024)) // a stored document passed the same limit
	if err != nil {
		return nil, "", err
	}
	var sc storedConfig
	if err := json.Unmarshal(b, &sc); err != nil {
		return nil, "", fmt.Errorf("device: config store %s: %w", f.Name(), err)
	}
	return sc.Doc, sc.ETag, nil
}

// Save writes a new file, mode 0600 whatever the umask, and renames it
// into place: whatever was at Path is replaced, never followed.
func (s FileStore) Save(doc []byte, etag string) error {
	b, err := json.Marshal(storedConfig{ETag: etag, Doc: doc})
	if err != nil {
		return err
	}
	dir, name, done, err := s.dir()
	if err != nil {
		return err
	}
	defer done()
	tmp, err := datadir.CreateTemp(dir, ".config-")
	if err != nil {
		return err
	}
	tmpName := filepath.Base(tmp.Name())
	defer datadir.Remove(dir, tmpName) // after a successful rename this finds nothing
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil { // the rename must not land before the data
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return datadir.Rename(dir, tmpName, name)
}

// FetcherConfig configures a Fetcher. URL is required: the zero
// FetcherConfig is invalid and NewFetcher refuses it. NewFetcher copies it,
// with its Client and Bounds; Store and Source are used as given, so do not
// share a Source.
type FetcherConfig struct {
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
	// Client, if set, makes the requests (nil: a client with a 30 s timeout).
	// Whichever client is used, a redirect is followed only to https (or,
	// with AllowPlaintext, to the URL's own scheme) on the URL's own host,
	// and TLS is 1.2 or later with the server verified: NewFetcher refuses
	// a Client whose *http.Transport skips verification, raises a lower
	// MinVersion on a copy of it, and a response over a weaker connection
	// (from a RoundTripper it cannot look into) is refused unread; the
	// request, with any token in URL, has gone out over it by then.
	Client *http.Client
	// Retry times a round's retries as reconnect.Do does: its Policy (nil:
	// IoTCore, 1 s base, 1000 ms jitter, 32 s cap, 5 retries: 1, 2, 4, 8,
	// 16 s plus jitter), MaxRetryAfter and RetryAfterJitter (a Retry-After
	// is a floor: 0 waits a hint h for h + U[0, min(h, 1 min))), Retryable
	// (nil: 429, every 5xx and a 403 whose body names a rate limit) and
	// Notify (beside the fetcher's own log line). Its Clock and Source
	// must be nil: the fetcher's Clock and Source time its refresh too.
	Retry reconnect.Retry
	// Refresh is the time between rounds unless the config sets its own (0: 1 h);
	// each wait is jittered to Refresh x U[0.75, 1.25) so a fleet does not poll
	// in step, and the first round waits U[0, FirstSpread) (0: 10 s).
	Refresh     time.Duration
	FirstSpread time.Duration
	Bounds      *Bounds     // nil: DefaultBounds
	Store       ConfigStore // nil: nothing survives a restart
	Clock       reconnect.Clock
	Source      rand.Source
	Logger      *slog.Logger
	OnEvent     func(Event)        // EventConfigApplied, EventConfigRejected; must not block
	OnApply     func(RemoteConfig) // called with each newly applied config
}

// Fetcher keeps a device's configuration fresh over HTTP: GET with
// If-None-Match; retry 429, every 5xx and a 403 whose body names a rate
// limit, with backoff; take a Retry-After as a floor and add jitter on top
// (reconnect.Retry.RetryAfterJitter's default: a hint h is waited h +
// U[0, min(h, 1 min))), measuring an HTTP-date against the response's Date
// so that a device without a real-time clock waits what the server meant;
// reject bad documents and keep the last good one. Its methods are safe for
// concurrent use. The zero value is not usable: use NewFetcher.
type Fetcher struct {
	cfg    FetcherConfig
	shown  string // the URL as logs and errors show it
	https  bool   // the URL is https: so must every answer be
	bounds Bounds
	log    *slog.Logger
	clock  reconnect.Clock

	mu      sync.Mutex
	src     rand.Source
	current *RemoteConfig
	etag    string
}

// NewFetcher validates cfg and loads the stored configuration, if any. A
// stored file that is not the device's own (an error wrapping
// ErrNotPrivate) fails it: the device neither reads nor replaces it. One
// it cannot read or parse is logged, and the device starts without it.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("%w: FetcherConfig.URL is required", ErrInvalid)
	}
	u, err := parseURL("FetcherConfig.URL", cfg.URL)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Scheme == "http" && !cfg.AllowPlaintext:
		return nil, fmt.Errorf("%w: FetcherConfig.URL %s is plain http: anyone on the path could rewrite the device's settings; "+
			"use https, or set AllowPlaintext", ErrInvalid, redactQuery(u))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: FetcherConfig.URL scheme %q (https)", ErrInvalid, u.Scheme)
	case cfg.TLS != nil && cfg.Client != nil:
		return nil, fmt.Errorf("%w: FetcherConfig.TLS applies to the default client; set the TLS of your Client's transport instead", ErrInvalid)
	}
	if cfg.Refresh < 0 || cfg.FirstSpread < 0 {
		return nil, fmt.Errorf("%w: FetcherConfig durations must be >= 0", ErrInvalid)
	}
	if cfg.Retry.Clock != nil || cfg.Retry.Source != nil {
		return nil, fmt.Errorf("%w: FetcherConfig.Retry's Clock and Source are the fetcher's: set FetcherConfig.Clock and Source", ErrInvalid)
	}
	if cfg.TLS, err = strictTLS("FetcherConfig.TLS", cfg.TLS); err != nil {
		return nil, err
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
			if c, err := parseConfig(doc, f.bounds); err != nil {
				f.log.Warn("stored config rejected; starting without it", "error", err)
			} else {
				f.current, f.etag = &c, f.keptETag(etag)
			}
		}
	}
	return f, nil
}

// Current returns the configuration in force, if any.
func (f *Fetcher) Current() (RemoteConfig, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return RemoteConfig{}, false
	}
	return *f.current, true
}

func (f *Fetcher) emit(e Event) {
	e.Time = f.clock.Now()
	if f.cfg.OnEvent != nil {
		f.cfg.OnEvent(e)
	}
}

// Fetch runs one round: GET, retrying what is worth retrying within the
// Retry policy. It returns nil when the config is unchanged (304) or a new
// one was applied; a rejected document is an error wrapping
// ErrConfigInvalid or ErrConfigTooLarge, a refused redirect one wrapping
// ErrRedirectRefused; a round that runs out of retries
// wraps reconnect.ErrExhausted. In every error case the last good
// configuration stays in force.
func (f *Fetcher) Fetch(ctx context.Context) error {
	f.mu.Lock()
	etag := f.etag
	src := rand.NewPCG(f.src.Uint64(), f.src.Uint64()) // one round's jitter, from the device's sequence
	f.mu.Unlock()

	ans, err := reconnect.DoValue(ctx, f.roundRetry(src), func(ctx context.Context) (*configAnswer, error) {
		return f.get(ctx, etag)
	})
	if err != nil {
		if errors.Is(err, ErrConfigTooLarge) || errors.Is(err, ErrRedirectRefused) || errors.Is(err, ErrWeakTLS) {
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
		return nil, reconnect.Permanent(fmt.Errorf("device: config answered %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxConfigBytes+1))
	if err != nil {
		return nil, err // cut off mid-body: worth another try
	}
	if len(body) > MaxConfigBytes {
		return nil, reconnect.Permanent(ErrConfigTooLarge)
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
	c, err := parseConfig(ans.body, f.bounds)
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
	f.emit(Event{Kind: EventConfigApplied})
	if f.cfg.OnApply != nil {
		f.cfg.OnApply(c)
	}
	return nil
}

// redirectPolicy follows a redirect only to https (or, with plaintext
// allowed, the URL's own scheme) on the URL's own host and port: a
// configuration is taken only from the server the device was pointed at.
func redirectPolicy(origin *url.URL, allowPlaintext bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		to := req.URL
		switch {
		case len(via) >= 10:
			return fmt.Errorf("%w: more than 10 redirects", ErrRedirectRefused)
		case to.Scheme != "https" && !(allowPlaintext && to.Scheme == origin.Scheme):
			return fmt.Errorf("%w: to %s, which is not https", ErrRedirectRefused, redactQuery(to))
		case !sameHost(to, origin):
			return fmt.Errorf("%w: to %s, another host or port than %s:%s", ErrRedirectRefused, redactQuery(to), origin.Hostname(), defaultPort(origin))
		}
		return nil
	}
}

// sameHost compares host and port, a missing port being the scheme's own;
// an upgrade from http on its default port to https on its own is the
// same host.
func sameHost(to, from *url.URL) bool {
	if !strings.EqualFold(to.Hostname(), from.Hostname()) {
		return false
	}
	if from.Scheme == "http" && to.Scheme == "https" && defaultPort(from) == "80" && defaultPort(to) == "443" {
		return true
	}
	return defaultPort(to) == defaultPort(from)
}

// defaultPort is u's port, or its scheme's when it names none.
func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return map[string]string{"http": "80", "https": "443"}[u.Scheme]
}

// redactQuery shows a URL without its credentials or query, either of
// which may carry a device's token.
func redactQuery(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
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
	f.emit(Event{Kind: EventConfigRejected, Err: err})
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
