package device

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// Errors returned by the Agent's methods.
var (
	// ErrNotConnected: Publish or a subscription needs a session and there is none.
	ErrNotConnected = errors.New("device: not connected")
	// ErrStopped: the agent was stopped (Stop, or the Start context ended).
	ErrStopped = errors.New("device: agent stopped")
	// ErrAlreadyStarted: Start was called twice.
	ErrAlreadyStarted = errors.New("device: agent already started")
	// ErrUnconfirmed: a QoS 1 publish completed without proof of a PUBACK.
	// The connection it went out on ended before paho reported it done, and
	// paho v1.5.1 completes such a publish when it resends it on the next
	// connection of a persistent session, before any PUBACK. The message may
	// or may not have arrived: publish it again (package publisher does).
	// On MQTT 5 it is a publish whose connection ended before its PUBACK
	// and whose session did not survive to resend it (paho.golang waits
	// for the resend's PUBACK when it does).
	ErrUnconfirmed = errors.New("device: publish not confirmed by a PUBACK on its connection")
	// ErrPublishRefused: an MQTT 5 broker answered a QoS 1 publish with a
	// PUBACK reason code of 0x80 or more (not authorized, quota exceeded,
	// ...). The message did not arrive.
	ErrPublishRefused = errors.New("device: publish refused by the broker")
	// ErrTooLargeForBroker: the publish is over the Maximum Packet Size the
	// MQTT 5 broker named in its CONNACK; it was not sent (the broker would
	// have ended the session for it).
	ErrTooLargeForBroker = errors.New("device: publish over the broker's maximum packet size")
)

// DialFunc opens a connection to broker, an endpoint of Config's, for one
// attempt: ctx ends when the attempt's connect timeout passes or the agent
// stops, and the dial should end with it. A DialFunc may be called from
// the agent's goroutines one attempt at a time; it must not keep ctx. A nil
// DialFunc (Config.Dial unset) means plain TCP or TLS. One shared by several
// agents is called by each of them at once, so it must then be safe for
// concurrent use.
type DialFunc func(ctx context.Context, broker *url.URL) (net.Conn, error)

