package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/fault"
)

// A Proxy is a fault.Breaker: a run breaks the path with the same calls as
// it breaks the test broker.
var _ fault.Breaker = (*Proxy)(nil)

// MaxHeldBytes is what the proxy keeps of a held connection's bytes while
// it waits its turn, the CONNECT and anything sent behind it. A device's
// CONNECT is far below it. Only a will or password near MQTT's 64 KiB field
// limit would reach it. The bound is there so that no client, by sending
// without end while held, can grow the proxy's memory.
const MaxHeldBytes = 64 << 10

// The defaults of Config.MaxHeld and Config.MaxHeldTotal. They leave room
// for a fleet of ten thousand held at once with their CONNECTs. They bound
// what a crowd of clients that send without end can make the proxy keep.
const (
	DefaultMaxHeld      = 10000
	DefaultMaxHeldTotal = 16 << 20
)

// ErrInvalid: every invalid input (a Config, a fault's argument, an
// Admission) is an error wrapping it; an Admission fault.Validate refuses
// wraps fault.ErrInvalid too.
var ErrInvalid = errors.New("faultproxy: invalid input")

// ErrClosed is returned by Dial after Close.
var ErrClosed = errors.New("faultproxy: closed")

// ErrRefused is returned by Dial when the proxy refuses the connection (an
// outage, or the admission limit in refuse mode). A TCP client sees a reset.
var ErrRefused = errors.New("faultproxy: connection refused")

// Config is a proxy's fixed setup. Upstream is required: the zero Config is
// invalid and New refuses it. New copies it; Upstream and Now are called from
// many connections' goroutines at once, so they must be safe for concurrent
// use.
type Config struct {
	// Upstream dials the broker for every connection let through; required.
	Upstream func(ctx context.Context) (net.Conn, error)
	// Listen, if set, is the TCP address to accept devices on, such as
	// "127.0.0.1:0"; Addr reports the port chosen. Without it only Dial
	// (in memory) reaches the proxy.
	Listen string
	// DialTimeout bounds each upstream dial (0: 10 s).
	DialTimeout time.Duration
	// Seed seeds the latency jitter.
	Seed uint64
	// Now is the clock attempts are stamped with (nil: time.Now).
	Now func() time.Time
	// MaxHeld bounds the connections held at once for their turn
	// (PauseOverLimit); one more is refused, as a full accept queue would
	// (0: DefaultMaxHeld).
	MaxHeld int
	// MaxHeldTotal bounds the bytes kept of all held connections together
	// (0: DefaultMaxHeldTotal); the client whose bytes would take the total
	// over it is cut off, as one over MaxHeldBytes is.
	MaxHeldTotal int
	// Logger hears of clients the proxy cuts off or turns away for its own
	// protection (Overflowed, or refused with the hold full or at
	// MaxConns); nil discards.
	Logger *slog.Logger
	// Identify makes a refusal (an outage, or the admission limit with
	// RefuseOverLimit) read the connection's CONNECT before the reset, so
	// that every refused attempt over TCP carries its client ID. A broker
	// that is down never reads it: the device sees its CONNECT sent, then
	// the reset, where it would have seen the reset at once. The reading
	// is bounded as a hold is (MaxHeld, MaxHeldTotal, MaxHeldBytes) and
	// lasts at most IdentifyTimeout (0: 2 s).
	Identify        bool
	IdentifyTimeout time.Duration
	// MaxConns bounds the connections the proxy holds at once, linked,
	// held or being decided: each costs two descriptors, the device's and
	// the broker's. One more is refused (a reset), and Logger hears of it
	// once until one ends. 0: no bound.
	MaxConns int
}

// Proxy stands between devices and a broker and breaks the path on
// command. Every method is safe for concurrent use. Create one with New;
// the zero value is not usable.
type Proxy struct {
	cfg Config
	ln  net.Listener
	rec Recorder

	mu     sync.Mutex // guards closed and, but for their atomics, the two below
	closed bool
	pathFaults
	connSet

	wg sync.WaitGroup
}

// pathFaults are the faults in force on the path.
type pathFaults struct {
	outage    bool
	blackhole bool
	limiter   *rate.Limiter
	mode      fault.AdmissionMode
	flap      time.Duration
	slow      atomic.Bool // latency or jitter set: the pumps ask delay
	latency   time.Duration
	jitter    time.Duration
	rng       *rand.Rand
}

