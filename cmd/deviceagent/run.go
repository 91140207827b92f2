package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/remoteconfig"
)

// options are the agent's settings. Each flag falls back to an environment
// variable: HERDGUARD_ and the flag's name in capitals, dashes as
// underscores. A container or a systemd unit can thus configure it either
// way. The password is never a flag, as flags show in process listings. It
// comes from HERDGUARD_PASSWORD or -password-file. Nor is any URL that may
// carry a credential: such a broker or config URL comes from the
// environment only.
type options struct {
	sessionFlags
	secretFlags
	waitFlags
	configURL, dataDir, topic, events string
	data                              *datadir.Dir // dataDir, held open while the agent runs
	logLevel                          string
	fromEnv                           map[string]bool // the flags the environment set
}

// sessionFlags say where the MQTT session goes and how it speaks.
type sessionFlags struct {
	broker, failover, clientID, username string
	mqttVersion, redirectDomains         string
	keepAlive, pingTimeout               time.Duration
	maxPacket                            byteSize
	allowLargePackets                    bool
}

// secretFlags are the credentials and the TLS files.
type secretFlags struct {
	password, passwordFile string
	passwordFrom           string // where the password came from, for the log
	ca, cert, key          string
	allowPlaintext         bool
	allowOpenSecrets       bool
}

// waitFlags are the agent's waits: the mission's formula (until a remote
// configuration sets its own), the boot spread, the heartbeat and the stop.
type waitFlags struct {
	reconnectBase, reconnectJitter, maxBackoff time.Duration
	heartbeat, bootSpread, stopTimeout         time.Duration
}

