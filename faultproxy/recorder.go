package faultproxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/faultlog"
	"github.com/herdguard/herdguard/internal/waitfor"
)

// Recorder keeps every connection a Proxy was asked for, as fault.Attempts:
// Accept is the arrival, Connect when the proxy read the device's CONNECT
// in the clear (zero under TLS), Decided when the proxy settled what to do
// with it. Accepted means passed on to the broker. It is safe for
// concurrent use; readers get copies. The zero value is ready.
type Recorder struct {
	mu       sync.Mutex
	log      faultlog.Log
	answered int // accepted connections the broker has sent a byte on
	live     int // of those, the ones still open: sessions
	changed  waitfor.Broadcast
}

func (r *Recorder) accept(at time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.log.Accept(at)
	r.changed.Notify()
	return seq
}

// decide settles an attempt's outcome once.
func (r *Recorder) decide(seq int, o fault.Outcome, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log.Decide(seq, o, 0, at) {
		r.changed.Notify()
	}
}

// sniff reads the client ID from the device's first bytes, if they hold a
// whole MQTT CONNECT in the clear (over TCP or WebSocket).
func (r *Recorder) sniff(seq int, first []byte, at time.Time) {
	id, level, ok, _ := sniffConnect(first)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.log.At(seq); a != nil {
		a.ClientID, a.Connect, a.Protocol = id, at, level
	}
}

// answer notes that the broker sent its first bytes on connection seq.
func (r *Recorder) answer(seq int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.log.At(seq); a != nil && a.Ended.IsZero() { // not one from before a Reset, nor closed
		a.Answered = at
		r.answered++
		r.live++
		r.changed.Notify()
	}
}

// end notes that the connection seq let through has ended.
func (r *Recorder) end(seq int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.log.At(seq)
	if a == nil || !a.Ended.IsZero() {
		return
	}
	a.Ended = at
	if !a.Answered.IsZero() {
		r.live--
	}
	r.changed.Notify()
}

// Sessions is how many connections let through the broker has answered
// and are still open: the fleet's sessions as the proxy sees them.
func (r *Recorder) Sessions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live
}

// AwaitSessions blocks until cond holds for the sessions open (Sessions),
// ctx ends (ctx.Err()), or timeout passes. cond runs with the recorder
// locked after every change: it must be quick and must not call the
// Recorder.
func (r *Recorder) AwaitSessions(ctx context.Context, timeout time.Duration, cond func(sessions int) bool) error {
	err := waitfor.UntilContext(ctx, &r.mu, &r.changed, timeout, func() bool { return cond(r.live) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("faultproxy: sessions not as awaited after %v: %d open", timeout, r.Sessions())
}

// Answered returns how many of the connections passed on since the last
// Reset the broker has answered. Answering means sending at least a byte
// on: its CONNACK, or under TLS its handshake. A broker that was slow to
// accept can leave a connection the proxy passed on unanswered. Its kernel
// completed the handshake. The broker itself never took the connection from
// its backlog before the device gave up and closed it. The broker's own log
// thus never shows it.
func (r *Recorder) Answered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered
}

// Attempts returns a copy of every attempt since the last Reset.
func (r *Recorder) Attempts() []fault.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.All()
}

// Counts returns the attempts by outcome since the last Reset.
func (r *Recorder) Counts() fault.Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Counts()
}

// Reset forgets what was recorded; attempts still pending are settled
// unseen.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.Reset()
	r.answered, r.live = 0, 0
	r.changed.Notify()
}

// Await blocks until cond holds for the counts, ctx ends (ctx.Err()), or
// timeout passes. cond runs with the recorder locked after every change:
// it must be quick and must not call the Recorder.
func (r *Recorder) Await(ctx context.Context, timeout time.Duration, cond func(fault.Counts) bool) error {
	err := waitfor.UntilContext(ctx, &r.mu, &r.changed, timeout, func() bool { return cond(r.log.Counts()) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("faultproxy: condition not met after %v; counts %+v", timeout, r.Counts())
}

// connectClientID reads the client ID from an MQTT 3.1, 3.1.1 or 5
// CONNECT at the start of b. ok is false for anything else: another
// packet, TLS, or a CONNECT cut short.
func connectClientID(b []byte) (id string, ok bool) {
	id, _, ok = parseConnect(b)
	return id, ok
}

// parseConnect reads the client ID and the protocol level from a CONNECT at
// the start of b, as connectClientID does. The level is 3 for MQTT 3.1, 4
// for 3.1.1 and 5 for MQTT 5.
func parseConnect(b []byte) (id string, level byte, ok bool) {
	if len(b) < 2 || b[0] != 0x10 {
		return "", 0, false
	}
	length, i, ok := varint(b, 1)
	if !ok || length > len(b)-i {
		return "", 0, false
	}
	body := b[i : i+length]
	str := func(at int) (string, int, bool) {
		if at+2 > len(body) {
			return "", 0, false
		}
		n := int(body[at])<<8 | int(body[at+1])
		if at+2+n > len(body) {
			return "", 0, false
		}
		return string(body[at+2 : at+2+n]), at + 2 + n, true
	}
	proto, at, ok := str(0)
	if !ok || (proto != "MQTT" && proto != "MQIsdp") || at >= len(body) {
		return "", 0, false
	}
	level = body[at]
	at += 4         // level, flags, keepalive
	if level == 5 { // MQTT 5: properties come before the payload
		n, next, ok := varint(body, at)
		if !ok || n > len(body)-next {
			return "", 0, false
		}
		at = next + n
	}
	id, _, ok = str(at)
	return id, level, ok
}

// varint reads MQTT's variable byte integer at b[i:]: its value and the
// index after it.
func varint(b []byte, i int) (v, next int, ok bool) {
	for shift := 0; shift <= 21; shift += 7 {
		if i >= len(b) {
			return 0, 0, false
		}
		c := b[i]
		i++
		v |= int(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, i, true
		}
	}
	return 0, 0, false
}