// connSet is every connection the proxy holds, by where it stands.
type connSet struct {
	links map[*link]struct{}
	// accepted, not yet linked: held, hanging or being dialled upstream
	pending    map[net.Conn]struct{}
	hanging    map[net.Conn]struct{} // opened into the current black hole
	blackholed map[*link]struct{}    // links open when the current black hole began
	held       int                   // connections waiting for their turn, or read for their client ID
	// the last one was turned away for it; logged once until one leaves
	holdFull  bool
	connsFull bool         // the same for MaxConns
	heldBytes atomic.Int64 // what all held connections sent, kept to be passed on
}

// New starts a proxy in front of cfg.Upstream.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == nil {
		return nil, fmt.Errorf("%w: Config.Upstream is required", ErrInvalid)
	}
	if cfg.DialTimeout < 0 || cfg.MaxHeld < 0 || cfg.MaxHeldTotal < 0 || cfg.IdentifyTimeout < 0 || cfg.MaxConns < 0 {
		return nil, fmt.Errorf("%w: DialTimeout %v, MaxHeld %d, MaxHeldTotal %d, IdentifyTimeout %v and MaxConns %d must be >= 0",
			ErrInvalid, cfg.DialTimeout, cfg.MaxHeld, cfg.MaxHeldTotal, cfg.IdentifyTimeout, cfg.MaxConns)
	}
	if cfg.IdentifyTimeout == 0 {
		cfg.IdentifyTimeout = 2 * time.Second
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.MaxHeldTotal == 0 {
		cfg.MaxHeldTotal = DefaultMaxHeldTotal
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg, pathFaults: pathFaults{rng: rand.New(rand.NewPCG(cfg.Seed, 0x70726f7879))},
		connSet: connSet{links: map[*link]struct{}{}, pending: map[net.Conn]struct{}{}, hanging: map[net.Conn]struct{}{},
			blackholed: map[*link]struct{}{}}}
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, err
		}
		p.ln = ln
		p.wg.Add(1)
		go p.acceptLoop()
	}
	return p, nil
}

// Upstream dials a TCP address: Config.Upstream for a broker at addr.
func Upstream(addr string) func(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// Addr is the TCP address devices connect to, or "" without Config.Listen.
func (p *Proxy) Addr() string {
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

// Recorder is every connection the proxy was asked for.
func (p *Proxy) Recorder() *Recorder { return &p.rec }

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	var pause time.Duration
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, most likely, in the middle of a storm:
			// wait for some to close, as net/http does, rather than stop
			// accepting for good.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		p.handle(c)
	}
}

// Dial connects to the proxy in memory, as a device on the same host
// would over TCP; a refused connection is ErrRefused. With Identify, a
// refusal is as over TCP: the connection is made, its CONNECT read, and
// then it is reset.
func (p *Proxy) Dial(ctx context.Context) (net.Conn, error) {
	device, ours := net.Pipe()
	refused := make(chan struct{})
	if !p.handleRefusable(ours, refused) {
		_ = device.Close()
		return nil, ErrClosed
	}
	select {
	case <-refused:
		_ = device.Close()
		return nil, ErrRefused
	default:
		return device, nil
	}
}

func (p *Proxy) handle(c net.Conn) { p.handleRefusable(c, nil) }