// envName is the environment variable a flag falls back to.
func envName(flag string) string {
	return "HERDGUARD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// parse reads the options from the command line, then from the
// environment for what it left unset, and checks them.
func parse(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	if err := refusePasswordFlag(args); err != nil {
		return nil, err
	}
	o := &options{sessionFlags: sessionFlags{maxPacket: device.DefaultMaxIncomingPacket}}
	fs := o.flagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if o.fromEnv, err = fillFromEnv(fs, getenv); err != nil {
		return nil, err
	}
	if o.password, o.passwordFrom, err = password(o.passwordFile, o.allowOpenSecrets, getenv); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// refusePasswordFlag refuses a -password flag before any flag is parsed, so
// that the error says why rather than that the flag is unknown.
func refusePasswordFlag(args []string) error {
	for _, a := range args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "password" {
			return errors.New("-password is not accepted: flags show in process listings; " +
				"set HERDGUARD_PASSWORD in the environment or use -password-file")
		}
		if a == "--" {
			break
		}
	}
	return nil
}

// flagSet defines the agent's flags on o.
func (o *options) flagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("deviceagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage of deviceagent (every flag may instead be set in the environment as HERDGUARD_ and its name\n"+
			"in capitals, dashes as underscores: HERDGUARD_CLIENT_ID; the MQTT password only as HERDGUARD_PASSWORD or in -password-file):\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.broker, "broker", "", "broker URL: ssl://host:8883 (or tcp://host:1883 without credentials) (required)")
	fs.StringVar(&o.mqttVersion, "mqtt-version", "3.1.1", "MQTT version: 3.1.1 or 5 (whose reason codes shape the backoff)")
	fs.StringVar(&o.redirectDomains, "redirect-domains", "", "MQTT 5: comma-separated domains a broker may redirect the device to, beyond its endpoints")
	fs.StringVar(&o.failover, "failover", "", "more broker URLs, comma-separated, tried in turn after a failure")
	fs.StringVar(&o.clientID, "client-id", "", "MQTT client ID (required)")
	fs.StringVar(&o.username, "username", "", "MQTT user name")
	fs.StringVar(&o.passwordFile, "password-file", "", "file holding the MQTT password (or HERDGUARD_PASSWORD; never a flag: flags show in process listings)")
	fs.BoolVar(&o.allowPlaintext, "allow-plaintext", false, "allow credentials over tcp:// and the configuration over http:// (anyone on the path reads them)")
	fs.StringVar(&o.ca, "ca", "", "PEM file of the CA that signs the broker and the config server (default: the system's)")
	fs.StringVar(&o.cert, "cert", "", "PEM device certificate, for mutual TLS with the broker and the config server")
	fs.StringVar(&o.key, "key", "", "PEM device key, for mutual TLS; refused if group or others may read it or another user owns it")
	fs.BoolVar(&o.allowOpenSecrets, "allow-open-secret-files", false, "use a -key or -password-file that group or others may read or write (logged); never another user's")
	fs.StringVar(&o.configURL, "config-url", "", "https URL of this device's JSON configuration; redirects only to https on the same host; "+
		"one with user info or a query (a token) only as HERDGUARD_CONFIG_URL")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory kept across reboots (the last good configuration and the telemetry queue); made 0700, refused if another user owns it")
	fs.StringVar(&o.topic, "topic", "devices/{id}/heartbeat", "heartbeat topic; {id} is the client ID")
	fs.StringVar(&o.events, "event-topic", "devices/{id}/events", "topic of the agent's own events (a damaged queue); {id} is the client ID")
	fs.DurationVar(&o.heartbeat, "heartbeat", 30*time.Second, "heartbeat interval")
	fs.DurationVar(&o.bootSpread, "boot-spread", 10*time.Second, "the first connect waits a random time up to this")
	f := reconnect.DefaultIoTCore
	fs.DurationVar(&o.reconnectBase, "reconnect-base", f.Base, "the reconnect formula's base: wait n is min(base x 2^n + U[0, jitter), max-backoff)")
	fs.DurationVar(&o.reconnectJitter, "reconnect-jitter", f.Jitter, "the reconnect formula's jitter (a remote configuration may set the three)")
	fs.DurationVar(&o.maxBackoff, "max-backoff", f.MaxBackoff, "the reconnect formula's cap")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 5*time.Second, "how long a clean stop may take")
	fs.DurationVar(&o.keepAlive, "keepalive", 30*time.Second, "MQTT keepalive, 1s to 65535s: with -ping-timeout, how soon a silent path is noticed")
	fs.DurationVar(&o.pingTimeout, "ping-timeout", 10*time.Second, "how long to wait for a PINGRESP before calling the connection dead")
	fs.Var(&o.maxPacket, "max-packet", "the largest MQTT packet the device reads, such as 256KiB or 1MiB, at most 16MiB: a bigger one closes the connection before it is read")
	fs.BoolVar(&o.allowLargePackets, "allow-large-packets", false, "allow -max-packet above 16MiB (a broker could make the device hold that much)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	return fs
}

// fillFromEnv sets each flag the command line left unset from its
// environment variable, and returns which it set. It is read after
// parsing, never as a default, so usage text cannot print it. A URL flag
// that might carry a password is refused.
func fillFromEnv(fs *flag.FlagSet, getenv func(string) string) (map[string]bool, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"broker", "failover"} {
		if set[name] && mayHoldPassword(fs.Lookup(name).Value.String()) {
			return nil, fmt.Errorf("-%s has an '@', so it may carry a password, and flags show in process listings; "+
				"set the URL in %s, or the password in HERDGUARD_PASSWORD or -password-file", name, envName(name))
		}
	}
	if set["config-url"] {
		if err := refuseCredentialURL(fs.Lookup("config-url").Value.String()); err != nil {
			return nil, err
		}
	}
	fromEnv := map[string]bool{}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(envName(f.Name))
		if set[f.Name] || v == "" || envErr != nil {
			return
		}
		if err := f.Value.Set(v); err != nil {
			envErr = fmt.Errorf("-%s: %s is not valid: %v", f.Name, envName(f.Name), err)
		}
		fromEnv[f.Name] = true
	})
	return fromEnv, envErr
}

// validate checks what the agent cannot run without.
func (o *options) validate() error {
	switch {
	case o.broker == "":
		return errors.New("-broker (or HERDGUARD_BROKER) is required")
	case o.clientID == "":
		return errors.New("-client-id (or HERDGUARD_CLIENT_ID) is required")
	case o.heartbeat <= 0:
		return fmt.Errorf("-heartbeat must be a positive duration, got %v", o.heartbeat)
	case o.bootSpread <= 0:
		return fmt.Errorf("-boot-spread must be a positive duration, got %v", o.bootSpread)
	case o.stopTimeout <= 0:
		return fmt.Errorf("-stop-timeout must be a positive duration, got %v", o.stopTimeout)
	case o.keepAlive < time.Second || o.keepAlive > device.MaxKeepAlive:
		return fmt.Errorf("-keepalive must be from 1s to 65535s (MQTT counts it in seconds, in 16 bits), got %v", o.keepAlive)
	case int(o.maxPacket) > maxPacketUnlessAllowed && !o.allowLargePackets:
		return fmt.Errorf("-max-packet %v is over 16MiB: a broker, or anyone on a plaintext path, could make the device hold that much "+
			"for one packet; set -allow-large-packets if the device can afford it", &o.maxPacket)
	case o.pingTimeout <= 0:
		return fmt.Errorf("-ping-timeout must be a positive duration, got %v", o.pingTimeout)
	case !isProtocol(o.mqttVersion):
		return fmt.Errorf("-mqtt-version must be 3.1.1 or 5, got %q", o.mqttVersion)
	}
	// The formula's flags are held to the bounds a remote configuration
	// is: no flag or environment variable turns backoff off either.
	d := remoteconfig.Document{Reconnect: &remoteconfig.ReconnectTuning{Base: remoteconfig.Duration(o.reconnectBase),
		Jitter: remoteconfig.Duration(o.reconnectJitter), MaxBackoff: remoteconfig.Duration(o.maxBackoff)}}
	if err := remoteconfig.DefaultBounds.Check(d); err != nil {
		return fmt.Errorf("-reconnect-base, -reconnect-jitter, -max-backoff: %w", err)
	}
	return nil
}