// Config configures an Agent. Broker and ClientID are required; the rest
// has defaults. The zero Config is invalid: New refuses it. New copies the
// Config; the TLS and Timing it points to are only read, so a fleet may share
// them if they do not change, but a Source must not be shared.
type Config struct {
	Broker string // tcp://host:1883, ssl://host:8883, or any URL Dial understands
	// Protocol is the MQTT version the agent speaks (the zero value,
	// MQTT311). MQTT 5 needs a build without the nomqtt5 tag; everything
	// this Config says holds on either.
	Protocol Protocol
	// Failover lists more endpoints, in the same forms as Broker. After a
	// failed attempt or a lost session the next attempt goes to the next
	// endpoint in turn (Broker, Failover[0], ..., Broker again); a session
	// stays where it was made. The wait before each attempt is still the
	// policy's: a fleet that fails over reaches the survivor on the same
	// spread-out schedule it would have come back on, not all at once.
	Failover []string
	ClientID string
	// Username and Password are the MQTT credentials; credentials in the
	// Broker URL (tcp://user:pass@host) are taken as these. They go only to
	// TLS endpoints unless AllowPlaintext is set. The password is never
	// logged and never in an error.
	Username string
	Password string
	// AllowPlaintext lets credentials go to plaintext (tcp://, mqtt://)
	// endpoints, where anyone on the path can read them: for a lab, or a
	// broker on the same host. New logs a warning when it is used. Mixing
	// TLS and plaintext endpoints is refused whatever it says: a failover
	// must not be a downgrade.
	AllowPlaintext bool

	// TLS is used for ssl:// (tls://, mqtts://) brokers: CA pool and, for
	// mutual TLS, the device certificate. See LoadTLS. Whatever it says,
	// the agent speaks TLS 1.2 or later (a lower MinVersion is raised on a
	// copy) and verifies the broker: New refuses InsecureSkipVerify and a
	// MaxVersion below 1.2.
	TLS *tls.Config
	// Dial, if set, opens connections instead of TCP/TLS (the test broker's
	// in-memory transport, a proxy). An endpoint counts as TLS by its scheme
	// (ssl, tls, mqtts, tcps), so a Dial must honour the scheme it is given.
	Dial DialFunc

	// MaxIncomingPacket bounds one incoming MQTT packet, in bytes of its
	// remaining length (0 means DefaultMaxIncomingPacket; at least
	// MinIncomingPacket, at most MQTT's 268,435,455). A packet that
	// declares more closes the connection before any of it is read: a
	// PacketTooLargeError, reported as
	// EventPacketTooLarge and to Metrics, and the agent reconnects on the
	// policy's schedule.
	MaxIncomingPacket int
	// IncomingQueue and IncomingQueueBytes bound the messages waiting for
	// their handlers, the one being handled included (0 means
	// DefaultIncomingQueue, 32, and DefaultIncomingQueueBytes, 1 MiB; one
	// message is always taken, whatever its size). Handlers run one at a
	// time, in the order the messages arrived; past these bounds the agent
	// reads no more from the broker (TCP's back-pressure) until a handler
	// catches up, and Stats.BackPressure, and BackPressureCounter, count the
	// time held so. A handler held longer than KeepAlive + PingTimeout ends
	// the session: the agent reads no PINGRESP meanwhile.
	IncomingQueue      int
	IncomingQueueBytes int

	// KeepAlive is the MQTT keepalive (0 means 30 s): after that long
	// without traffic the agent sends a PINGREQ. PingTimeout is how long it
	// then waits for the PINGRESP before it calls the connection dead (0
	// means 10 s). Together they bound how long a silent path goes
	// unnoticed, a NAT or load balancer that forgot the connection without
	// a reset: at most KeepAlive + PingTimeout + min(KeepAlive/4, 5 s), the
	// last being how often paho checks. A fleet's sessions start at
	// different times, so their pings, and the moments they notice, are
	// spread over a keepalive.
	// KeepAlive is sent in whole seconds, at most 65,535 (MQTT's two bytes).
	KeepAlive   time.Duration
	PingTimeout time.Duration
	// ConnectTimeout bounds one connect attempt (0 means 10 s; paho fails
	// every connect at 0). Stopping the agent cuts an attempt short.
	ConnectTimeout time.Duration
	// PersistentSession asks the broker to keep the session across
	// connections (CleanSession false): subscriptions and the QoS 1 messages
	// sent to the device while it was away survive a reconnect, and
	// EventConnected says whether the broker resumed the session. paho
	// resends an unacknowledged publish on the next connection and, in this
	// mode, reports it complete before its PUBACK: Publish returns
	// ErrUnconfirmed for it rather than success, so a caller that removes a
	// message only when Publish succeeds still loses nothing.
	PersistentSession bool

	// SessionExpiry is how long an MQTT 5 broker keeps a PersistentSession
	// after its connection ends (0 means a day); the broker may grant less,
	// and the agent takes what it grants. MQTT 3.1.1 has no such field.
	SessionExpiry time.Duration
	// RedirectDomains names where an MQTT 5 broker may send the device with
	// 0x9C (use another server) or 0x9D (server moved) and a Server
	// Reference, beyond the hosts of Broker and Failover: "example.com"
	// allows example.com and every name under it. A reference elsewhere is
	// refused (EventRedirectRefused) and the next attempt goes where it
	// would have gone. A redirected attempt keeps the endpoint's scheme
	// (TLS stays TLS, verified against the new host's name), credentials
	// and the policy's wait.
	RedirectDomains []string
	// MaxRedirects bounds the references followed in a row without a
	// session (0 means 3): a broker cannot keep the device hopping.
	MaxRedirects int

	// Timing is the reconnect timing (nil: DefaultTiming()). A fleet may share one.
	Timing *Timing
	// Clock is the source of time (nil: reconnect.SystemClock).
	Clock reconnect.Clock
	// Source draws this device's jitter (nil: crypto-seeded).
	Source rand.Source
	// Metrics, if set, is told of every attempt's outcome and every session
	// up and down, for firmware to export as it likes.
	Metrics Metrics
	// OnEvent, if set, receives every state change. It must not block.
	OnEvent func(Event)
	// Logger receives the agent's log (nil: discarded).
	Logger *slog.Logger
}

// LogValue keeps credentials out of any log that prints a Config: URLs
// are redacted, and each endpoint says whether it is TLS.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("broker", redact(c.Broker)), slog.Bool("broker_tls", isTLS(c.Broker)),
		slog.String("mqtt", c.Protocol.String())}
	if len(c.Failover) > 0 {
		fs := make([]string, len(c.Failover))
		for i, f := range c.Failover {
			fs[i] = redact(f) + " (plaintext)"
			if isTLS(f) {
				fs[i] = redact(f) + " (tls)"
			}
		}
		attrs = append(attrs, slog.String("failover", strings.Join(fs, ", ")))
	}
	user, pass, from := c.Username != "", c.Password != "", "none"
	if u, err := url.Parse(c.Broker); err == nil && u.User != nil {
		_, inURL := u.User.Password()
		user, pass, from = user || u.User.Username() != "", pass || inURL, "broker_url"
	} else if user || pass {
		from = "config"
	}
	return slog.GroupValue(append(attrs, slog.String("client_id", c.ClientID), slog.Bool("username_set", user),
		slog.Bool("password_set", pass), slog.String("credentials_from", from),
		slog.Bool("client_certificate", c.TLS != nil && len(c.TLS.Certificates) > 0),
		slog.Bool("allow_plaintext", c.AllowPlaintext))...)
}

