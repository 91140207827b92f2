package testbroker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/memnet"
)

// A Broker is a fault.Breaker: a run breaks it with the same calls as the
// fault proxy in front of any other broker.
var _ fault.Breaker = (*Broker)(nil)

// Transport is how clients reach the broker. The zero Transport, "", means
// TCP. It is a plain value, safe to share.
type Transport string

const (
	TCP    Transport = "tcp"
	TLS    Transport = "tls" // TCP with a certificate from an in-process CA
	Memory Transport = "mem" // in-process pipes: no file descriptors
)

// Config configures a Broker. The zero value is a silent TCP broker on
// 127.0.0.1 with an OS-chosen port. NewUnstarted copies it; its
// PayloadDigest, if set, is called from every connection's goroutine at once
// and must be safe for concurrent use.
type Config struct {
	Transport Transport // "" means TCP
	// Addr is the listen address (TCP, TLS; default 127.0.0.1:0) or the
	// in-memory broker's name (default "broker").
	Addr string
	// MutualTLS requires TLS clients to present a certificate issued by the
	// broker's CA (see ClientCertificate).
	MutualTLS bool
	// Logger receives mochi's log; nil discards it (mochi's default prints a
	// line per kicked client to stdout).
	Logger *slog.Logger
	// MaxWritesPending bounds each client's queue of outbound packets
	// (mochi's default is 8192, a 64 KiB channel per client); over it mochi
	// drops messages to that client. 0 means 16, plenty for a device.
	MaxWritesPending int
	// BufferSize is each client's read and write buffer. 0 means 1024 bytes.
	BufferSize int
	// ConnectTimeout closes a socket that sends no CONNECT within it (mochi
	// has no such deadline, and such a socket can block Close). 0 means 10 s.
	ConnectTimeout time.Duration
	// PayloadDigest, if set, is applied to each recorded PUBLISH payload
	// (a hash, a sequence number parsed out); nil keeps a copy of the payload.
	PayloadDigest func(payload []byte) []byte
}

func (c *Config) validate() error {
	switch c.Transport {
	case "":
		c.Transport = TCP
	case TCP, TLS, Memory:
	default:
		return fmt.Errorf("%w: unknown transport %q", ErrInvalid, c.Transport)
	}
	if c.MutualTLS && c.Transport != TLS {
		return fmt.Errorf("%w: MutualTLS needs Transport TLS", ErrInvalid)
	}
	if c.MaxWritesPending < 0 || c.BufferSize < 0 || c.ConnectTimeout < 0 {
		return fmt.Errorf("%w: MaxWritesPending, BufferSize and ConnectTimeout must be >= 0", ErrInvalid)
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
		if c.Transport == Memory {
			c.Addr = "broker"
		}
	}
	if c.MaxWritesPending == 0 {
		c.MaxWritesPending = 16
	}
	if c.BufferSize == 0 {
		c.BufferSize = 1024
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	return nil
}

// Broker is an in-process MQTT broker (mochi-mqtt) that fails on command and
// records every connection attempt. Its lifecycle follows httptest.Server:
// New = NewUnstarted + Start, and Close blocks until every connection is gone.
// All methods are safe for concurrent use, and every fault can be applied
// while clients are connected. The zero value is not usable: use New or
// NewUnstarted.
type Broker struct {
	cfg Config
	srv *mqtt.Server
	ln  *faultListener
	rec *Recorder
	log *slog.Logger
	pki *pki

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	started   atomic.Bool
	closeOnce sync.Once

	admission atomic.Pointer[activeLimit]
	// > 0: the reason code every CONNECT is refused with (BeginBusy)
	busy          atomic.Int32
	flapAfter     atomic.Int64                  // time.Duration
	latency       atomic.Int64                  // time.Duration
	dropPublishes atomic.Bool                   // drop QoS 1+ PUBLISHes without a PUBACK
	holdAcks      atomic.Pointer[chan struct{}] // while set, PUBACKs wait for it to close

	sessions sync.Map // client ID -> *trackedConn of its latest session

	mu      sync.Mutex
	refuse  map[string]refusal
	timers  map[*time.Timer]struct{} // flap and outage timers, stopped by Close
	outages int                      // BeginOutage calls not yet ended
}

// New starts a broker; see NewUnstarted and Start.
func New(cfg Config) (*Broker, error) {
	b, err := NewUnstarted(cfg)
	if err != nil {
		return nil, err
	}
	if err := b.Start(); err != nil {
		return nil, err
	}
	return b, nil
}

// NewUnstarted validates cfg and builds the broker without listening.
func NewUnstarted(cfg Config) (*Broker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = int32(cfg.MaxWritesPending)
	srv := mqtt.New(&mqtt.Options{
		Capabilities:             caps,
		Logger:                   log,
		ClientNetReadBufferSize:  cfg.BufferSize,
		ClientNetWriteBufferSize: cfg.BufferSize,
		SysTopicResendInterval:   3600, // $SYS every second is noise at scale
	})
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{cfg: cfg, srv: srv, rec: &Recorder{}, log: log, ctx: ctx, cancel: cancel,
		refuse: map[string]refusal{}, timers: map[*time.Timer]struct{}{}}
	if cfg.Transport == TLS {
		p, err := newPKI(cfg.MutualTLS)
		if err != nil {
			cancel()
			return nil, err
		}
		b.pki = p
	}
	if err := srv.AddHook(&hook{b: b}, nil); err != nil {
		cancel()
		return nil, err
	}
	b.ln = newFaultListener(b, "herdguard-"+string(cfg.Transport), cfg.Addr)
	return b, nil
}

// Start binds the listener and serves. Serving TCP raises RLIMIT_NOFILE to
// its hard limit first: each TCP client costs the process a descriptor.
func (b *Broker) Start() error {
	if !b.started.CompareAndSwap(false, true) {
		return errors.New("testbroker: already started")
	}
	if b.cfg.Transport != Memory {
		if err := raiseFDLimit(); err != nil {
			b.log.Warn("could not raise RLIMIT_NOFILE", "error", err)
		}
	}
	if err := b.srv.AddListener(b.ln); err != nil {
		return fmt.Errorf("testbroker: listen %s: %w", b.cfg.Addr, err)
	}
	return b.srv.Serve()
}

// Close disconnects every client, stops the listener and waits for every
// connection goroutine to finish. A second Close does nothing.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		b.mu.Lock()
		for t := range b.timers {
			t.Stop()
		}
		b.timers = nil
		b.mu.Unlock()
		if b.started.Load() {
			_ = b.srv.Close() // closes our listener, which ends every session
		}
	})
	return nil
}