// isProtocol says whether v names an MQTT version the agent speaks.
func isProtocol(v string) bool {
	_, err := device.ParseProtocol(v)
	return err == nil
}

// refuseCredentialURL refuses a -config-url that may carry a credential:
// user info (an '@', escaped or not, anywhere, as for -broker) or a query
// string (a token, a signature: no list of names could be complete, and
// the server needs none in a flag). The same URL may come from the
// environment, which ps does not show; the device's certificate (-cert,
// -key) authenticates it to the server too. The error never quotes it.
func refuseCredentialURL(configURL string) error {
	why := ""
	switch {
	case mayHoldPassword(configURL):
		why = "has an '@', so it may carry a user and password"
	case strings.Contains(configURL, "?"):
		why = "has a query string, so it may carry a token or a signature"
	default:
		return nil
	}
	return fmt.Errorf("-config-url %s, and flags show in process listings; set the URL in %s instead, "+
		"or authenticate the device with -cert and -key", why, envName("config-url"))
}

// mayHoldPassword says whether a URL flag's value might carry a password:
// whether it has an '@', escaped or not, anywhere. However its URLs are
// spelt (ssl://u:pw@host, ssl://u:pw/x@host, a comma in the password),
// user info needs one, and no broker URL needs one anywhere else.
func mayHoldPassword(urls string) bool {
	return strings.Contains(urls, "@") || strings.Contains(strings.ToUpper(urls), "%40")
}

// password reads the MQTT password from the environment or from file (one
// line; a trailing newline is not part of it), and says where it came
// from.
func password(file string, allowOpen bool, getenv func(string) string) (pw, from string, err error) {
	env := getenv("HERDGUARD_PASSWORD")
	if file == "" {
		if env == "" {
			return "", "", nil
		}
		return env, "HERDGUARD_PASSWORD", nil
	}
	if env != "" {
		return "", "", errors.New("-password-file and HERDGUARD_PASSWORD are both set: use one")
	}
	b, err := readSecret("-password-file", file, allowOpen, maxSecretFile+1) // the password, then "\r\n"
	if err != nil {
		return "", "", err
	}
	pw = strings.TrimRight(string(b), "\r\n")
	if len(pw) > maxSecretFile-1 {
		return "", "", fmt.Errorf("-password-file %s holds more than MQTT's 65535-byte password", file)
	}
	return pw, "-password-file " + file, nil
}

// openSecrets names the secret files group or others may read, for the
// log of a run that allowed them.
func (o *options) openSecrets() []string {
	var open []string
	for _, file := range []string{o.key, o.passwordFile} {
		if fi, err := os.Stat(file); file != "" && err == nil && fi.Mode().Perm()&0o077 != 0 {
			open = append(open, file)
		}
	}
	return open
}

// maxPacketFlag is the largest -max-packet: MQTT's largest packet;
// maxPacketUnlessAllowed the largest without -allow-large-packets.
const (
	maxPacketFlag          = 1<<28 - 1
	maxPacketUnlessAllowed = 16 << 20
)

// byteSize is a flag for a size in bytes, with an optional KiB or MiB.
type byteSize int

func (b *byteSize) String() string {
	switch n := int(*b); {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return strconv.Itoa(n)
	}
}

