// The agent's Config, its defaults and the checks New makes of it.

package device

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/herdguard/herdguard/device/internal/transport"
	"github.com/herdguard/herdguard/internal/endpoint"
	"github.com/herdguard/herdguard/reconnect"
)

// DialFunc opens a connection to broker, an endpoint of Config's, for one
// attempt. ctx ends when the attempt's connect timeout passes or the agent
// stops. The dial should end with it. A DialFunc may be called from the
// agent's goroutines one attempt at a time. It must not keep ctx. A nil
// DialFunc (Config.Dial unset) means plain TCP or TLS. A DialFunc shared by
// several agents is called by each of them at once. It must then be safe
// for concurrent use.
type DialFunc func(ctx context.Context, broker *url.URL) (net.Conn, error)

// Config configures an Agent. Broker and ClientID are required. The rest
// has defaults. The zero Config is invalid: New refuses it. New copies the
// Config. The TLS and Timing it points to are only read, so a fleet may
// share them if they do not change. A Source must not be shared.
type Config struct {
	Broker string // tcp://host:1883, ssl://host:8883, or any URL Dial understands
	// Protocol is the MQTT version the agent speaks (the zero value,
	// MQTT311). MQTT 5 needs a build without the nomqtt5 tag; everything
	// this Config says holds on either.
	Protocol Protocol
	// Failover lists more endpoints, in the same forms as Broker. After a
	// failed attempt or a lost session, the next attempt goes to the next
	// endpoint in turn (Broker, Failover[0], ..., Broker again). A session
	// stays where it was made. The wait before each attempt is still the
	// policy's. A fleet that fails over reaches the survivor on the same
	// spread-out schedule it would have come back on, not all at once.
	Failover []string
	ClientID string
	// Credentials are the MQTT username and password, and where they may go.
	Credentials Credentials

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

	// Incoming bounds what a broker can make the agent hold.
	Incoming IncomingLimits

	// KeepAlive is the MQTT keepalive (0 means 30 s). After that long
	// without traffic the agent sends a PINGREQ. PingTimeout is how long it
	// then waits for the PINGRESP before it calls the connection dead (0
	// means 10 s). Together they bound how long a silent path goes
	// unnoticed: a NAT or load balancer that forgot the connection without
	// a reset. Such a path goes unnoticed for at most
	// KeepAlive + PingTimeout + min(KeepAlive/4, 5 s). The last term is how
	// often paho checks. A fleet's sessions start at different times. Their
	// pings, and the moments they notice, are thus spread over a keepalive.
	// KeepAlive is sent in whole seconds, at most 65,535 (MQTT's two bytes).
	KeepAlive   time.Duration
	PingTimeout time.Duration
	// ConnectTimeout bounds one connect attempt (0 means 10 s; paho fails
	// every connect at 0). Stopping the agent cuts an attempt short.
	ConnectTimeout time.Duration
	// Session is what the broker keeps of the device's session between
	// connections (the zero value: nothing).
	Session Session
	// Redirects is where an MQTT 5 broker may send the device.
	Redirects Redirects

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

// Credentials are an agent's MQTT credentials. Credentials in the Broker
// URL (tcp://user:pass@host) are taken as these.
type Credentials struct {
	// Username and Password go only to TLS endpoints unless AllowPlaintext
	// is set. The password is never logged and never in an error.
	Username string
	Password string
	// AllowPlaintext lets them go to plaintext (tcp://, mqtt://) endpoints,
	// where anyone on the path can read them: for a lab, or a broker on the
	// same host. New logs a warning when it is used. Mixing TLS and
	// plaintext endpoints is refused whatever it says: a failover must not
	// be a downgrade.
	AllowPlaintext bool
}

// IncomingLimits bound what a broker can make an agent hold: one packet,
// and the messages waiting for their handlers. Zero fields take their
// defaults.
type IncomingLimits struct {
	// MaxPacket bounds one incoming MQTT packet, in bytes of its remaining
	// length (0 means DefaultMaxIncomingPacket; at least MinIncomingPacket,
	// at most MQTT's 268,435,455). A packet that declares more closes the
	// connection before any of it is read: a PacketTooLargeError, reported
	// as EventPacketTooLarge and to Metrics, and the agent reconnects on the
	// policy's schedule.
	MaxPacket int
	// Queue and QueueBytes bound the messages waiting for their handlers,
	// the one being handled included. 0 means DefaultIncomingQueue (32)
	// and DefaultIncomingQueueBytes (1 MiB). One message is always taken,
	// whatever its size. Handlers run one at a time, in the order the
	// messages arrived. Past these bounds the agent reads no more from the
	// broker until a handler catches up (TCP's back-pressure).
	// Stats.BackPressure and BackPressureCounter count the time held so. A
	// handler held longer than KeepAlive + PingTimeout ends the session, as
	// the agent reads no PINGRESP meanwhile.
	Queue      int
	QueueBytes int
}

// Session is what a broker keeps of a device's session between its
// connections.
type Session struct {
	// Persistent asks the broker to keep the session across connections
	// (CleanSession false). Subscriptions and the QoS 1 messages sent to
	// the device while it was away survive a reconnect. EventConnected
	// says whether the broker resumed the session. paho resends an
	// unacknowledged publish on the next connection. In this mode, paho
	// reports it complete before its PUBACK. Publish returns
	// ErrUnconfirmed for it rather than success. A caller that removes a
	// message only when Publish succeeds thus still loses nothing.
	Persistent bool
	// Expiry is how long an MQTT 5 broker keeps a persistent session after
	// its connection ends (0 means a day). The broker may grant less, and
	// the agent takes what it grants. MQTT 3.1.1 has no such field.
	Expiry time.Duration
}

// Redirects is where an MQTT 5 broker may send a device with 0x9C (use
// another server) or 0x9D (server moved) and a Server Reference.
type Redirects struct {
	// Domains add to the hosts of Broker and Failover. "example.com"
	// allows example.com and every name under it. A reference elsewhere
	// is refused (EventRedirectRefused). The next attempt then goes where
	// it would have gone. A redirected attempt keeps the endpoint's scheme,
	// credentials and the policy's wait. TLS stays TLS, verified against
	// the new host's name.
	Domains []string
	// Max bounds the references followed in a row without a session (0
	// means 3): a broker cannot keep the device hopping.
	Max int
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
	user, pass, from := c.Credentials.Username != "", c.Credentials.Password != "", "none"
	if u, err := url.Parse(c.Broker); err == nil && u.User != nil {
		_, inURL := u.User.Password()
		user, pass, from = user || u.User.Username() != "", pass || inURL, "broker_url"
	} else if user || pass {
		from = "config"
	}
	return slog.GroupValue(append(attrs, slog.String("client_id", c.ClientID), slog.Bool("username_set", user),
		slog.Bool("password_set", pass), slog.String("credentials_from", from),
		slog.Bool("client_certificate", c.TLS != nil && len(c.TLS.Certificates) > 0),
		slog.Bool("allow_plaintext", c.Credentials.AllowPlaintext))...)
}

// withDefaults checks cfg's limits and timeouts and sets those left at 0
// to their defaults.
func withDefaults(cfg *Config) error {
	switch {
	case cfg.Incoming.MaxPacket != 0 && (cfg.Incoming.MaxPacket < MinIncomingPacket || cfg.Incoming.MaxPacket > transport.MaxRemainingLength):
		return configError("Incoming.MaxPacket", "{Incoming.MaxPacket} %d is outside [%d, %d] (0 means the default)",
			cfg.Incoming.MaxPacket, MinIncomingPacket, transport.MaxRemainingLength)
	case cfg.Incoming.MaxPacket == 0:
		cfg.Incoming.MaxPacket = DefaultMaxIncomingPacket
	}
	switch {
	case cfg.KeepAlive < 0:
		return configError("KeepAlive", "{KeepAlive} must be >= 0, got %v", cfg.KeepAlive)
	case cfg.PingTimeout < 0:
		return configError("PingTimeout", "{PingTimeout} must be >= 0, got %v", cfg.PingTimeout)
	case cfg.ConnectTimeout < 0:
		return configError("ConnectTimeout", "{ConnectTimeout} must be >= 0, got %v", cfg.ConnectTimeout)
	}
	if cfg.KeepAlive > MaxKeepAlive {
		// paho keeps 16 bits of it: 65,536 s would go out as 0, keepalive off.
		return configError("KeepAlive", "{KeepAlive} %v is over MQTT's %v", cfg.KeepAlive, MaxKeepAlive)
	}
	switch {
	case cfg.Incoming.Queue < 0:
		return configError("Incoming.Queue", "{Incoming.Queue} must be >= 0, got %d", cfg.Incoming.Queue)
	case cfg.Incoming.QueueBytes < 0:
		return configError("Incoming.QueueBytes", "{Incoming.QueueBytes} must be >= 0, got %d", cfg.Incoming.QueueBytes)
	case cfg.Protocol != MQTT311 && cfg.Protocol != MQTT5:
		return configError("Protocol", "unknown {Protocol} %d", cfg.Protocol)
	case cfg.Session.Expiry < 0:
		return configError("Session.Expiry", "{Session.Expiry} must be >= 0, got %v", cfg.Session.Expiry)
	case cfg.Redirects.Max < 0:
		return configError("Redirects.Max", "{Redirects.Max} must be >= 0, got %d", cfg.Redirects.Max)
	}
	for _, d := range cfg.Redirects.Domains {
		if !endpoint.HostName(strings.TrimSuffix(strings.ToLower(d), ".")) {
			return configError("Redirects.Domains", "{Redirects.Domains} entry %q is not a domain name (example.com)", d)
		}
	}
	if cfg.Session.Expiry == 0 {
		cfg.Session.Expiry = 24 * time.Hour
	}
	if cfg.Redirects.Max == 0 {
		cfg.Redirects.Max = 3
	}
	if cfg.Incoming.Queue == 0 {
		cfg.Incoming.Queue = DefaultIncomingQueue
	}
	if cfg.Incoming.QueueBytes == 0 {
		cfg.Incoming.QueueBytes = DefaultIncomingQueueBytes
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 30 * time.Second
	}
	if cfg.KeepAlive < time.Second {
		// MQTT counts the keepalive in whole seconds; below one it would be
		// sent as 0, which turns keepalive off: a silent path then goes
		// unnoticed for ever.
		return configError("KeepAlive", "{KeepAlive} %v is below MQTT's one-second unit", cfg.KeepAlive)
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

func tlsScheme(s string) bool { return endpoint.IsTLS(s) }

// isTLS says whether a broker URL is a TLS endpoint, by its scheme.
func isTLS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && tlsScheme(u.Scheme)
}

// redact returns a broker URL fit for a log, with the password masked. It
// returns a placeholder if the URL does not parse or has an '@' outside its
// user info. Such text might hold a password.
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
// ssl://u:pw/x@host has. url.Parse takes u for the host and pw for its
// port. The password would then reach logs and DNS.
func strayAt(u *url.URL) bool {
	return strings.ContainsRune(u.Opaque+u.Host+u.Path+u.RawPath+u.RawQuery+u.Fragment, '@')
}

// parseEndpoints parses Broker and Failover. It moves credentials from the
// Broker URL into cfg, as paho would use them only for its first URL. It
// enforces the transport rules: credentials only over TLS unless
// Credentials.AllowPlaintext, never TLS and plaintext mixed.
func parseEndpoints(cfg *Config) ([]*url.URL, error) {
	var endpoints []*url.URL
	for i, raw := range append([]string{cfg.Broker}, cfg.Failover...) {
		field := "Broker"
		if i > 0 {
			field = fmt.Sprintf("Failover[%d]", i-1)
		}
		mark := "{" + field + "}" // the field in a message, for ConfigError.Rename
		u, err := endpoint.ParseURL(mark, raw)
		if err != nil {
			return nil, configError(field, strings.ReplaceAll(err.Error(), "%", "%%"))
		}
		if strayAt(u) {
			return nil, configError(field, mark+" has an '@' outside its user info: if a password is in it, "+
				"write it as scheme://user:password@host, or set {Credentials.Username} and {Credentials.Password}")
		}
		if cfg.Dial == nil && !supportedScheme(u.Scheme) {
			return nil, configError(field, mark+" scheme %q is not one the agent dials itself (tcp, mqtt, ssl, tls, mqtts, tcps); "+
				"{Dial} may dial others", u.Scheme)
		}
		if u.User != nil {
			if i > 0 {
				return nil, configError(field, mark+" carries credentials: set {Credentials.Username} and {Credentials.Password}, "+
					"which every endpoint uses")
			}
			if cfg.Credentials.Username != "" || cfg.Credentials.Password != "" {
				return nil, configError("Broker", "credentials both in {Broker} and in {Credentials.Username} or {Credentials.Password}")
			}
			cfg.Credentials.Username = u.User.Username()
			cfg.Credentials.Password, _ = u.User.Password()
			u.User = nil
		}
		if len(endpoints) > 0 && tlsScheme(u.Scheme) != tlsScheme(endpoints[0].Scheme) {
			return nil, configError(field, mark+" is %s while {Broker} is %s: a failover must not change the transport's security",
				security(u), security(endpoints[0]))
		}
		endpoints = append(endpoints, u)
	}
	if (cfg.Credentials.Username != "" || cfg.Credentials.Password != "") && !tlsScheme(endpoints[0].Scheme) && !cfg.Credentials.AllowPlaintext {
		return nil, configError("Credentials.AllowPlaintext", "credentials set but %s is not TLS (ssl://, mqtts://): "+
			"anyone on the path could read them; use TLS, or set {Credentials.AllowPlaintext}", endpoints[0].Redacted())
	}
	return endpoints, nil
}

func security(u *url.URL) string { return endpoint.Security(u) }

// ConfigError is New's refusal of a Config. Its message names the fields
// it concerns as Go does: Config.Broker, Config.Failover[1]. Rename says
// the same with other names for them, as a command names its flags. It
// wraps ErrInvalid. The zero ConfigError says nothing: New makes them.
// Once made one is not changed, so it is safe to share.
type ConfigError struct {
	// Field is the Config field at fault, as Go names it: "Broker",
	// "Failover[1]", "Incoming.MaxPacket".
	Field string
	// format is the message, each field it names written {Field}; args
	// are its verbs' values, which Rename never reads for fields.
	format string
	args   []any
}

func configError(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, format: format, args: args}
}

func (e *ConfigError) Error() string {
	return ErrInvalid.Error() + ": " + e.Rename(func(field string) string { return "Config." + field })
}

// Unwrap returns ErrInvalid.
func (e *ConfigError) Unwrap() error { return ErrInvalid }

// Rename returns the message without Error's prefix, each field it names
// called name(field): name("Failover[1]") for the second failover.
func (e *ConfigError) Rename(name func(field string) string) string {
	var f strings.Builder
	rest := e.format
	for {
		open := strings.IndexByte(rest, '{')
		end := strings.IndexByte(rest[max(open, 0):], '}')
		if open < 0 || end < 0 {
			break
		}
		f.WriteString(rest[:open])
		f.WriteString(strings.ReplaceAll(name(rest[open+1:open+end]), "%", "%%"))
		rest = rest[open+end+1:]
	}
	f.WriteString(rest)
	return fmt.Sprintf(f.String(), e.args...)
}

// The defaults of Config.Incoming.Queue and QueueBytes: enough to
// ride out a handler's pause, little enough for any device.
const (
	DefaultIncomingQueue      = 32
	DefaultIncomingQueueBytes = 1 << 20
)