// URL is the broker's address for paho: tcp://host:port, ssl://host:port or
// mem://name (which needs the Dial function; see ClientOptions).
func (b *Broker) URL() string {
	scheme := map[Transport]string{TCP: "tcp", TLS: "ssl", Memory: "mem"}[b.cfg.Transport]
	return scheme + "://" + b.ln.Address()
}

// Transport returns the broker's transport.
func (b *Broker) Transport() Transport { return b.cfg.Transport }

// Recorder returns the broker's recorder.
func (b *Broker) Recorder() *Recorder { return b.rec }

// Connected returns the number of established sessions, as the recorder
// counts them: up from just before each CONNACK 0, down when the session's end
// is recorded.
func (b *Broker) Connected() int { return b.rec.Counts().Connected }

// DialContext connects to this broker over the in-memory transport,
// whatever the URL says. It waits while the broker is not accepting, until
// ctx is done. It fails like a refused TCP connection while the broker is
// down. It is a device.DialFunc.
func (b *Broker) DialContext(ctx context.Context, _ *url.URL) (net.Conn, error) {
	if b.cfg.Transport != Memory {
		return nil, errors.New("testbroker: DialContext is for the in-memory transport")
	}
	m := b.ln.mem()
	if m == nil {
		return nil, memnet.Refused(b.cfg.Addr)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)() // a broker that closes ends the wait
	return m.Dial(ctx)
}

// Dial is DialContext as paho's OpenConnectionFunc, for paho clients of
// this broker's own: it waits up to the client's connect timeout (30 s
// when unset).
func (b *Broker) Dial(u *url.URL, opts paho.ClientOptions) (net.Conn, error) {
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return b.DialContext(ctx, u)
}

// ClientOptions returns paho options that reach this broker as a
// well-behaved 3.1.1 client. The protocol version is pinned to 4 and paho's
// own reconnect is off. A connect timeout is set, and so is the transport's
// TLS config or dialer.
func (b *Broker) ClientOptions(clientID string) *paho.ClientOptions {
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(clientID).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(5 * time.Second).SetKeepAlive(30 * time.Second).
		SetOrderMatters(false)
	switch b.cfg.Transport {
	case Memory:
		o.SetCustomOpenConnectionFn(b.Dial)
	case TLS:
		cfg, err := b.ClientTLSConfig(clientID)
		if err == nil {
			o.SetTLSConfig(cfg)
		}
	}
	return o
}

