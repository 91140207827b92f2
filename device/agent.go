package device

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdguard/herdguard/device/internal/inbox"
	"github.com/herdguard/herdguard/device/internal/transport"
	"github.com/herdguard/herdguard/internal/endpoint"
	"github.com/herdguard/herdguard/reconnect"
)

// Errors returned by the Agent's methods.
var (
	// ErrNotConnected: Publish or a subscription needs a session and there is none.
	ErrNotConnected = transport.ErrNotConnected
	// ErrStopped: the agent was stopped (Stop, or the Start context ended).
	ErrStopped = errors.New("device: agent stopped")
	// ErrAlreadyStarted: Start was called twice.
	ErrAlreadyStarted = errors.New("device: agent already started")
	// ErrUnconfirmed: a QoS 1 publish completed without proof of a PUBACK.
	// The connection it went out on ended before paho reported it done.
	// paho v1.5.1 completes such a publish when it resends it on the next
	// connection of a persistent session, before any PUBACK. The message
	// may or may not have arrived: publish it again (package publisher
	// does). On MQTT 5 it is a publish whose connection ended before its
	// PUBACK and whose session did not survive to resend it. When the
	// session does survive, paho.golang waits for the resend's PUBACK.
	ErrUnconfirmed = transport.ErrUnconfirmed
	// ErrPublishRefused: an MQTT 5 broker answered a QoS 1 publish with a
	// PUBACK reason code of 0x80 or more (not authorized, quota exceeded,
	// ...). The message did not arrive.
	ErrPublishRefused = transport.ErrPublishRefused
	// ErrTooLargeForBroker: the publish is over the Maximum Packet Size the
	// MQTT 5 broker named in its CONNACK; it was not sent (the broker would
	// have ended the session for it).
	ErrTooLargeForBroker = transport.ErrTooLargeForBroker
)

// Handler receives a message on a subscribed topic. Handlers run on the
// agent's delivery goroutine, one message at a time, in the order the
// messages arrived; a QoS 1 message is acknowledged once its handler
// returns. A panic in one is recovered and reported. A slow handler holds
// the messages after it (Config.Incoming.Queue). Subscribe refuses a nil
// Handler.
type Handler func(topic string, payload []byte)

type subscription struct {
	qos     byte // asked for
	granted byte // the broker's answer, qos until it gives one
	handler Handler
}

// Agent keeps one device's MQTT session, 3.1.1 or 5 (Config.Protocol). It
// owns every connect's timing, as the client's own reconnect is off. It
// restores subscriptions on every reconnect. It reports its state through
// channels and a non-blocking event callback. Its methods are safe for
// concurrent use. The zero value is not usable: use New.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	clock reconnect.Clock
	proto transport.Client // the MQTT version spoken: paho (3.1.1) or paho.golang (5)
	m     *Machine
	mMu   sync.Mutex // guards m against SetPolicy from config updates

	route
	wire   atomic.Pointer[transport.Conn] // the current attempt's connection
	lost   chan error
	runCtx context.Context // set by Start before the loop; ends attempts
	tally
	// maxQoS is the highest QoS granted to any subscription: the guard
	// refuses a PUBLISH above it before the client keeps it.
	maxQoS atomic.Uint32

	inbox     *inbox.Queue  // made by Start: messages on their way to the handlers
	delivered chan struct{} // closed when the inbox's goroutine ends

	lifecycle
}

// route is where the next attempt goes.
type route struct {
	endpoints []*url.URL   // Broker, then Failover (without credentials)
	names     []string     // the endpoints as logged
	endpoint  atomic.Int32 // the one the next attempt goes to
	// redirected, if set, is where an MQTT 5 broker sent the device: the
	// next attempt goes there instead, and the session made there stays.
	redirected atomic.Pointer[url.URL]
	// references followed since the last session (the loop's alone)
	hops int
}

// tally counts what the agent did, for Stats.
type tally struct {
	// conns counts connect attempts: a publish whose completion is seen
	// under a later count than its start may have been completed by paho's
	// resend rather than by a PUBACK.
	conns                                 atomic.Uint64
	connects, losses, attempts, waitNanos atomic.Int64
	unsolicited                           atomic.Int64
}

