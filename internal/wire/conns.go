package wire

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
)

// connDriver is a loop's connections as net.Conns a dialer makes: the
// in-process pipes of a synctest bubble, whose waits the bubble sees, and
// TLS, which crypto/tls speaks only on a net.Conn. Each connection reads
// and writes on goroutines of its own: this driver costs what a goroutine
// does, and runs where own sockets cannot.
type connDriver struct {
	dialer  func(dev int32) device.DialFunc
	timeout time.Duration // a dial's bound (the connect timeout)
	events  chan event
	wakeC   chan struct{}
	done    chan struct{} // closed by shut: a connection's goroutines stop posting
	conns   map[int32]*conn
	next    int32
	timer   *time.Timer
	running sync.WaitGroup
}

// conn is one connection: dialled in the background, then read and
// written by goroutines of its own until the loop closes it.
type conn struct {
	mu     sync.Mutex
	c      net.Conn // once dialled
	closed bool
	cancel context.CancelFunc // ends the dial
	out    chan []byte        // what the writer sends, in order
}

func newConns(dialer func(dev int32) device.DialFunc, timeout time.Duration) *connDriver {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &connDriver{dialer: dialer, timeout: timeout, events: make(chan event, 64), wakeC: make(chan struct{}, 1),
		done: make(chan struct{}), conns: map[int32]*conn{}, timer: t}
}

func (cd *connDriver) dial(place, dev int32, u *url.URL) (int32, error) {
	cd.next++
	sock := cd.next
	ctx, cancel := context.WithTimeout(context.Background(), cd.timeout)
	c := &conn{cancel: cancel, out: make(chan []byte, 8)}
	cd.conns[sock] = c
	dial := cd.dialer(dev)
	cd.running.Go(func() {
		nc, err := dial(ctx, u)
		cancel()
		if err != nil {
			cd.post(event{place: place, sock: sock, kind: eventClosed})
			return
		}
		if !c.set(nc) {
			nc.Close() // the loop closed it meanwhile
			return
		}
		cd.post(event{place: place, sock: sock, kind: eventUp})
		cd.running.Go(func() { c.write() })
		c.read(cd, place, sock)
	})
	return sock, nil
}

// post hands e to the loop, unless the driver has shut.
func (cd *connDriver) post(e event) {
	select {
	case cd.events <- e:
	case <-cd.done:
	}
}

// set keeps the dialled nc, unless the loop has closed the connection.
func (c *conn) set(nc net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.c = nc
	return true
}

// read posts what arrives until the connection fails or is closed.
func (c *conn) read(cd *connDriver, place, sock int32) {
	buf := make([]byte, 4096)
	for {
		n, err := c.c.Read(buf)
		if n > 0 {
			cd.post(event{place: place, sock: sock, kind: eventData, data: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			cd.post(event{place: place, sock: sock, kind: eventClosed})
			return
		}
	}
}

// write sends what the loop queued, in order, until the queue is closed.
func (c *conn) write() {
	for b := range c.out {
		if _, err := c.c.Write(b); err != nil {
			c.c.Close() // the reader posts the failure
		}
	}
}

var errBacklog = errors.New("wire: the connection has not taken what was sent before")

func (cd *connDriver) send(sock int32, b []byte) error {
	c, ok := cd.conns[sock]
	if !ok {
		return net.ErrClosed
	}
	select {
	case c.out <- b:
		return nil
	default:
		return errBacklog
	}
}

func (cd *connDriver) close(sock int32) {
	c, ok := cd.conns[sock]
	if !ok {
		return
	}
	delete(cd.conns, sock)
	c.cancel()
	c.mu.Lock()
	c.closed = true
	if c.c != nil {
		c.c.Close()
	}
	c.mu.Unlock()
	close(c.out)
}

func (cd *connDriver) poll(timeout time.Duration, on func(event)) {
	var expired <-chan time.Time
	if timeout >= 0 {
		cd.timer.Reset(timeout)
		defer cd.timer.Stop()
		expired = cd.timer.C
	}
	select {
	case e := <-cd.events:
		on(e)
		for {
			select {
			case e := <-cd.events:
				on(e)
			default:
				return
			}
		}
	case <-expired:
	case <-cd.wakeC:
	}
}

func (cd *connDriver) wake() {
	select {
	case cd.wakeC <- struct{}{}:
	default:
	}
}

// shut stops the connections' goroutines, once the loop has closed them.
func (cd *connDriver) shut() {
	close(cd.done)
	cd.running.Wait()
}
