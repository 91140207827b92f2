package testbroker

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/memnet"
)

// faultListener is the broker's one mochi listener. It owns the real
// listening socket (or in-memory queue) without mochi knowing. An outage
// can thus take it away and bring it back on the same address. Admission
// control can stop accepting. mochi's own TCP listener stops for good on
// any accept error.
type faultListener struct {
	b    *Broker
	id   string
	addr string // fixed after the first bind, so an outage comes back on the same port

	mu      sync.Mutex
	inner   net.Listener  // nil while down
	hold    io.Closer     // the port's placeholder while down (TCP, TLS)
	changed chan struct{} // closed and replaced when inner changes
	closed  bool

	conns sync.WaitGroup // establish goroutines
	serve sync.WaitGroup // the accept loop
}

func newFaultListener(b *Broker, id, addr string) *faultListener {
	return &faultListener{b: b, id: id, addr: addr, changed: make(chan struct{})}
}

func (l *faultListener) ID() string       { return l.id }
func (l *faultListener) Address() string  { return l.addr }
func (l *faultListener) Protocol() string { return string(l.b.cfg.Transport) }

// Init binds the listener (mochi calls it from AddListener).
func (l *faultListener) Init(*slog.Logger) error { return l.up() }

// up binds (or re-binds) the inner listener.
func (l *faultListener) up() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	if l.inner != nil {
		return nil
	}
	var ln net.Listener
	switch l.b.cfg.Transport {
	case Memory:
		ln = memnet.Listen(l.addr)
	default:
		tcp, err := net.Listen("tcp", l.addr)
		if err != nil {
			return err
		}
		l.addr = tcp.Addr().String()
		ln = tcp
		if l.hold != nil { // the new listener owns the port now
			_ = l.hold.Close()
			l.hold = nil
		}
		if l.b.cfg.Transport == TLS {
			ln = tls.NewListener(tcp, l.b.pki.serverConfig)
		}
	}
	l.inner = ln
	l.signalLocked()
	return nil
}

// down closes the inner listener: TCP connects are refused, in-memory dials fail.
func (l *faultListener) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inner != nil {
		_ = l.inner.Close()
		l.inner = nil
		if l.b.cfg.Transport != Memory {
			hold, err := reservePort(l.addr)
			if err != nil {
				l.b.log.Warn("could not hold the port during the outage", "addr", l.addr, "error", err)
			}
			l.hold = hold
		}
		l.signalLocked()
	}
}

func (l *faultListener) signalLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// current returns the inner listener, waiting while the broker is down.
// It returns nil once the listener is closed.
func (l *faultListener) current() net.Listener {
	for {
		l.mu.Lock()
		ln, ch, closed := l.inner, l.changed, l.closed
		l.mu.Unlock()
		if closed {
			return nil
		}
		if ln != nil {
			return ln
		}
		<-ch
	}
}

func (l *faultListener) isCurrent(ln net.Listener) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inner == ln && !l.closed
}

// mem returns the in-memory listener if it is up.
func (l *faultListener) mem() *memnet.Listener {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, _ := l.inner.(*memnet.Listener)
	return m
}

// Serve runs the accept loop until Close.
func (l *faultListener) Serve(establish listeners.EstablishFn) {
	// mochi starts Serve in a goroutine of its own, which may run after a
	// Close. The loop joins Close's wait under the lock that marks it
	// closed, or not at all.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.serve.Add(1)
	l.mu.Unlock()
	defer l.serve.Done()
	for {
		ln := l.current()
		if ln == nil {
			return
		}
		conn, err := ln.Accept()
		if err != nil {
			if l.isCurrent(ln) && !errors.Is(err, net.ErrClosed) {
				// EMFILE and friends: mochi would stop accepting for good; a
				// broker under a storm should pause and carry on.
				l.b.log.Warn("accept failed", "error", err)
				select {
				case <-time.After(10 * time.Millisecond):
				case <-l.b.ctx.Done():
					return
				}
			}
			continue
		}
		// In fault.PauseOverLimit mode the connection waits here for a token, as it
		// would in the listen backlog. (Taking the token before Accept would
		// let the bucket refill while blocked there: a burst of B+1.)
		if err := l.b.faults.admitSocket(l.b.ctx); err != nil {
			_ = conn.Close()
			return // closed while waiting for admission
		}
		rc := l.b.track(conn)
		l.conns.Add(1)
		go func() {
			defer l.conns.Done()
			defer l.b.forget(rc)
			if err := establish(l.id, rc); err != nil {
				l.b.log.Debug("connection ended", "client", rc.clientID(), "error", err)
			}
		}()
	}
}

// Close stops the accept loop, closes every client, and waits for the
// connection goroutines to finish. It does not call mochi's CloseFn, which
// is Clients.GetByListener. That takes its read lock twice. It deadlocks
// when a client connects or disconnects in between (mochi-mqtt/server #488,
// fixes unreleased in v2.7.9). A broker closing mid-storm sees exactly
// that.
func (l *faultListener) Close(listeners.CloseFn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	if l.inner != nil {
		_ = l.inner.Close()
		l.inner = nil
	}
	if l.hold != nil {
		_ = l.hold.Close()
		l.hold = nil
	}
	l.signalLocked()
	l.mu.Unlock()
	l.b.kickAll(CauseShutdown)
	l.serve.Wait()
	l.conns.Wait()
}

// trackedConn is a broker-side connection that reports to the Recorder.
type trackedConn struct {
	net.Conn
	b     *Broker
	seq   int
	id    atomic.Pointer[string]
	cause atomic.Pointer[Cause] // why the broker ended the session, if it did
	throt atomic.Bool           // admitted over the limit: disconnect after CONNACK
	est   atomic.Bool           // the session was established (counted connected)
	ended chan struct{}         // closed once the session's end is recorded
	gone  chan struct{}         // closed once mochi has finished with the connection
	once  sync.Once
}

func (c *trackedConn) markEnded() { c.once.Do(func() { close(c.ended) }) }

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *trackedConn) clientID() string {
	if p := c.id.Load(); p != nil {
		return *p
	}
	return ""
}

// Close records an attempt that ended before any CONNACK as Dropped.
func (c *trackedConn) Close() error {
	c.b.rec.decide(c.seq, fault.Dropped, 0)
	return c.Conn.Close()
}