// EventKind enumerates Events. The zero EventKind is none of them: the
// kinds start at EventConnecting. An EventKind is a plain value, safe to
// share.
type EventKind uint8

const (
	EventConnecting      EventKind = iota + 1 // a connect attempt starts (Attempt)
	EventConnected                            // the session is up (Attempt)
	EventAttemptFailed                        // a connect attempt failed (Attempt, Code, Err)
	EventLost                                 // the session ended (Err)
	EventBackingOff                           // waiting before the next attempt (Attempt, Delay)
	EventGaveUp                               // the agent stopped retrying (Err)
	EventConfigApplied                        // a new configuration is in force
	EventConfigRejected                       // a configuration was refused (Err); the last good one stays
	EventHandlerPanic                         // a subscription handler panicked (Err); the agent carries on
	EventPacketTooLarge                       // a packet over MaxIncomingPacket closed the connection (Err: *PacketTooLargeError)
	EventRedirected                           // an MQTT 5 broker named another server; the next attempt goes there (Endpoint)
	EventRedirectRefused                      // an MQTT 5 broker named a server the Config does not allow, or one too many (Err)
)

var eventNames = map[EventKind]string{
	EventConnecting: "connecting", EventConnected: "connected", EventAttemptFailed: "attempt-failed",
	EventLost: "lost", EventBackingOff: "backing-off", EventGaveUp: "gave-up",
	EventConfigApplied: "config-applied", EventConfigRejected: "config-rejected", EventHandlerPanic: "handler-panic",
	EventPacketTooLarge: "packet-too-large", EventRedirected: "redirected", EventRedirectRefused: "redirect-refused",
}

func (k EventKind) String() string { return eventNames[k] }

// Event is one state change of an Agent. The zero Event (Kind 0) is never
// sent. An Event is a plain value, passed by copy: safe to share.
type Event struct {
	Kind    EventKind
	Time    time.Time
	Attempt int
	Delay   time.Duration
	Code    int // CONNACK code for EventAttemptFailed (NoConnack if none)
	// SessionPresent: for EventConnected, the broker resumed a persistent
	// session (Config.PersistentSession).
	SessionPresent bool
	// Endpoint is the broker URL of the attempt (EventConnecting,
	// EventConnected, EventAttemptFailed).
	Endpoint string
	Err      error
}

// Metrics receives an agent's counts as they happen, so that firmware can
// export them (a Prometheus endpoint, statsd, a status page) without this
// package depending on any of those. The agent calls it from its loop: each
// method must be quick and must not block. One value may serve a whole
// fleet's agents if it is safe for concurrent use. A nil Metrics
// (Config.Metrics unset) counts nothing.
type Metrics interface {
	// Attempt is one connect attempt's outcome.
	Attempt(o AttemptOutcome)
	// SessionUp is a session established; SessionDown its end, lost (the
	// connection failed or the broker ended it) or not (the agent stopped).
	SessionUp()
	SessionDown(lost bool)
}

// PacketTooLargeCounter is a Metrics that also counts connections closed
// because an incoming packet declared more than Config.MaxIncomingPacket.
// It is optional, so that Metrics written before it still compile. The agent
// finds it by a type assertion on Config.Metrics and calls it from the same
// loop, so the same rule holds: safe for concurrent use if shared by agents.
type PacketTooLargeCounter interface {
	PacketTooLarge()
}

// AttemptOutcome is what became of a connect attempt. The zero
// AttemptOutcome is AttemptAccepted. It is a plain value, safe to share.
type AttemptOutcome uint8

const (
	AttemptAccepted      AttemptOutcome = iota // CONNACK 0: a session
	AttemptRefused                             // a CONNACK with a non-zero code
	AttemptFailed                              // no CONNACK: refused dial, timeout, reset
	AttemptProtocolError                       // a CONNACK that is not MQTT 3.1.1's (ProtocolError)
)

func (o AttemptOutcome) String() string {
	switch o {
	case AttemptAccepted:
		return "accepted"
	case AttemptRefused:
		return "refused"
	case AttemptFailed:
		return "failed"
	case AttemptProtocolError:
		return "protocol-error"
	}
	return fmt.Sprintf("AttemptOutcome(%d)", uint8(o))
}

