package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// chunk is what one read carries; MQTT packets are small, and a proxy
// holding ten thousand links keeps two of these each.
const chunk = 4 << 10

// link is one device connection joined to its broker connection.
type link struct {
	p              *Proxy
	seq            int
	device, broker net.Conn
	sniffed        bool // the client ID was read before the link began

	swallowing atomic.Bool // inside a black hole: bytes are lost, closes are not passed on
	once       sync.Once
	mu         sync.Mutex
	flap       *time.Timer
}

// run pumps both ways until either side ends.
func (l *link) run() {
	l.p.wg.Add(1)
	go func() {
		defer l.p.wg.Done()
		l.pump(l.device, l.broker, true)
	}()
	l.pump(l.broker, l.device, false)
}

// buffers are the pumps' read buffers, reused: a storm opens and closes
// thousands of links a second.
var buffers = sync.Pool{New: func() any { return new([chunk]byte) }}

func (l *link) pump(src, dst net.Conn, fromDevice bool) {
	b := buffers.Get().(*[chunk]byte)
	defer buffers.Put(b)
	buf := b[:]
	var w *delayedWriter
	var rerr error
	first := true
	// The device's first bytes, kept until they hold its whole CONNECT. A
	// client may write one in several pieces (paho.golang's header, then
	// its body). A read may get any of them.
	var head []byte
	sniffing := fromDevice && !l.sniffed
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if sniffing {
				head = append(head, buf[:n]...)
				if _, _, _, more := sniffConnect(head); !more {
					l.p.rec.sniff(l.seq, head, l.p.cfg.Now())
					sniffing, head = false, nil
				}
			}
			if first {
				first = false
				if !fromDevice {
					l.p.rec.answer(l.seq, l.p.cfg.Now())
					l.startFlap()
				}
			}
			if l.swallowing.Load() {
				continue // lost in the black hole
			}
			d := l.p.delay()
			if d == 0 && w == nil {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					rerr = werr // a write fails on a reset too
					break
				}
			} else {
				if w == nil {
					w = newDelayedWriter(dst)
				}
				if !w.push(buf[:n], time.Now().Add(d)) {
					break
				}
			}
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if w != nil {
		w.finish()
	}
	if l.swallowing.Load() {
		return // no close passes through a black hole; its end resets the link
	}
	// A reset passes on as a reset, as the other end would have seen it
	// without the proxy (and leaves no TIME_WAIT behind). A write to a
	// reset connection fails with EPIPE once the reset has been seen.
	if errors.Is(rerr, syscall.ECONNRESET) || errors.Is(rerr, syscall.EPIPE) {
		l.close(reset)
		return
	}
	l.close(closed)
}

// startFlap drops the link the proxy's flap after the broker's first
// bytes, if the proxy is flapping.
func (l *link) startFlap() {
	l.p.mu.Lock()
	d := l.p.flap
	l.p.mu.Unlock()
	if d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flap = time.AfterFunc(d, func() { l.close(dropped) })
}

// ending is how a link's two connections end.
type ending int

const (
	closed ending = iota // both closed: an end passed on
	reset                // both reset: a reset passed on, or a path that broke
	// dropped: the proxy ended the session. The device sees its broker
	// close. The broker is reset. This host dials the broker from one
	// address. The reset leaves it no TIME_WAIT (and no ephemeral port) for
	// each of the thousands of sessions a storm drops.
	dropped
)

// close ends both connections once, as how says.
func (l *link) close(how ending) {
	l.once.Do(func() {
		l.p.rec.end(l.seq, l.p.cfg.Now())
		l.p.mu.Lock()
		delete(l.p.links, l)
		delete(l.p.blackholed, l)
		l.p.mu.Unlock()
		l.mu.Lock()
		if l.flap != nil {
			l.flap.Stop()
		}
		l.mu.Unlock()
		switch how {
		case closed:
			_ = l.device.Close()
			_ = l.broker.Close()
		case reset:
			resetConn(l.device)
			resetConn(l.broker)
		case dropped:
			_ = l.device.Close()
			resetConn(l.broker)
		}
	})
}

// delayedWriter writes chunks at their release times, in order.
type delayedWriter struct {
	dst    net.Conn
	queue  chan timedChunk
	done   chan struct{}
	failed atomic.Bool
	last   time.Time
}

type timedChunk struct {
	data []byte
	at   time.Time
}

func newDelayedWriter(dst net.Conn) *delayedWriter {
	w := &delayedWriter{dst: dst, queue: make(chan timedChunk, 64), done: make(chan struct{})}
	go w.loop()
	return w
}

// push queues a copy of b for at, or later if an earlier chunk is
// released later (order is kept); false once a write has failed.
func (w *delayedWriter) push(b []byte, at time.Time) bool {
	if w.failed.Load() {
		return false
	}
	if at.Before(w.last) {
		at = w.last
	}
	w.last = at
	w.queue <- timedChunk{data: append([]byte(nil), b...), at: at}
	return true
}

func (w *delayedWriter) loop() {
	defer close(w.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for c := range w.queue {
		if w.failed.Load() {
			continue
		}
		if d := time.Until(c.at); d > 0 {
			timer.Reset(d)
			<-timer.C
		}
		if _, err := w.dst.Write(c.data); err != nil {
			w.failed.Store(true)
		}
	}
}

// finish writes what is queued and stops.
func (w *delayedWriter) finish() {
	close(w.queue)
	<-w.done
}
