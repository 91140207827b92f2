// Package inbox is the device agent's queue of incoming messages: bounded
// in count and bytes, handed to the handlers one at a time, in order.
package inbox

import (
	"sync"
	"sync/atomic"
	"time"
)

// Queue hands the messages the MQTT client reads to their handlers: one at a time, in
// the order they arrived, on one goroutine. It holds at most limit
// messages and limitBytes of topics and payloads, the one a handler is on
// included (one message is always taken, whatever its size). Past that,
// put waits: paho's reading goroutine stops, paho reads no more from the
// socket, and the broker meets TCP's back-pressure. So a flood costs a
// device its queue and paho's few packets in flight, never a goroutine
// and a copy a message.
type Queue struct {
	limit, limitBytes int
	clock             interface{ Now() time.Time }
	stop              <-chan struct{} // the agent stopping
	onHeld            func(time.Duration)

	mu       sync.Mutex
	items    []Delivery
	handling int           // 1 while a handler is on a message taken from items
	bytes    int           // of items and the message handled
	ready    chan struct{} // a message was put
	space    chan struct{} // a message was handled
	held     atomic.Int64  // nanoseconds put waited, in all
}

// Delivery is a message and the handler it is for; Ack acknowledges it
// to the broker once the handler is done.
type Delivery struct {
	Handler func(topic string, payload []byte)
	Topic   string
	Payload []byte
	Ack     func()
	size    int
}

// New makes a queue of at most limit messages and limitBytes of topics
// and payloads. It stops taking and handing messages when stop closes;
// onHeld, if set, is told of each wait of Put for room, once it ends.
func New(limit, limitBytes int, clock interface{ Now() time.Time }, stop <-chan struct{}, onHeld func(time.Duration)) *Queue {
	return &Queue{limit: limit, limitBytes: limitBytes, clock: clock, stop: stop, onHeld: onHeld,
		ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// Put queues a message for its handler, waiting while the queue is full. It
// returns false if the agent stopped or the connection the message came on
// closed meanwhile (gone: nil never is). The message is then dropped
// unacknowledged. A broker keeping the session sends it again.
func (q *Queue) Put(d Delivery, gone <-chan struct{}) bool {
	d.size = len(d.Topic) + len(d.Payload)
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

// Run delivers each message to its handler, in order, until the agent
// stops (what is still queued then is dropped unacknowledged); deliver
// runs the handler and acknowledges the message.
func (q *Queue) Run(deliver func(Delivery)) {
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
		q.items[0] = Delivery{}
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

// HeldFor is the time Put has waited for room, in all.
func (q *Queue) HeldFor() time.Duration { return time.Duration(q.held.Load()) }

// signal wakes a waiter on c, if none is already due to wake.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