// handleRefusable records a new connection and decides its fate; a refusal
// is signalled on refused (in-memory dials, which have no reset), closed
// before it returns. It reports false once the proxy is closed.
func (p *Proxy) handleRefusable(c net.Conn, refused chan struct{}) bool {
	seq := p.rec.accept(p.cfg.Now())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.rec.decide(seq, fault.Dropped, p.cfg.Now())
		resetConn(c)
		return false
	}
	refuse := func() {
		p.mu.Unlock()
		p.rec.decide(seq, fault.Refused, p.cfg.Now())
		if refused != nil {
			close(refused)
		}
		resetConn(c)
	}
	// A refusal reads the CONNECT first, where asked to and there is room.
	refuseIdentified := func() {
		if !p.cfg.Identify || p.held >= p.cfg.MaxHeld {
			refuse()
			return
		}
		p.held++
		p.pending[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.identify(seq, c)
	}
	if p.cfg.MaxConns > 0 && len(p.links)+len(p.pending) >= p.cfg.MaxConns {
		if !p.connsFull {
			p.connsFull = true
			p.cfg.Logger.Warn("connection limit reached: refusing connections until one ends",
				"max_conns", p.cfg.MaxConns, "descriptors", 2*p.cfg.MaxConns)
		}
		refuse()
		return true
	}
	p.connsFull = false
	switch {
	case p.outage:
		refuseIdentified()
		return true
	case p.blackhole: // the SYN goes nowhere: hold it, read nothing back
		p.pending[c] = struct{}{}
		p.hanging[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.swallow(seq, c)
		return true
	}
	var wait time.Duration
	var reservation *rate.Reservation
	if p.limiter != nil {
		now := p.cfg.Now()
		switch p.mode {
		case fault.RefuseOverLimit:
			if !p.limiter.AllowN(now, 1) {
				refuseIdentified()
				return true
			}
		case fault.DisconnectOverLimit:
			if !p.limiter.AllowN(now, 1) {
				p.pending[c] = struct{}{}
				p.wg.Add(1)
				p.mu.Unlock()
				go p.throttle(seq, c)
				return true
			}
		case fault.PauseOverLimit:
			reservation = p.limiter.ReserveN(now, 1)
			wait = reservation.DelayFrom(now)
			if wait > 0 && p.held >= p.cfg.MaxHeld {
				reservation.Cancel()
				if !p.holdFull {
					p.holdFull = true
					p.cfg.Logger.Warn("hold full: turning connections away until one leaves", "max_held", p.cfg.MaxHeld)
				}
				refuse()
				return true
			}
			if wait > 0 {
				p.held++
			}
		}
	}
	p.pending[c] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.admit(seq, c, wait, reservation)
	return true
}

// swallow holds a connection made during a black hole. Whatever the device
// sends is lost, and nothing comes back. When the black hole ends, the
// connection is reset. Its bytes are gone, and the stream cannot resume.
// Nothing is kept, so a device that sends without end costs no memory.
func (p *Proxy) swallow(seq int, c net.Conn) {
	defer p.wg.Done()
	// until the device gives up or the end of the black hole resets it
	_, _ = io.Copy(io.Discard, c)
	p.forget(c)
	p.rec.decide(seq, fault.Dropped, p.cfg.Now())
}

// identify reads a refused connection's CONNECT, then resets it: the
// refusal carries its client ID.
func (p *Proxy) identify(seq int, c net.Conn) {
	defer p.wg.Done()
	got := p.readConnect(c)
	p.heldBytes.Add(-int64(len(got)))
	p.mu.Lock()
	p.held--
	p.holdFull = false
	p.mu.Unlock()
	p.forget(c)
	p.rec.sniff(seq, got, p.cfg.Now())
	p.rec.decide(seq, fault.Refused, p.cfg.Now())
	resetConn(c)
}

// readConnect reads c until its first bytes hold a CONNECT (or cannot), it
// closes, IdentifyTimeout passes, or it would take the held bytes over
// their bounds. What it returns is counted in heldBytes; the caller gives
// it back.
func (p *Proxy) readConnect(c net.Conn) []byte {
	_ = c.SetReadDeadline(time.Now().Add(p.cfg.IdentifyTimeout))
	var got []byte
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if len(got)+n > MaxHeldBytes {
			return got
		}
		if p.heldBytes.Add(int64(n)) > int64(p.cfg.MaxHeldTotal) {
			p.heldBytes.Add(-int64(n))
			return got
		}
		got = append(got, buf[:n]...)
		if _, _, _, more := sniffConnect(got); !more || err != nil {
			return got
		}
	}
}

// throttle reads the device's first bytes and closes: accepted, then
// disconnected, as the broker never saw it.
func (p *Proxy) throttle(seq int, c net.Conn) {
	defer p.wg.Done()
	_ = c.SetReadDeadline(time.Now().Add(p.cfg.DialTimeout))
	_, _ = c.Read(make([]byte, 512))
	p.forget(c)
	_ = c.Close()
	p.rec.decide(seq, fault.Throttled, p.cfg.Now())
}

// admit waits out a held connection's turn, dials the broker, and links the
// two. While it waits, the device's bytes are kept to be forwarded, up to
// MaxHeldBytes. A device that gives up first, or is cut off for sending
// more, gives its token back.
func (p *Proxy) admit(seq int, c net.Conn, wait time.Duration, reservation *rate.Reservation) {
	defer p.wg.Done()
	var early []byte
	if wait > 0 {
		got, ok := p.waitTurn(seq, c, wait, reservation)
		if !ok {
			return
		}
		early = got
	}
	l := p.pass(seq, c, early)
	p.heldBytes.Add(-int64(len(early))) // passed on, or thrown away
	if l != nil {
		l.run()
	}
}

