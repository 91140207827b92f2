package wire

import (
	"math/rand/v2"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/eventq"
	"github.com/herdguard/herdguard/internal/jitter"
)

// driver is how a loop's devices reach their brokers: sockets of its own
// on an epoll instance, or net.Conns a dialer makes (in-process pipes in
// a synctest bubble, TLS). A loop calls it from its one goroutine only.
type driver interface {
	// dial begins the connection of device dev (its fleet index), at
	// place in the loop's devices, to u. The connection's events name the
	// place and the handle dial returns.
	dial(place, dev int32, u *url.URL) (sock int32, err error)
	// send writes b whole, or fails: a device's packets are small, and one
	// the socket cannot take at once ends the connection.
	send(sock int32, b []byte) error
	close(sock int32)
	// poll waits up to timeout (forever if negative) for events, hands
	// each to on, and returns. It returns early after wake.
	poll(timeout time.Duration, on func(event))
	// wake makes a poll return; any goroutine may call it.
	wake()
	// shut releases what the driver holds once the loop has closed every
	// connection.
	shut()
}

// event is what a connection did.
type event struct {
	place int32
	sock  int32
	kind  eventKind
	data  []byte // eventData's bytes, valid until on returns
}

type eventKind uint8

const (
	eventUp     eventKind = iota + 1 // connected: the CONNECT may go
	eventData                        // bytes arrived
	eventClosed                      // the connection failed or the broker closed it
)

// loop is one event loop: the devices it owns, their timers and their
// connections' driver. Everything in it runs on the loop's goroutine.
type loop struct {
	devs      []dev
	timers    eventq.Heap // Dev: the place in devs; Key: the timer's generation
	drv       driver
	log       member.Log
	redirects map[int32]*url.URL // where a broker sent a device, while it goes there
	origin    time.Time
	stop      chan struct{} // closed to end the loop
	// telemetry: the envelopes' epoch, the seed of the readings' phases,
	// whether readings are still made, and what the loop's devices did
	// (the fleet's, which any goroutine may read)
	epoch   string
	seed    uint64
	produce *atomic.Bool
	stats   *telemetryCounts
}

// telemetryCounts are a fleet's telemetry so far, as publisher.Stats
// counts a publisher's.
type telemetryCounts struct {
	enqueued, delivered, failures atomic.Uint64
}

// Timer kinds: a device's one timer of its steps (its generation in the
// event's Key), and its telemetry's readings.
const (
	timerStep uint8 = iota
	timerReading
)

// now is the loop's time: since its origin, as the cores count it.
func (l *loop) now() time.Duration { return time.Since(l.origin) }

// schedule sets d's one timer to at, replacing the one it had.
func (l *loop) schedule(d *dev, at time.Duration) {
	d.gen++
	l.timers.Push(eventq.Event{At: at, Key: d.gen, Dev: d.place, What: eventq.What{Kind: timerStep}})
}

// nextReading sets d's telemetry timer to at.
func (l *loop) nextReading(d *dev, at time.Duration) {
	l.timers.Push(eventq.Event{At: at, Dev: d.place, What: eventq.What{Kind: timerReading}})
}

// run starts every device and drives them until stop is closed; then it
// disconnects those online and closes every connection.
func (l *loop) run() {
	now := l.now()
	for k := range l.devs {
		d := &l.devs[k]
		l.step(d, d.core.Start(&d.prof.timing, &d.src), now)
		if every := d.prof.telemetry; every > 0 {
			// the first reading at the phase the device's agent would draw
			phase := jitter.Float64(rand.NewPCG(l.seed, uint64(d.id)|1<<62)) * float64(every)
			l.nextReading(d, now+time.Duration(phase))
		}
	}
	on := func(e event) { l.handle(e) }
	for {
		select {
		case <-l.stop:
			l.shut()
			return
		default:
		}
		now = l.fire()
		timeout := time.Duration(-1)
		if l.timers.Len() > 0 {
			timeout = max(l.timers.Peek().At-now, 0)
		}
		l.drv.poll(timeout, on)
	}
}

// fire runs every timer that is due, and returns the time it stopped at.
func (l *loop) fire() time.Duration {
	now := l.now()
	for l.timers.Len() > 0 && l.timers.Peek().At <= now {
		e := l.timers.Pop()
		d := &l.devs[e.Dev]
		switch {
		case e.What.Kind == timerReading:
			l.nextReading(d, e.At+d.prof.telemetry)
			l.reading(d)
		case e.Key == d.gen:
			l.due(d, now)
		}
	}
	return now
}

// handle takes one connection's event, unless the device has since moved
// on to another connection.
func (l *loop) handle(e event) {
	d := &l.devs[e.place]
	if d.sock != e.sock {
		return
	}
	now := l.now()
	switch e.kind {
	case eventUp:
		l.up(d, now)
	case eventData:
		l.read(d, e.data, now)
	case eventClosed:
		l.broken(d, now)
	}
}

// shut ends every session as the agent's Stop does, with a DISCONNECT,
// and closes every connection.
func (l *loop) shut() {
	for k := range l.devs {
		d := &l.devs[k]
		if d.state == online {
			_ = l.drv.send(d.sock, disconnect)
		}
		l.drop(d)
		d.state = idle
	}
	l.drv.shut()
}

// clientID is device i's client ID, as its agent's (dev-<i>).
func clientID(i int32) string { return attempt.ClientID(int(i)) }