// track wraps a freshly accepted connection so that the recorder sees it.
func (b *Broker) track(conn net.Conn) *trackedConn {
	now := time.Now()
	_ = conn.SetReadDeadline(now.Add(b.cfg.ConnectTimeout)) // mochi replaces it after CONNECT
	return &trackedConn{Conn: conn, b: b, seq: b.rec.accept(now), ended: make(chan struct{}), gone: make(chan struct{})}
}

// kick ends a session the way a 3.1.1 broker does, by closing the socket
// (paho 3.1.1 clients mishandle a server DISCONNECT); v5 clients get one.
func (b *Broker) kick(cl *mqtt.Client, cause Cause) {
	if tc, ok := cl.Net.Conn.(*trackedConn); ok {
		tc.cause.CompareAndSwap(nil, &cause)
	}
	if cl.Properties.ProtocolVersion >= 5 && b.ctx.Err() == nil {
		// a peer that stops reading must not block us
		_ = cl.Net.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = b.srv.DisconnectClient(cl, packets.ErrServerUnavailable)
		return
	}
	cl.Stop(fmt.Errorf("testbroker: %s", cause))
}

// forget runs when mochi has finished with a connection, cleanup included.
// mochi returns without OnDisconnect when the CONNACK cannot be written, as
// when the client gave up while the broker was slow. The session it had
// established ends here instead. Otherwise Connected would drift up under
// overload.
func (b *Broker) forget(tc *trackedConn) {
	if tc.est.Load() && !isClosed(tc.ended) {
		b.rec.disconnect(Disconnect{Time: time.Now(), ClientID: tc.clientID(), Cause: CauseError,
			Err: "the connection ended before its CONNACK was written"})
		tc.markEnded()
	}
	close(tc.gone)
	if id := tc.clientID(); id != "" {
		b.sessions.CompareAndDelete(id, tc)
	}
}

// awaitPreviousSession holds a CONNECT for id while that ID's previous
// session has ended but mochi is still cleaning it up. mochi's cleanup
// unsubscribes and deletes by client ID. A device that reconnects inside
// that window would lose its new session from the client map. Its messages
// would then go nowhere. A session still live is a takeover, which mochi
// handles itself.
func (b *Broker) awaitPreviousSession(id string, tc *trackedConn) {
	v, ok := b.sessions.Load(id)
	if !ok || v.(*trackedConn) == tc {
		return
	}
	prev := v.(*trackedConn)
	if !isClosed(prev.ended) {
		return
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-prev.gone:
	case <-t.C:
		b.log.Warn("previous session slow to clean up", "client", id)
	case <-b.ctx.Done():
	}
}

// kickAll ends every session by closing its socket, without waiting. (Not
// mochi's close path, which writes each client a DISCONNECT with no deadline
// and so blocks for good on an in-memory pipe whose peer is not reading.)
func (b *Broker) kickAll(cause Cause) {
	for _, cl := range b.srv.Clients.GetAll() {
		if !cl.Net.Inline && !cl.Closed() {
			b.kick(cl, cause)
		}
	}
}

// Drain ends every session with an MQTT 5 DISCONNECT of code. If reference
// is not empty, the DISCONNECT carries it as a Server Reference. The code
// may be 0x9C (use another server), to send the fleet to another node. It
// may be 0x8B (server shutting down) or 0x89 (server busy). A 3.1.1
// session, which has no such packet, is closed. The broker stays up. It
// returns how many sessions it ended, once each end is recorded.
func (b *Broker) Drain(code byte, reference string) int {
	return b.dropAllWith(CauseDrain, func(cl *mqtt.Client) {
		if cl.Properties.ProtocolVersion < 5 {
			cl.Stop(fmt.Errorf("testbroker: %s", CauseDrain))
			return
		}
		// a peer that stops reading must not block us
		_ = cl.Net.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ReasonCode: code,
			Properties: packets.Properties{ServerReference: reference, ReasonString: "drained"}}
		_ = cl.WritePacket(pk)
		cl.Stop(packets.Code{Code: code, Reason: "drained"})
	})
}

// DropAll disconnects every connected client at once; the broker stays up
// and they may reconnect immediately. It returns how many were dropped, once
// the end of each of their sessions is recorded.
func (b *Broker) DropAll() int { return b.dropAll(CauseDropAll) }

func (b *Broker) dropAll(cause Cause) int {
	return b.dropAllWith(cause, func(cl *mqtt.Client) { b.kick(cl, cause) })
}