// lifecycle is the agent's state that mu guards: its subscriptions, and
// whether it is started, online and done.
type lifecycle struct {
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
	switch {
	case cfg.Broker == "":
		return nil, configError("Broker", "{Broker} is required")
	case cfg.ClientID == "":
		return nil, configError("ClientID", "{ClientID} is required")
	}
	endpoints, err := parseEndpoints(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.TLS, err = endpoint.StrictTLS("{TLS}", cfg.TLS); err != nil {
		return nil, configError("TLS", strings.ReplaceAll(err.Error(), "%", "%%"))
	}
	if err := withDefaults(&cfg); err != nil {
		return nil, err
	}
	m, err := NewMachine(cfg.Timing, cfg.Source)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, m: m, lost: make(chan error, 1), route: route{endpoints: endpoints},
		lifecycle: lifecycle{subs: map[string]subscription{}, up: make(chan struct{}), done: make(chan struct{})}, delivered: make(chan struct{})}
	for _, u := range endpoints {
		a.names = append(a.names, u.String())
	}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if a.clock == nil {
		a.clock = reconnect.SystemClock
	}
	if cfg.Credentials.AllowPlaintext && (cfg.Credentials.Username != "" || cfg.Credentials.Password != "") && !tlsScheme(endpoints[0].Scheme) {
		a.log.Warn("credentials will cross the network in the clear", "endpoints", strings.Join(a.names, ", "),
			"allow_plaintext", true)
	}
	if a.proto, err = newProtocol(a); err != nil {
		return nil, err
	}
	return a, nil
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
	a.inbox = inbox.New(a.cfg.Incoming.Queue, a.cfg.Incoming.QueueBytes, a.clock, ctx.Done(), a.heldBack)
	go func() { defer close(a.delivered); a.inbox.Run(a.deliver) }()
	go a.run(ctx)
	return nil
}

// Stop ends the session. It disconnects and waits, until ctx's deadline,
// for the loop to finish and for a handler running to return. It returns
// ctx.Err() if the deadline came first. A connect attempt in progress is
// cut short (its socket closed). Stop therefore does not wait out
// ConnectTimeout against a broker that never answers. Messages still queued
// for the handlers are dropped unacknowledged.
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
		Waiting: time.Duration(a.waitNanos.Load()), Unsolicited: a.unsolicited.Load()}
	a.mu.Lock()
	if a.inbox != nil {
		s.BackPressure = a.inbox.HeldFor()
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

// step runs f on the machine and returns its Step, with what chose the
// Step's wait if it is one.
func (a *Agent) step(f func(*Machine) Step) (Step, waitReason) {
	a.mMu.Lock()
	defer a.mMu.Unlock()
	s := f(a.m)
	return s, a.m.why
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
		// the loop may end on its own (gave up, refused): the delivery
		// goroutine ends with it
		cancel()
		close(a.done)
	}()
	s, why := a.step(func(m *Machine) Step { return m.Start(a.clock.Now()) })
	a.logWait("waiting to connect", s, why)
	for {
		switch s.Kind {
		case KindWait:
			a.emit(Event{Kind: EventBackingOff, Attempt: s.Attempt, Delay: s.Wait})
			a.waitNanos.Add(int64(s.Wait))
			if err := reconnect.Sleep(ctx, a.clock, s.Wait); err != nil {
				final = fmt.Errorf("%w: %v", ErrStopped, err)
				return
			}
			if s, why = a.step(func(m *Machine) Step { return m.Due(a.clock.Now()) }); s.Kind == KindWait {
				a.logWait("waiting to connect", s, why)
			}
		case KindConnect:
			if s, final = a.attempt(ctx, s); final != nil {
				return
			}
		case KindOnline:
			cause, stopped := a.session(ctx, s.Attempt, a.proto.SessionPresent())
			if stopped {
				final = fmt.Errorf("%w: %v", ErrStopped, ctx.Err())
				return
			}
			endpoint := a.targetName() // before a redirect or the next endpoint takes its place
			if !a.followRedirect(cause) {
				a.nextEndpoint()
			}
			s, why = a.step(func(m *Machine) Step { return m.Lost(a.clock.Now(), cause) })
			a.logWait("connection lost", s, why, "endpoint", endpoint, "error", cause)
		case KindStop:
			a.proto.Disconnect()
			a.emit(Event{Kind: EventGaveUp, Attempt: s.Attempt, Err: s.Err})
			a.log.Error("giving up", "error", s.Err)
			final = s.Err
			return
		}
	}
}