func (b *byteSize) Set(s string) error {
	mult := 1
	for suffix, m := range map[string]int{"KiB": 1 << 10, "MiB": 1 << 20} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.Atoi(s)
	// int is 32 bits on ARM: no product may overflow
	if err != nil || n <= 0 || n > maxPacketFlag/mult || n*mult < device.MinIncomingPacket {
		return fmt.Errorf("want a size from %d to %d bytes (MQTT's largest packet), such as 262144, 256KiB or 1MiB", device.MinIncomingPacket, maxPacketFlag)
	}
	*b = byteSize(n * mult)
	return nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	o, err := parse(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("device", o.clientID)
	device.RoutePahoLogs(log)

	agent, cfg, err := newAgent(o, log)
	if err != nil {
		return err
	}
	o.logCredentials(log)
	if o.dataDir != "" { // kept across reboots: the last good config and the telemetry queue
		d, err := datadir.Open(o.dataDir, log.Warn)
		if err != nil {
			return fmt.Errorf("-data-dir: %w", err)
		}
		defer d.Close()
		o.data = d
	}
	// The config store and the queue are opened (or refused) before anything
	// runs: a refused data directory must find nothing fetched, written or sent.
	hb := &heartbeat{interval: o.heartbeat}
	var fetcher *remoteconfig.Fetcher
	if o.configURL != "" {
		if fetcher, err = newFetcher(o, cfg.TLS, agent, hb, log); err != nil {
			return err
		}
	}
	pub, err := newPublisher(o, agent, log)
	if err != nil {
		return err
	}
	defer pub.Close()
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		wg.Wait()
	}()
	if fetcher != nil {
		wg.Add(1)
		go func() { defer wg.Done(); fetcher.Run(runCtx) }()
	}
	log.Info("starting", "config", cfg)
	if err := agent.Start(runCtx); err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); deliver(runCtx, pub, agent.Done(), time.Minute, log) }()
	topic := strings.ReplaceAll(o.topic, "{id}", o.clientID)
	wg.Add(1)
	go func() { defer wg.Done(); hb.run(runCtx, pub, topic, log) }()

	select {
	case <-ctx.Done():
		log.Info("stopping")
	case <-agent.Done():
	}
	return stop(agent, o.stopTimeout, log)
}

// newAgent makes the agent the options describe, and returns the Config it
// was made from (its TLS serves the config server too).
func newAgent(o *options, log *slog.Logger) (*device.Agent, device.Config, error) {
	timing := device.DefaultTiming()
	timing.BootSpread = o.bootSpread
	policy, err := reconnect.New(reconnect.IoTCore{Base: o.reconnectBase, Jitter: o.reconnectJitter, MaxBackoff: o.maxBackoff},
		reconnect.Limits{MaxRetries: reconnect.RetryForever})
	if err != nil {
		return nil, device.Config{}, err
	}
	timing.Policy = policy
	failover := commaList(o.failover)
	cfg := device.Config{Broker: o.broker, Failover: failover, ClientID: o.clientID,
		Credentials: device.Credentials{Username: o.username, Password: o.password, AllowPlaintext: o.allowPlaintext},
		Incoming:    device.IncomingLimits{MaxPacket: int(o.maxPacket)},
		KeepAlive:   o.keepAlive, PingTimeout: o.pingTimeout, Timing: &timing, Logger: log,
		Redirects: device.Redirects{Domains: commaList(o.redirectDomains)}}
	cfg.Protocol, _ = device.ParseProtocol(o.mqttVersion) // checked with the flags
	if cfg.TLS, err = o.loadTLS(); err != nil {
		return nil, cfg, err
	}
	agent, err := device.New(cfg)
	if err != nil {
		return nil, cfg, namingFlags(err)
	}
	if o.allowPlaintext {
		log.Warn("-allow-plaintext: credentials and configuration may cross the network in the clear")
	}
	return agent, cfg, nil
}

// commaList splits a comma-separated flag, dropping empty items.
func commaList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// logCredentials says where the credentials came from, never what they
// are, and which secret files others may read, if that was allowed.
func (o *options) logCredentials(log *slog.Logger) {
	user, pass := "none", o.passwordFrom
	switch {
	case o.username != "" && o.fromEnv["username"]:
		user = envName("username")
	case o.username != "":
		user = "-username"
	}
	if u, err := url.Parse(o.broker); err == nil && u.User != nil {
		user = envName("broker") // a flag with user info was refused
		if _, ok := u.User.Password(); ok {
			pass = envName("broker")
		}
	}
	if pass == "" {
		pass = "none"
	}
	log.Info("credentials", "username_from", user, "password_from", pass, "client_certificate", o.cert != "")
	if open := o.openSecrets(); len(open) > 0 {
		log.Warn("-allow-open-secret-files: group or others may read these", "files", strings.Join(open, ", "))
	}
}