// waitTurn holds c until its turn; ok is false if it did not last that
// long, and then nothing of it is held any more.
func (p *Proxy) waitTurn(seq int, c net.Conn, wait time.Duration, reservation *rate.Reservation) (got []byte, ok bool) {
	got, end := p.holdFor(c, wait)
	p.mu.Lock()
	p.held--
	p.holdFull = false
	p.mu.Unlock()
	if end == turnCame {
		return got, true
	}
	p.heldBytes.Add(-int64(len(got)))
	reservation.Cancel()
	p.forget(c)
	if end == gaveUp {
		_ = c.Close()
		p.rec.decide(seq, fault.Dropped, p.cfg.Now())
		return nil, false
	}
	resetConn(c) // what it sent is thrown away: the stream cannot resume
	p.rec.sniff(seq, got, p.cfg.Now())
	id, _ := connectClientID(got)
	p.cfg.Logger.Warn("held connection sent more than the proxy keeps; cut off",
		"seq", seq, "client", id, "max_held_bytes", MaxHeldBytes, "max_held_total", p.cfg.MaxHeldTotal)
	p.rec.decide(seq, fault.Overflowed, p.cfg.Now())
	return nil, false
}

// pass dials the broker for c, sends it what c sent while held, and links
// the two; nil if the path broke meanwhile (c is then closed and decided).
func (p *Proxy) pass(seq int, c net.Conn, early []byte) *link {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	up, err := p.cfg.Upstream(ctx)
	cancel()
	if err != nil {
		p.forget(c)
		resetConn(c)
		p.rec.decide(seq, fault.Unreachable, p.cfg.Now())
		return nil
	}
	if len(early) > 0 {
		p.rec.sniff(seq, early, p.cfg.Now())
		if _, err := up.Write(early); err != nil {
			p.forget(c)
			_ = up.Close()
			resetConn(c)
			p.rec.decide(seq, fault.Unreachable, p.cfg.Now())
			return nil
		}
	}
	l := &link{p: p, seq: seq, device: c, broker: up, sniffed: len(early) > 0}
	p.mu.Lock()
	delete(p.pending, c)
	if p.closed || p.outage || p.blackhole {
		// The path broke while this one was being let through.
		p.mu.Unlock()
		resetConn(c)
		_ = up.Close()
		p.rec.decide(seq, fault.Dropped, p.cfg.Now())
		return nil
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.rec.decide(seq, fault.Accepted, p.cfg.Now())
	return l
}

// holdEnd is how a hold ended.
type holdEnd int

const (
	turnCame   holdEnd = iota
	gaveUp             // the device closed first
	overflowed         // the device sent more than MaxHeldBytes, or than the hold's total leaves
)

// holdFor keeps c waiting for d, reading what it sends meanwhile. got
// never exceeds MaxHeldBytes, nor the held total MaxHeldTotal: the read
// that would take either over ends the hold, its bytes unkept. What got
// holds is counted in heldBytes; the caller gives it back.
func (p *Proxy) holdFor(c net.Conn, d time.Duration) (got []byte, end holdEnd) {
	deadline := time.Now().Add(d)
	buf := make([]byte, 512)
	for {
		if err := c.SetReadDeadline(deadline); err != nil {
			return got, gaveUp
		}
		n, err := c.Read(buf)
		if len(got)+n > MaxHeldBytes {
			return got, overflowed
		}
		if p.heldBytes.Add(int64(n)) > int64(p.cfg.MaxHeldTotal) {
			p.heldBytes.Add(-int64(n))
			return got, overflowed
		}
		got = append(got, buf[:n]...)
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.As(err, &ne) && ne.Timeout():
			_ = c.SetReadDeadline(time.Time{})
			return got, turnCame
		default:
			return got, gaveUp
		}
	}
}

// forget drops a connection from the pending set.
func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.pending, c)
	delete(p.hanging, c)
	p.mu.Unlock()
}

// Close stops accepting, closes every connection, and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links, pending := p.takeLocked()
	p.mu.Unlock()
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	closeAll(links, pending, closed)
	p.wg.Wait()
	return err
}

