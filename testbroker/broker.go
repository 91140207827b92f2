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

	"github.com/herdguard/herdguard/internal/memnet"
)

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

	sessions sync.Map // client ID -> *trackedConn of its latest session

	faults Faults
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
	b := &Broker{cfg: cfg, srv: srv, rec: &Recorder{}, log: log, ctx: ctx, cancel: cancel}
	b.faults = Faults{b: b, refuse: map[string]refusal{}, timers: map[*time.Timer]struct{}{}}
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
		b.faults.mu.Lock()
		for t := range b.faults.timers {
			t.Stop()
		}
		b.faults.timers = nil
		b.faults.mu.Unlock()
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