// Stats are an agent's counters. The zero Stats counts nothing. A Stats is
// a copy taken by Agent.Stats: a plain value, safe to share.
type Stats struct {
	Connects int64         // sessions established
	Losses   int64         // sessions lost
	Attempts int64         // connect attempts made
	Waiting  time.Duration // time spent waiting before attempts
	// BackPressure is the time the agent read nothing from the broker
	// because its handlers were behind (Config.IncomingQueue).
	BackPressure time.Duration
}

// Handler receives a message on a subscribed topic. Handlers run on the
// agent's delivery goroutine, one message at a time, in the order the
// messages arrived; a QoS 1 message is acknowledged once its handler
// returns. A panic in one is recovered and reported. A slow handler holds
// the messages after it (Config.IncomingQueue). Subscribe refuses a nil
// Handler.
type Handler func(topic string, payload []byte)

type subscription struct {
	qos     byte
	handler Handler
}

// Agent keeps one device's MQTT 3.1.1 session: it owns every connect's timing
// (paho's own reconnect is off), restores subscriptions on every reconnect and
// reports its state through channels and a non-blocking event callback. Its
// methods are safe for concurrent use. The zero value is not usable: use New.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	clock reconnect.Clock
	proto protocol // the MQTT version spoken: paho (3.1.1) or paho.golang (5)
	m     *Machine
	mMu   sync.Mutex // guards m against SetPolicy from config updates

	endpoints []*url.URL   // Broker, then Failover (without credentials)
	names     []string     // the endpoints as logged
	endpoint  atomic.Int32 // the one the next attempt goes to
	// redirected, if set, is where an MQTT 5 broker sent the device: the
	// next attempt goes there instead, and the session made there stays.
	redirected atomic.Pointer[url.URL]
	hops       int                       // references followed since the last session (the loop's alone)
	wire       atomic.Pointer[guardConn] // the current attempt's connection
	lost       chan error
	// conns counts connect attempts: a publish whose completion is seen
	// under a later count than its start may have been completed by paho's
	// resend rather than by a PUBACK.
	conns  atomic.Uint64
	runCtx context.Context // set by Start before the loop; ends attempts

	connects, losses, attempts, waitNanos atomic.Int64

	inbox     *inbox        // made by Start: messages on their way to the handlers
	delivered chan struct{} // closed when the inbox's goroutine ends

	mu      sync.Mutex
	subs    map[string]subscription
	up      chan struct{} // closed while connected
	online  bool
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop ends
	err     error
}

// New validates cfg and builds the agent; nothing connects before Start.
func New(cfg Config) (*Agent, error) {
	if cfg.Broker == "" || cfg.ClientID == "" {
		return nil, fmt.Errorf("%w: Config.Broker and Config.ClientID are required", ErrInvalid)
	}
	endpoints, err := parseEndpoints(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.TLS, err = strictTLS("Config.TLS", cfg.TLS); err != nil {
		return nil, err
	}
	if err := withDefaults(&cfg); err != nil {
		return nil, err
	}
	m, err := NewMachine(cfg.Timing, cfg.Source)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, m: m, lost: make(chan error, 1), endpoints: endpoints,
		subs: map[string]subscription{}, up: make(chan struct{}), done: make(chan struct{}), delivered: make(chan struct{})}
	for _, u := range endpoints {
		a.names = append(a.names, u.String())
	}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if a.clock == nil {
		a.clock = reconnect.SystemClock
	}
	if cfg.AllowPlaintext && (cfg.Username != "" || cfg.Password != "") && !tlsScheme(endpoints[0].Scheme) {
		a.log.Warn("credentials will cross the network in the clear (AllowPlaintext)", "endpoints", strings.Join(a.names, ", "))
	}
	if a.proto, err = newProtocol(a); err != nil {
		return nil, err
	}
	return a, nil
}