// attempt makes the connect attempt s asks for and returns the machine's
// next step. It returns ErrStopped if the agent stopped meanwhile.
func (a *Agent) attempt(ctx context.Context, s Step) (Step, error) {
	endpoint := a.targetName()
	a.emit(Event{Kind: EventConnecting, Attempt: s.Attempt, Endpoint: endpoint})
	a.attempts.Add(1)
	r := a.result(a.proto.Connect(ctx))
	if ctx.Err() != nil {
		a.proto.Disconnect()
		return s, fmt.Errorf("%w: %v", ErrStopped, ctx.Err())
	}
	a.countAttempt(r)
	failed := r.Code != 0 || r.Err != nil
	if failed {
		a.emit(Event{Kind: EventAttemptFailed, Attempt: s.Attempt, Code: r.Code, Err: r.Err, Endpoint: endpoint})
		if !a.followRedirect(r.Err) {
			a.nextEndpoint()
		}
	} else {
		a.hops = 0
	}
	next, why := a.step(func(m *Machine) Step { return m.Result(a.clock.Now(), r) })
	if failed {
		attrs := []any{"attempt", s.Attempt, "endpoint", endpoint}
		if r.Code != NoConnack { // a CONNACK was read
			attrs = append(attrs, "code", r.Code)
		}
		a.logWait("connect failed", next, why, append(attrs, "error", r.Err)...)
	}
	return next, nil
}

// logWait logs, at info, msg with attrs and the wait s chose and why. A
// Step that is not a wait gets msg and attrs alone. The wait is rounded to
// the millisecond: a log is read, and the event carries it exactly.
func (a *Agent) logWait(msg string, s Step, why waitReason, attrs ...any) {
	if s.Kind == KindWait {
		wait := s.Wait
		if wait > time.Millisecond {
			wait = wait.Round(time.Millisecond)
		}
		attrs = append(attrs, "wait", wait, "why", a.whyText(why))
	}
	a.log.Info(msg, attrs...)
}

// whyText is what chose a wait, as the log says it.
func (a *Agent) whyText(why waitReason) string {
	switch why {
	case waitBootSpread:
		return fmt.Sprintf("boot spread (up to %v)", a.cfg.Timing.BootSpread)
	case waitCredentials:
		return fmt.Sprintf("credentials refused: no sooner than %v", a.cfg.Timing.CredentialsWait)
	case waitBackPressure:
		return "broker back-pressure: the policy's wait stretched"
	case waitFloodGuard:
		g := a.cfg.Timing.Guard
		return fmt.Sprintf("flood guard (%d attempts per %v)", g.Requests, g.Window)
	}
	a.mMu.Lock() // a configuration update may have switched it
	p := a.m.ct.Policy
	a.mMu.Unlock()
	return "policy " + p.Shape().String()
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
	// Counted before anyone waiting for the connection hears of it: a
	// scrape after AwaitConnection returns sees this session.
	if m := a.cfg.Metrics; m != nil {
		m.SessionUp()
		defer func() { m.SessionDown(!stopped) }()
	}
	a.mu.Lock()
	close(a.up)
	a.mu.Unlock()
	endpoint := a.targetName()
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
		a.proto.Disconnect()
		return nil, true
	}
	if v := a.oversized(); v != nil {
		cause = v // paho's own error says only that a read failed
	} else if pe := a.brokeProtocol(); pe != nil {
		cause = pe
	} else {
		cause = a.meaning(cause)
	}
	a.losses.Add(1)
	a.emit(Event{Kind: EventLost, Err: cause})
	return cause, false
}

