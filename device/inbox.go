package device

import (
	"sync"
	"sync/atomic"
	"time"
)

// The defaults of Config.IncomingQueue and IncomingQueueBytes: enough to
// ride out a handler's pause, little enough for any device.
const (
	DefaultIncomingQueue      = 32
	DefaultIncomingQueueBytes = 1 << 20
)

// BackPressureCounter is a Metrics that also counts the time the agent
// stopped reading from the broker because its handlers were behind (the
// incoming queue full). It is optional, as PacketTooLargeCounter is, and
// called from paho's reading goroutine once a hold ends: the same rule
// holds, safe for concurrent use if shared by agents.
type BackPressureCounter interface {
	BackPressure(held time.Duration)
}

// inbox hands the messages paho reads to the handlers: one at a time, in
// the order they arrived, on one goroutine. It holds at most limit
// messages and limitBytes of topics and payloads, the one a handler is on
// included (one message is always taken, whatever its size). Past that,
// put waits: paho's reading goroutine stops, paho reads no more from the
// socket, and the broker meets TCP's back-pressure. So a flood costs a
// device its queue and paho's few packets in flight, never a goroutine
// and a copy a message.
type inbox struct {
	limit, limitBytes int
	clock             interface{ Now() time.Time }
	stop              <-chan struct{} // the agent stopping
	onHeld            func(time.Duration)

	mu       sync.Mutex
	items    []delivery
	handling int           // 1 while a handler is on a message taken from items
	bytes    int           // of items and the message handled
	ready    chan struct{} // a message was put
	space    chan struct{} // a message was handled
	held     atomic.Int64  // nanoseconds put waited, in all
}

// delivery is a message and the handler it is for; ack acknowledges it
// to the broker once the handler is done.
type delivery struct {
	handler Handler
	topic   string
	payload []byte
	ack     func()
	size    int
}

func newInbox(limit, limitBytes int, clock interface{ Now() time.Time }, stop <-chan struct{}, onHeld func(time.Duration)) *inbox {
	return &inbox{limit: limit, limitBytes: limitBytes, clock: clock, stop: stop, onHeld: onHeld,
		ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// put queues a message for its handler, waiting while the queue is full.
// It returns false if the agent stopped or the connection the message came
// on closed meanwhile (gone: nil never is): the message is then dropped
// unacknowledged, and a broker keeping the session sends it again.
func (q *inbox) put(d delivery, gone <-chan struct{}) bool {
	d.size = len(d.topic) + len(d.payload)
	var since time.Time
	for {
		q.mu.Lock()
		if n := len(q.items) + q.handling; n == 0 || n < q.limit && q.bytes+d.size <= q.limitBytes {
			q.items = append(q.items, d)
			q.bytes += d.size
			q.mu.Unlock()
			signal(q.ready)
			if !since.IsZero() {
				held := q.clock.Now().Sub(since)
				q.held.Add(int64(held))
				if q.onHeld != nil {
					q.onHeld(held)
				}
			}
			return true
		}
		q.mu.Unlock()
		if since.IsZero() {
			since = q.clock.Now()
		}
		select {
		case <-q.space:
		case <-q.stop:
			return false
		case <-gone:
			return false
		}
	}
}

// run delivers each message to its handler, in order, until the agent
// stops (what is still queued then is dropped unacknowledged); deliver
// runs the handler and acknowledges the message.
func (q *inbox) run(deliver func(delivery)) {
	for {
		select {
		case <-q.stop:
			return
		default:
		}
		q.mu.Lock()
		if len(q.items) == 0 {
			q.mu.Unlock()
			select {
			case <-q.ready:
				continue
			case <-q.stop:
				return
			}
		}
		d := q.items[0]
		q.items[0] = delivery{}
		q.items = q.items[1:]
		q.handling = 1
		q.mu.Unlock()
		deliver(d)
		q.mu.Lock()
		q.handling = 0
		q.bytes -= d.size
		q.mu.Unlock()
		signal(q.space)
	}
}

// heldFor is the time put has waited for room, in all.
func (q *inbox) heldFor() time.Duration { return time.Duration(q.held.Load()) }

// signal wakes a waiter on c, if none is already due to wake.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