// withDefaults checks cfg's limits and timeouts and sets those left at 0
// to their defaults.
func withDefaults(cfg *Config) error {
	switch {
	case cfg.MaxIncomingPacket != 0 && (cfg.MaxIncomingPacket < MinIncomingPacket || cfg.MaxIncomingPacket > maxRemainingLength):
		return fmt.Errorf("%w: MaxIncomingPacket %d outside [%d, %d] (0: the default)", ErrInvalid,
			cfg.MaxIncomingPacket, MinIncomingPacket, maxRemainingLength)
	case cfg.MaxIncomingPacket == 0:
		cfg.MaxIncomingPacket = DefaultMaxIncomingPacket
	}
	if cfg.KeepAlive < 0 || cfg.ConnectTimeout < 0 || cfg.PingTimeout < 0 {
		return fmt.Errorf("%w: KeepAlive, PingTimeout and ConnectTimeout must be >= 0", ErrInvalid)
	}
	if cfg.KeepAlive > MaxKeepAlive {
		// paho keeps 16 bits of it: 65,536 s would go out as 0, keepalive off.
		return fmt.Errorf("%w: KeepAlive %v is over MQTT's %v", ErrInvalid, cfg.KeepAlive, MaxKeepAlive)
	}
	if cfg.IncomingQueue < 0 || cfg.IncomingQueueBytes < 0 {
		return fmt.Errorf("%w: IncomingQueue and IncomingQueueBytes must be >= 0", ErrInvalid)
	}
	switch {
	case cfg.Protocol != MQTT311 && cfg.Protocol != MQTT5:
		return fmt.Errorf("%w: unknown Protocol %d", ErrInvalid, cfg.Protocol)
	case cfg.SessionExpiry < 0 || cfg.MaxRedirects < 0:
		return fmt.Errorf("%w: SessionExpiry and MaxRedirects must be >= 0", ErrInvalid)
	}
	for _, d := range cfg.RedirectDomains {
		if d == "" || strings.ContainsAny(d, "/:@ *") || strings.HasPrefix(d, ".") {
			return fmt.Errorf("%w: RedirectDomains entry %q is not a domain name (example.com)", ErrInvalid, d)
		}
	}
	if cfg.SessionExpiry == 0 {
		cfg.SessionExpiry = 24 * time.Hour
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = 3
	}
	if cfg.IncomingQueue == 0 {
		cfg.IncomingQueue = DefaultIncomingQueue
	}
	if cfg.IncomingQueueBytes == 0 {
		cfg.IncomingQueueBytes = DefaultIncomingQueueBytes
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 30 * time.Second
	}
	if cfg.KeepAlive < time.Second {
		// MQTT counts the keepalive in whole seconds; below one it would be
		// sent as 0, which turns keepalive off: a silent path then goes
		// unnoticed for ever.
		return fmt.Errorf("%w: KeepAlive %v is below MQTT's one-second unit", ErrInvalid, cfg.KeepAlive)
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = 10 * time.Second
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.Timing == nil {
		t := DefaultTiming()
		cfg.Timing = &t
	}
	return nil
}

func supportedScheme(s string) bool {
	switch s {
	case "tcp", "mqtt", "ssl", "tls", "mqtts", "tcps":
		return true
	}
	return false
}

func tlsScheme(s string) bool {
	switch s {
	case "ssl", "tls", "mqtts", "tcps":
		return true
	}
	return false
}

// isTLS says whether a broker URL is a TLS endpoint, by its scheme.
func isTLS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && tlsScheme(u.Scheme)
}

// redact returns a broker URL fit for a log: the password masked, or a
// placeholder if it does not parse or has an '@' outside its user info
// (its text might hold a password).
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if strayAt(u) {
		return "(URL with a stray '@')"
	}
	return u.Redacted()
}

// strayAt says whether u has an '@' outside its user info, as
// ssl://u:pw/x@host has: url.Parse takes u for the host and pw for its
// port, and the password would reach logs and DNS.
func strayAt(u *url.URL) bool {
	return strings.ContainsRune(u.Opaque+u.Host+u.Path+u.RawPath+u.RawQuery+u.Fragment, '@')
}

// parseURL parses one endpoint; its error never quotes the URL, which may
// hold a password.
func parseURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		detail := ""
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(ue.Err.Error(), `"`) { // quoted parts echo the input
			detail = ": " + ue.Err.Error()
		}
		return nil, fmt.Errorf("%w: %s is not a valid URL%s", ErrInvalid, field, detail)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s has no host: write it as scheme://host:port", ErrInvalid, field) // what it has instead might be a secret
	}
	return u, nil
}

// parseEndpoints parses Broker and Failover, moves credentials from the
// Broker URL into cfg (paho would use them, but only for its first URL), and
// enforces the transport rules: credentials only over TLS unless
// AllowPlaintext, never TLS and plaintext mixed.
func parseEndpoints(cfg *Config) ([]*url.URL, error) {
	var endpoints []*url.URL
	for i, raw := range append([]string{cfg.Broker}, cfg.Failover...) {
		field := "Config.Broker"
		if i > 0 {
			field = fmt.Sprintf("Config.Failover[%d]", i-1)
		}
		u, err := parseURL(field, raw)
		if err != nil {
			return nil, err
		}
		if strayAt(u) {
			return nil, fmt.Errorf("%w: %s has an '@' outside its user info: if a password is in it, "+
				"write it as scheme://user:password@host, or set Username and Password", ErrInvalid, field)
		}
		if cfg.Dial == nil && !supportedScheme(u.Scheme) {
			return nil, fmt.Errorf("%w: %s scheme %q needs a Config.Dial", ErrInvalid, field, u.Scheme)
		}
		if u.User != nil {
			if i > 0 {
				return nil, fmt.Errorf("%w: %s carries credentials: set Config.Username and Password, which every endpoint uses",
					ErrInvalid, field)
			}
			if cfg.Username != "" || cfg.Password != "" {
				return nil, fmt.Errorf("%w: credentials both in Config.Broker and in Username/Password", ErrInvalid)
			}
			cfg.Username = u.User.Username()
			cfg.Password, _ = u.User.Password()
			u.User = nil
		}
		if len(endpoints) > 0 && tlsScheme(u.Scheme) != tlsScheme(endpoints[0].Scheme) {
			return nil, fmt.Errorf("%w: %s is %s while Config.Broker is %s: a failover must not change the transport's security",
				ErrInvalid, field, security(u), security(endpoints[0]))
		}
		endpoints = append(endpoints, u)
	}
	if (cfg.Username != "" || cfg.Password != "") && !tlsScheme(endpoints[0].Scheme) && !cfg.AllowPlaintext {
		return nil, fmt.Errorf("%w: credentials set but %s is not TLS (ssl://, mqtts://): anyone on the path could read them; "+
			"use TLS, or set AllowPlaintext", ErrInvalid, endpoints[0].Redacted())
	}
	return endpoints, nil
}