// newFetcher makes the fetcher of the device's configuration, trusting what
// the broker is trusted by. It applies the last good configuration from
// before the reboot, if the data directory keeps one.
func newFetcher(o *options, trust *tls.Config, agent *device.Agent, hb *heartbeat, log *slog.Logger) (*remoteconfig.Fetcher, error) {
	fc := remoteconfig.Config{URL: o.configURL, TLS: trust, AllowPlaintext: o.allowPlaintext, Logger: log, FirstSpread: o.bootSpread, OnApply: func(c remoteconfig.Document) {
		if p, err := c.Policy(); err == nil && p != nil {
			agent.SetPolicy(p)
		}
		if c.HeartbeatInterval > 0 {
			hb.set(time.Duration(c.HeartbeatInterval))
		}
	}}
	if o.data != nil {
		fc.Store = remoteconfig.FileStore{Dir: o.data.File(), Path: "config.json"}
	}
	fetcher, err := remoteconfig.New(fc)
	if err != nil {
		return nil, namingFlags(err)
	}
	if c, ok := fetcher.Current(); ok {
		fc.OnApply(c)
	}
	return fetcher, nil
}

// newPublisher opens the telemetry queue and the publisher on it. A queue
// found damaged (and moved aside) is also told to the fleet's operators as
// an event. A device's log is rarely read.
func newPublisher(o *options, agent *device.Agent, log *slog.Logger) (*publisher.Publisher, error) {
	store, damage, err := openQueue(o.data, log)
	if err != nil {
		return nil, err
	}
	pub, err := publisher.New(publisher.Config{Session: agent, Store: store, Logger: log})
	if err != nil {
		store.Close()
		return nil, err
	}
	if damage != nil {
		event, _ := json.Marshal(map[string]string{"event": "telemetry-queue-damaged", "error": damage.Err.Error(),
			"moved_to": damage.MovedTo, "epoch": pub.Epoch()})
		if _, err := pub.Publish(strings.ReplaceAll(o.events, "{id}", o.clientID), event); err != nil {
			log.Warn("damage event not queued", "error", err)
		}
	}
	return pub, nil
}

// stop stops the agent within timeout and says why it ended. It returns nil
// for a stop that was asked for. It returns the agent's error if the agent
// gave up or was refused. Firmware supervision decides what comes next.
func stop(agent *device.Agent, timeout time.Duration, log *slog.Logger) error {
	stopCtx, stopCancel := context.WithTimeout(context.Background(), timeout)
	defer stopCancel()
	if err := agent.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if err := agent.Err(); err != nil && !errors.Is(err, device.ErrStopped) {
		return err
	}
	log.Info("stopped", "stats", fmt.Sprintf("%+v", agent.Stats()))
	return nil
}

// deliver runs the publisher until ctx ends or the session is over for good
// (agentDone). Run also stops on a store error. A full disk can fail even
// the removal of a delivered message. That stop is logged. Delivery starts
// again after retry rather than never.
func deliver(ctx context.Context, pub *publisher.Publisher, agentDone <-chan struct{}, retry time.Duration, log *slog.Logger) {
	for {
		err := pub.Run(ctx)
		select {
		case <-ctx.Done():
			return
		case <-agentDone:
			return // the agent stopped or gave up: Run's error is the agent's, and run reports it
		default:
		}
		log.Error("telemetry delivery stopped; trying again", "in", retry, "error", err)
		if reconnect.Sleep(ctx, reconnect.SystemClock, retry) != nil {
			return
		}
	}
}

// heartbeat enqueues a timestamp every interval.
type heartbeat struct {
	mu       sync.Mutex
	interval time.Duration
}

func (h *heartbeat) set(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.interval = d
}

func (h *heartbeat) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.interval
}

// run enqueues a heartbeat every interval, connected or not: the publisher
// keeps them across outages and delivers them in order.
func (h *heartbeat) run(ctx context.Context, pub *publisher.Publisher, topic string, log *slog.Logger) {
	for {
		if _, err := pub.Publish(topic, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
			log.Warn("heartbeat not queued", "error", err)
		}
		t := time.NewTimer(h.get())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// openQueue opens the telemetry queue: durable in the data directory if
// there is one, else in memory. A damaged queue file is moved aside (or kept
// with a new epoch), logged and returned as damage; the agent goes on. A
// queue another process holds is an error: two agents must not share a data
// directory; so is one that is not the agent's own (publisher.ErrNotPrivate).
func openQueue(data *datadir.Dir, log *slog.Logger) (publisher.Store, *publisher.CorruptStoreError, error) {
	if data == nil {
		return &publisher.MemoryStore{}, nil, nil
	}
	s, err := publisher.OpenBoltStore("queue.db", publisher.BoltOptions{Dir: data.File()})
	var damage *publisher.CorruptStoreError
	if errors.As(err, &damage) {
		log.Error("telemetry queue was damaged", "error", err, "moved_to", damage.MovedTo)
		return s, damage, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry queue: %w", err)
	}
	return s, nil, nil
}