// dropAllWith ends every session with end, recording cause.
func (b *Broker) dropAllWith(cause Cause, end func(*mqtt.Client)) int {
	var kicked []*trackedConn
	for _, cl := range b.srv.Clients.GetAll() {
		if cl.Net.Inline || cl.Closed() {
			continue
		}
		if tc, ok := cl.Net.Conn.(*trackedConn); ok {
			tc.cause.CompareAndSwap(nil, &cause)
		}
		end(cl)
		if tc := trackedOf(cl); tc != nil {
			kicked = append(kicked, tc)
		}
	}
	// Wait for mochi to run each session's OnDisconnect, so that Connected
	// and the recorder agree with what the caller just did. Bounded: a
	// connection goroutine stuck in a write must not hang the caller.
	limit := time.NewTimer(10 * time.Second)
	defer limit.Stop()
	for _, tc := range kicked {
		select {
		case <-tc.ended:
		case <-limit.C:
			b.log.Warn("dropped sessions slow to end", "cause", cause)
			return len(kicked)
		case <-b.ctx.Done():
			return len(kicked)
		}
	}
	return len(kicked)
}

// BeginOutage takes the broker down: every client is dropped and new
// connections are refused (TCP: connection refused; in-memory: the dial
// fails) until EndOutage. It returns the number of clients dropped, once
// their ends are recorded.
func (b *Broker) BeginOutage() int {
	b.mu.Lock()
	b.outages++
	b.mu.Unlock()
	b.ln.down()
	return b.dropAll(CauseOutage)
}

// EndOutage brings the listener back on the same address. It fails only if
// the address was taken meanwhile or the broker is closed.
func (b *Broker) EndOutage() error {
	b.mu.Lock()
	b.outages = 0
	b.mu.Unlock()
	return b.ln.up()
}

// OutageFor is BeginOutage now and EndOutage after d (real time).
func (b *Broker) OutageFor(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: outage duration must be > 0, got %v", ErrInvalid, d)
	}
	b.BeginOutage()
	b.afterFunc(d, func() {
		if err := b.EndOutage(); err != nil && b.ctx.Err() == nil {
			b.log.Error("outage did not end", "error", err)
		}
	})
	return nil
}

// Down reports whether an outage is in force.
func (b *Broker) Down() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outages > 0
}

func (b *Broker) afterFunc(d time.Duration, f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timers == nil { // closed
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		b.mu.Lock()
		if b.timers != nil {
			delete(b.timers, t)
		}
		b.mu.Unlock()
		f()
	})
	b.timers[t] = struct{}{}
}

// SetFlapping makes the broker drop every session d after its CONNACK, as a
// broker with a duplicate client ID or a crashing backend does. 0 turns it off.
func (b *Broker) SetFlapping(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: flapping interval must be >= 0, got %v", ErrInvalid, d)
	}
	b.flapAfter.Store(int64(d))
	return nil
}

// SetConnackLatency delays every CONNACK by d. 0 turns it off.
func (b *Broker) SetConnackLatency(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: latency must be >= 0, got %v", ErrInvalid, d)
	}
	b.latency.Store(int64(d))
	return nil
}

// DropPublishes makes the broker drop every QoS 1 or 2 PUBLISH it reads,
// until called again with false. A dropped PUBLISH is unacknowledged and
// out of the record (Counts.DroppedPublishes counts them). A broker that
// fails before storing one does the same. A client keeps such a message in
// flight. With a persistent session it resends it on its next connection.
func (b *Broker) DropPublishes(on bool) { b.dropPublishes.Store(on) }

// DelayPubacks makes the broker record each QoS 1 or 2 PUBLISH as usual but
// hold back its PUBACK until DelayPubacks(false) (or Close). A client's
// message thus stays in flight, already received, for as long as a test
// needs.
func (b *Broker) DelayPubacks(on bool) {
	if on {
		ch := make(chan struct{})
		b.holdAcks.CompareAndSwap(nil, &ch) // already holding: nothing to do
		return
	}
	if ch := b.holdAcks.Swap(nil); ch != nil {
		close(*ch)
	}
}

// awaitAck blocks a PUBACK while DelayPubacks is on.
func (b *Broker) awaitAck() {
	if ch := b.holdAcks.Load(); ch != nil {
		select {
		case <-*ch:
		case <-b.ctx.Done():
		}
	}
}

// ConnackCode is an MQTT 3.1.1 CONNACK return code to refuse with. The zero
// ConnackCode, 0, is acceptance, which Refuse rejects. It is a plain value,
// safe to share.
type ConnackCode byte