func security(u *url.URL) string {
	if tlsScheme(u.Scheme) {
		return "TLS"
	}
	return "plaintext"
}

// Start launches the session loop; the first attempt waits inside the boot
// spread. The loop ends when ctx ends, Stop is called, or the timing gives up.
func (a *Agent) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return ErrAlreadyStarted
	}
	a.started = true
	ctx, a.cancel = context.WithCancel(ctx)
	a.runCtx = ctx
	a.inbox = newInbox(a.cfg.IncomingQueue, a.cfg.IncomingQueueBytes, a.clock, ctx.Done(), a.heldBack)
	go func() { defer close(a.delivered); a.inbox.run(a.deliver) }()
	go a.run(ctx)
	return nil
}

// Stop ends the session: it disconnects and waits, until ctx's deadline, for
// the loop to finish, and for a handler running to return. It returns
// ctx.Err() if the deadline came first. A connect attempt in progress is cut
// short (its socket closed), so Stop does not wait out ConnectTimeout
// against a broker that never answers; messages still queued for the
// handlers are dropped unacknowledged.
func (a *Agent) Stop(ctx context.Context) error {
	a.mu.Lock()
	cancel, started := a.cancel, a.started
	a.mu.Unlock()
	if !started {
		return nil
	}
	cancel()
	for _, done := range []chan struct{}{a.done, a.delivered} {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err() // a handler that never returns holds the delivery goroutine
		}
	}
	return nil
}

// Done is closed when the agent's loop has ended; Err then says why.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err returns why the loop ended (wrapping ErrGaveUp, ErrRefused or
// ErrStopped), or nil while it runs.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// AwaitConnection blocks until the session is up, ctx ends, or the agent
// stops.
func (a *Agent) AwaitConnection(ctx context.Context) error {
	a.mu.Lock()
	up := a.up
	a.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-a.done:
		return a.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Connected reports whether the session is up.
func (a *Agent) Connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.online
}

// Stats returns the counters.
func (a *Agent) Stats() Stats {
	s := Stats{Connects: a.connects.Load(), Losses: a.losses.Load(), Attempts: a.attempts.Load(),
		Waiting: time.Duration(a.waitNanos.Load())}
	a.mu.Lock()
	if a.inbox != nil {
		s.BackPressure = a.inbox.heldFor()
	}
	a.mu.Unlock()
	return s
}

// SetPolicy switches the reconnect policy from the next wait on (a validated
// configuration update does this).
func (a *Agent) SetPolicy(p *reconnect.Policy) {
	a.mMu.Lock()
	defer a.mMu.Unlock()
	a.m.SetPolicy(p)
}

func (a *Agent) step(f func(*Machine) Step) Step {
	a.mMu.Lock()
	defer a.mMu.Unlock()
	return f(a.m)
}

func (a *Agent) emit(e Event) {
	e.Time = a.clock.Now()
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(e)
	}
}