// oversized reports the current connection's too-large packet, if it had
// one: as an event and to Metrics, once per connection.
func (a *Agent) oversized() *PacketTooLargeError {
	w := a.wire.Load()
	if w == nil {
		return nil
	}
	tl := w.Oversized()
	if tl == nil {
		return nil
	}
	v := tl
	if !w.FirstReport() {
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
	b := w.Broken()
	if b == nil {
		return nil
	}
	v := b
	if w.FirstReport() {
		a.log.Warn("the broker broke MQTT; connection closed", "error", v)
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

// Subscribe registers handler for topic. The subscription is made now if the
// session is up and again after every reconnect.
func (a *Agent) Subscribe(ctx context.Context, topic string, qos byte, handler Handler) error {
	if topic == "" || handler == nil || qos > 1 {
		return fmt.Errorf("%w: Subscribe needs a topic, a handler and QoS 0 or 1", ErrInvalid)
	}
	a.mu.Lock()
	a.subs[topic] = subscription{qos: qos, granted: qos, handler: handler}
	a.grantedChanged()
	online := a.online
	a.mu.Unlock()
	if !online {
		return nil
	}
	return a.subscribe(ctx, topic, qos)
}

// subscribe makes one subscription on the session and keeps the QoS the
// broker granted it.
func (a *Agent) subscribe(ctx context.Context, topic string, qos byte) error {
	granted, err := a.proto.Subscribe(ctx, topic, qos)
	if err != nil {
		return a.meaning(err)
	}
	a.mu.Lock()
	if s, ok := a.subs[topic]; ok && s.qos == qos {
		s.granted = min(granted, qos)
		a.subs[topic] = s
		a.grantedChanged()
	}
	a.mu.Unlock()
	return nil
}

// grantedChanged sets maxQoS from the subscriptions. The caller holds mu.
func (a *Agent) grantedChanged() {
	var q byte
	for _, s := range a.subs {
		q = max(q, s.granted)
	}
	a.maxQoS.Store(uint32(q))
}

// deliver runs a message's handler, then acknowledges the message.
func (a *Agent) deliver(d inbox.Delivery) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				err := fmt.Errorf("device: handler for %q panicked: %v", d.Topic, r)
				a.log.Error("handler panicked", "topic", d.Topic, "panic", r)
				a.emit(Event{Kind: EventHandlerPanic, Err: err})
			}
		}()
		d.Handler(d.Topic, d.Payload)
	}()
	d.Ack() // a panicking handler's message too: sent again, it would panic again
}

// heldBack tells Metrics of a hold of the incoming queue.
func (a *Agent) heldBack(d time.Duration) {
	if m, ok := a.cfg.Metrics.(BackPressureCounter); ok {
		m.BackPressure(d)
	}
}

// handlerFor is the handler for a message on topic. It is that of the one
// subscription the topic matches, or one that calls each of several in
// turn, as paho's router does on 3.1.1. It is nil if none matches. qos is
// the highest granted to those that match.
func (a *Agent) handlerFor(topic string) (h Handler, qos byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var hs []Handler
	for filter, s := range a.subs {
		if transport.TopicMatches(transport.SharedFilter(filter), topic) {
			hs = append(hs, s.handler)
			qos = max(qos, s.granted)
		}
	}
	switch len(hs) {
	case 0:
		return nil, 0
	case 1:
		return hs[0], qos
	}
	return func(topic string, payload []byte) {
		for _, h := range hs {
			h(topic, payload)
		}
	}, qos
}

// ErrSubscriptionRefused is Subscribe's error when the broker answered the
// subscription with SUBACK 0x80 (failure). It stays registered: every
// reconnect tries it again.
var ErrSubscriptionRefused = transport.ErrSubscriptionRefused

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
		if err := a.subscribe(ctx, topic, s.qos); err != nil {
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
// returns ErrUnconfirmed (see Config.Session.Persistent).
func (a *Agent) Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error {
	conn := a.conns.Load() // before Connected: a later attempt can only raise it
	if !a.Connected() {
		return ErrNotConnected
	}
	return a.proto.Publish(ctx, conn, topic, qos, retained, payload)
}