const (
	RefuseProtocolVersion   ConnackCode = 1
	RefuseIdentifier        ConnackCode = 2 // identifier rejected
	RefuseServerUnavailable ConnackCode = 3
	RefuseBadCredentials    ConnackCode = 4
	RefuseNotAuthorised     ConnackCode = 5
)

// mochi speaks v5 codes and maps them down for 3.1.1 clients; these are the
// v5 codes that map to each 3.1.1 code. A code outside 1-5 is sent raw, which
// is how to reproduce brokers that send MQTT 5 codes to 3.1.1 clients.
var v5For = map[ConnackCode]packets.Code{
	RefuseProtocolVersion:   packets.ErrUnsupportedProtocolVersion,
	RefuseIdentifier:        packets.ErrClientIdentifierNotValid,
	RefuseServerUnavailable: packets.ErrServerUnavailable,
	RefuseBadCredentials:    packets.ErrMalformedUsername,
	RefuseNotAuthorised:     packets.ErrBadUsernameOrPassword,
}

// Refuse makes the broker refuse the given client IDs with code until
// Unrefuse. Codes 1-5 are the 3.1.1 return codes; a code of 0x80 or more is
// sent as is (a non-conforming broker).
func (b *Broker) Refuse(code ConnackCode, clientIDs ...string) error {
	return b.RefuseTo(code, "", clientIDs...)
}

// refusal is a CONNACK code to refuse a client with, and the Server
// Reference to name in it, if any.
type refusal struct {
	code      ConnackCode
	reference string
}

// RefuseTo is Refuse naming another server. An MQTT 5 client is refused
// with code (0x9C use another server, 0x9D server moved). reference goes as
// the CONNACK's Server Reference. A 3.1.1 client, which has no such field,
// is refused only with the code.
func (b *Broker) RefuseTo(code ConnackCode, reference string, clientIDs ...string) error {
	if code == 0 || (code > RefuseNotAuthorised && code < 0x80) {
		return fmt.Errorf("%w: %d is not a refusal code (1-5, or >= 0x80 to send raw)", ErrInvalid, code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range clientIDs {
		b.refuse[id] = refusal{code, reference}
	}
	return nil
}

// Unrefuse lets the given client IDs connect again.
func (b *Broker) Unrefuse(clientIDs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range clientIDs {
		delete(b.refuse, id)
	}
}

func (b *Broker) refusal(clientID string) (refusal, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.refuse[clientID]
	return c, ok
}

// activeLimit is the limit in force, with its token bucket.
type activeLimit struct {
	fault.Admission
	lim *rate.Limiter
}

// SetAdmission limits the connections admitted from now on, replacing any
// earlier limit. The zero Admission lifts it. Over the limit the broker
// does one of three things. RefuseOverLimit refuses with CONNACK 3.
// PauseOverLimit stops accepting sockets, which wait in the listen backlog.
// DisconnectOverLimit accepts and closes the session right after its
// CONNACK.
func (b *Broker) SetAdmission(a fault.Admission) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if a == (fault.Admission{}) {
		b.admission.Store(nil)
		return nil
	}
	a.Burst = max(a.Burst, 1)
	b.admission.Store(&activeLimit{Admission: a, lim: rate.NewLimiter(rate.Limit(a.Rate), a.Burst)})
	return nil
}

// admitSocket waits for a token before accepting, in fault.PauseOverLimit mode.
func (b *Broker) admitSocket(ctx context.Context) error {
	a := b.admission.Load()
	if a == nil || a.Mode != fault.PauseOverLimit {
		return ctx.Err()
	}
	return a.lim.Wait(ctx)
}

// admitConnect decides, at CONNECT, for the refuse and disconnect modes;
// code is the MQTT 5 reason code of a refusal.
func (b *Broker) admitConnect(now time.Time) (ok bool, mode fault.AdmissionMode, code byte) {
	a := b.admission.Load()
	if a == nil || a.Mode == fault.PauseOverLimit {
		return true, 0, 0
	}
	return a.lim.AllowN(now, 1), a.Mode, a.RefusalCode()
}

// BeginBusy refuses every CONNECT until EndBusy, as a broker node past
// its capacity does: an MQTT 5 client with code (0x89 server busy, say),
// a 3.1.1 client with CONNACK 3. Sessions already up stay: Drain ends
// them.
func (b *Broker) BeginBusy(code byte) error {
	if code < 0x80 {
		return fmt.Errorf("%w: an MQTT 5 refusal's code is 0x80 or more, got %#02x", ErrInvalid, code)
	}
	b.busy.Store(int32(code))
	return nil
}

// EndBusy admits CONNECTs again.
func (b *Broker) EndBusy() { b.busy.Store(0) }