func (a *Agent) run(ctx context.Context) {
	var final error
	defer func() {
		a.mu.Lock()
		a.err = final
		cancel := a.cancel
		a.mu.Unlock()
		cancel() // the loop may end on its own (gave up, refused): the delivery goroutine ends with it
		close(a.done)
	}()
	s := a.step(func(m *Machine) Step { return m.Start(a.clock.Now()) })
	for {
		switch s.Kind {
		case KindWait:
			a.emit(Event{Kind: EventBackingOff, Attempt: int(s.Attempt), Delay: s.Wait})
			a.waitNanos.Add(int64(s.Wait))
			if err := reconnect.Sleep(ctx, a.clock, s.Wait); err != nil {
				final = fmt.Errorf("%w: %v", ErrStopped, err)
				return
			}
			s = a.step(func(m *Machine) Step { return m.Due(a.clock.Now()) })
		case KindConnect:
			endpoint := a.targetName()
			a.emit(Event{Kind: EventConnecting, Attempt: int(s.Attempt), Endpoint: endpoint})
			a.attempts.Add(1)
			r := a.proto.connect(ctx)
			if ctx.Err() != nil {
				a.proto.disconnect()
				final = fmt.Errorf("%w: %v", ErrStopped, ctx.Err())
				return
			}
			a.countAttempt(r)
			if r.Code != 0 || r.Err != nil {
				a.emit(Event{Kind: EventAttemptFailed, Attempt: int(s.Attempt), Code: r.Code, Err: r.Err, Endpoint: endpoint})
				a.log.Info("connect failed", "attempt", s.Attempt, "code", r.Code, "error", r.Err, "endpoint", endpoint)
				if !a.followRedirect(r.Err) {
					a.nextEndpoint()
				}
			} else {
				a.hops = 0
			}
			s = a.step(func(m *Machine) Step { return m.Result(a.clock.Now(), r) })
		case KindOnline:
			cause, stopped := a.session(ctx, int(s.Attempt), a.proto.sessionPresent())
			if stopped {
				final = fmt.Errorf("%w: %v", ErrStopped, ctx.Err())
				return
			}
			if !a.followRedirect(cause) {
				a.nextEndpoint()
			}
			s = a.step(func(m *Machine) Step { return m.Lost(a.clock.Now(), cause) })
		case KindStop:
			a.proto.disconnect()
			a.emit(Event{Kind: EventGaveUp, Attempt: int(s.Attempt), Err: s.Err})
			a.log.Error("giving up", "error", s.Err)
			final = s.Err
			return
		}
	}
}

// session runs one connection: restore subscriptions, then wait for the loss.
func (a *Agent) session(ctx context.Context, attempt int, resumed bool) (cause error, stopped bool) {
	a.connects.Add(1)
	a.mu.Lock()
	a.online = true // from here Subscribe subscribes at once
	a.mu.Unlock()
	// Restore before announcing: a caller of AwaitConnection may rely on its
	// subscriptions being in place. (One added meanwhile may be made twice,
	// which is harmless.)
	a.restoreSubscriptions()
	a.mu.Lock()
	close(a.up)
	a.mu.Unlock()
	endpoint := a.targetName()
	if m := a.cfg.Metrics; m != nil {
		m.SessionUp()
		defer func() { m.SessionDown(!stopped) }()
	}
	a.emit(Event{Kind: EventConnected, Attempt: attempt, SessionPresent: resumed, Endpoint: endpoint})
	a.log.Info("connected", "attempt", attempt, "session_present", resumed, "endpoint", endpoint,
		"tls", tlsScheme(a.target().Scheme))

	select {
	case cause = <-a.lost:
	case <-ctx.Done():
		stopped = true
	}
	a.mu.Lock()
	a.online = false
	select {
	case <-a.up:
		a.up = make(chan struct{})
	default: // lost while restoring: up was never closed
	}
	a.mu.Unlock()
	if stopped {
		a.proto.disconnect()
		return nil, true
	}
	if v := a.oversized(); v != nil {
		cause = v // paho's own error says only that a read failed
	} else if pe := a.brokeProtocol(); pe != nil {
		cause = pe
	}
	a.losses.Add(1)
	a.emit(Event{Kind: EventLost, Err: cause})
	a.log.Info("connection lost", "error", cause)
	return cause, false
}

// oversized reports the current connection's too-large packet, if it had
// one: as an event and to Metrics, once per connection.
func (a *Agent) oversized() *PacketTooLargeError {
	w := a.wire.Load()
	if w == nil {
		return nil
	}
	v := w.violation()
	if v == nil || !w.reported.CompareAndSwap(false, true) {
		return v
	}
	a.emit(Event{Kind: EventPacketTooLarge, Err: v})
	a.log.Warn("incoming packet over the limit; connection closed", "type", v.Type, "length", v.Length, "limit", v.Limit)
	if m, ok := a.cfg.Metrics.(PacketTooLargeCounter); ok {
		m.PacketTooLarge()
	}
	return v
}

// brokeProtocol reports the current connection's protocol error, if it
// had one, in the log once per connection.
func (a *Agent) brokeProtocol() *ProtocolError {
	w := a.wire.Load()
	if w == nil {
		return nil
	}
	v := w.protocolError()
	if v != nil && w.reported.CompareAndSwap(false, true) {
		a.log.Warn("the broker broke MQTT 3.1.1; connection closed", "error", v)
	}
	return v
}