// takeLocked removes every link and pending connection.
func (p *Proxy) takeLocked() ([]*link, []net.Conn) {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	pending := make([]net.Conn, 0, len(p.pending))
	for c := range p.pending {
		pending = append(pending, c)
	}
	clear(p.links)
	clear(p.pending)
	clear(p.hanging)
	clear(p.blackholed)
	return links, pending
}

func closeAll(links []*link, pending []net.Conn, how ending) {
	for _, l := range links {
		l.close(how)
	}
	for _, c := range pending {
		if how == reset {
			resetConn(c)
		} else {
			_ = c.Close()
		}
	}
}

// DropAll ends every session it let through and returns how many. Each
// device sees its broker close the connection. The broker sees a reset, and
// no TIME_WAIT is left on this host for it. Connections still held or
// hanging are closed too. The path stays up.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	links, pending := p.takeLocked()
	p.mu.Unlock()
	closeAll(links, pending, dropped)
	return len(links)
}

// BeginOutage drops every connection and refuses new ones until
// EndOutage: the broker as the devices see it is down. It returns how many
// sessions it ended.
func (p *Proxy) BeginOutage() int {
	p.mu.Lock()
	p.outage = true
	links, pending := p.takeLocked()
	p.mu.Unlock()
	closeAll(links, pending, reset)
	return len(links)
}

// EndOutage lets connections through again; after Close it is ErrClosed.
func (p *Proxy) EndOutage() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.outage = false
	return nil
}

// SetAdmission limits the connections let through from now on, replacing
// any earlier limit. The zero Admission lifts it. Over the limit the proxy
// does one of three things. With RefuseOverLimit it resets the connection.
// With PauseOverLimit it holds the connection, bytes and all, until a token
// is free. What the client sends meanwhile is kept, up to MaxHeldBytes. A
// client that sends more is reset and recorded as Overflowed. With
// Config.MaxHeld waiting, the next is refused. With DisconnectOverLimit it
// reads the connection's CONNECT and closes it.
func (p *Proxy) SetAdmission(a fault.Admission) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limiter, p.mode = nil, a.Mode
	if a.Rate > 0 {
		p.limiter = rate.NewLimiter(rate.Limit(a.Rate), max(a.Burst, 1))
	}
	return nil
}

// SetFlapping drops every connection let through from now on d after the
// broker's first bytes (its CONNACK), as DropAll does; 0 stops it.
func (p *Proxy) SetFlapping(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: flap %v < 0", ErrInvalid, d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flap = d
	return nil
}

// SetLatency delays everything passing through, each way, by latency plus
// U[0, jitter), keeping each direction's bytes in order; zeros remove it.
func (p *Proxy) SetLatency(latency, jitter time.Duration) error {
	if latency < 0 || jitter < 0 {
		return fmt.Errorf("%w: latency %v and jitter %v must be >= 0", ErrInvalid, latency, jitter)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency, p.jitter = latency, jitter
	p.slow.Store(latency > 0 || jitter > 0)
	return nil
}

// delay is the latency for the next chunk.
func (p *Proxy) delay() time.Duration {
	if !p.slow.Load() {
		return 0 // the common case takes no lock
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.latency
	if p.jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(p.jitter)))
	}
	return d
}

// BeginBlackhole makes the path silent, as a NAT or load balancer that
// forgets its connections does. Open connections stay open but nothing
// passes either way. No close is passed on. New connections hang. Devices
// notice only through their keepalive, and the broker through its own.
func (p *Proxy) BeginBlackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
	for l := range p.links {
		p.blackholed[l] = struct{}{}
		l.swallowing.Store(true)
	}
}

// EndBlackhole restores the path. Connections the black hole swallowed
// bytes from, or that were opened into it, are reset: their streams cannot
// resume, as a peer that answers a forgotten connection with RST.
func (p *Proxy) EndBlackhole() {
	p.mu.Lock()
	p.blackhole = false
	var links []*link
	for l := range p.blackholed {
		delete(p.links, l)
		links = append(links, l)
	}
	clear(p.blackholed)
	hanging := make([]net.Conn, 0, len(p.hanging))
	for c := range p.hanging {
		hanging = append(hanging, c)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close(reset)
	}
	for _, c := range hanging {
		resetConn(c)
	}
}

// Connections is how many connections are linked to the broker now.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// resetConn closes c with a TCP reset where it can, as a refused or forgotten
// connection gets.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