// countAttempt tells Metrics an attempt's outcome.
func (a *Agent) countAttempt(r Result) {
	m := a.cfg.Metrics
	var pe *ProtocolError
	switch {
	case m == nil:
	case errors.As(r.Err, &pe):
		m.Attempt(AttemptProtocolError)
	case r.Code == 0 && r.Err == nil:
		m.Attempt(AttemptAccepted)
	case r.Code != NoConnack && r.Code != 0:
		m.Attempt(AttemptRefused)
	default:
		m.Attempt(AttemptFailed)
	}
}

// nextEndpoint sends the next attempt to the next endpoint in turn (and
// no longer where a broker redirected the last).
func (a *Agent) nextEndpoint() {
	a.redirected.Store(nil)
	a.endpoint.Store((a.endpoint.Load() + 1) % int32(len(a.endpoints)))
}

// newAttempt readies the agent for a connect attempt: a loss reported of
// an earlier session is stale, and the attempt is counted before it can
// complete anything (a resend may complete older publishes).
func (a *Agent) newAttempt() {
	select {
	case <-a.lost:
	default:
	}
	a.conns.Add(1)
	a.wire.Store(nil)
}

// wireGone is closed when the current connection closes: a message it
// brought that waits for the inbox gives up then. nil if there is none.
func (a *Agent) wireGone() <-chan struct{} {
	if w := a.wire.Load(); w != nil {
		return w.closed // the message came on it: paho reads one connection at a time
	}
	return nil
}

// Subscribe registers handler for topic. The subscription is made now if the
// session is up and again after every reconnect.
func (a *Agent) Subscribe(ctx context.Context, topic string, qos byte, handler Handler) error {
	if topic == "" || handler == nil || qos > 1 {
		return fmt.Errorf("%w: Subscribe needs a topic, a handler and QoS 0 or 1", ErrInvalid)
	}
	a.mu.Lock()
	a.subs[topic] = subscription{qos: qos, handler: handler}
	online := a.online
	a.mu.Unlock()
	if !online {
		return nil
	}
	return a.proto.subscribe(ctx, topic, subscription{qos: qos, handler: handler})
}

// deliver runs a message's handler, then acknowledges the message.
func (a *Agent) deliver(d delivery) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				err := fmt.Errorf("device: handler for %q panicked: %v", d.topic, r)
				a.log.Error("handler panicked", "topic", d.topic, "panic", r)
				a.emit(Event{Kind: EventHandlerPanic, Err: err})
			}
		}()
		d.handler(d.topic, d.payload)
	}()
	d.ack() // a panicking handler's message too: sent again, it would panic again
}

// heldBack tells Metrics of a hold of the incoming queue.
func (a *Agent) heldBack(d time.Duration) {
	if m, ok := a.cfg.Metrics.(BackPressureCounter); ok {
		m.BackPressure(d)
	}
}

// handlerFor is the handler for a message on topic: that of the one
// subscription it matches, or one that calls each of several in turn, as
// paho's router does on 3.1.1; nil if none matches.
func (a *Agent) handlerFor(topic string) Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	var hs []Handler
	for filter, s := range a.subs {
		if topicMatches(filter, topic) {
			hs = append(hs, s.handler)
		}
	}
	switch len(hs) {
	case 0:
		return nil
	case 1:
		return hs[0]
	}
	return func(topic string, payload []byte) {
		for _, h := range hs {
			h(topic, payload)
		}
	}
}

// ErrSubscriptionRefused is Subscribe's error when the broker answered the
// subscription with SUBACK 0x80 (failure). It stays registered: every
// reconnect tries it again.
var ErrSubscriptionRefused = errors.New("device: subscription refused by the broker")

func (a *Agent) restoreSubscriptions() {
	a.mu.Lock()
	subs := make(map[string]subscription, len(a.subs))
	for t, s := range a.subs {
		subs[t] = s
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ConnectTimeout)
	defer cancel()
	for topic, s := range subs {
		if err := a.proto.subscribe(ctx, topic, s); err != nil {
			a.log.Warn("could not restore subscription", "topic", topic, "error", err)
		}
	}
}

// Publish sends payload to topic. With QoS 1 it returns once the broker
// acknowledged it, or ctx ends. Without a session it fails at once with
// ErrNotConnected: queueing across outages is the publisher package's job.
//
// A QoS 1 publish succeeds only when its completion is seen on the
// connection it went out on; one completed after that connection ended
// returns ErrUnconfirmed (see Config.PersistentSession).
func (a *Agent) Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error {
	conn := a.conns.Load() // before Connected: a later attempt can only raise it
	if !a.Connected() {
		return ErrNotConnected
	}
	return a.proto.publish(ctx, conn, topic, qos, retained, payload)
}
