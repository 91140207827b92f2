package faultproxy

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/waitfor"
)

// Outcome is what the proxy did with one connection.
type Outcome uint8

const (
	// Pending: accepted, not decided yet (held, or dialling the broker).
	Pending Outcome = iota
	// Admitted: linked to the broker; it reached the broker.
	Admitted
	// Refused: reset at once (an outage, or over the limit in refuse mode).
	Refused
	// Throttled: over the limit in disconnect mode; closed after its first
	// bytes, never passed on.
	Throttled
	// Dropped: ended before it was passed on: the device gave up while it
	// was held or hanging in a black hole, or the path broke meanwhile.
	Dropped
	// Unreachable: let through, but the broker could not be dialled.
	Unreachable
	// Overflowed: held, it sent more than MaxHeldBytes before its turn
	// came; reset and never passed on.
	Overflowed
)

var outcomeNames = [...]string{"pending", "admitted", "refused", "throttled", "dropped", "unreachable", "overflowed"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Attempt is one connection a device opened to the proxy.
type Attempt struct {
	Seq      int       // order of acceptance, from 0 (Reset does not restart it)
	Accept   time.Time // when the proxy accepted it: the arrival
	Decided  time.Time // when its outcome was settled; zero while pending
	ClientID string    // from the MQTT CONNECT, when it passed in the clear
	Outcome  Outcome
}

// Counts summarises the attempts by outcome.
type Counts struct {
	Attempts, Pending, Admitted, Refused, Throttled, Dropped, Unreachable, Overflowed int
}

func (c *Counts) of(o Outcome) *int {
	switch o {
	case Admitted:
		return &c.Admitted
	case Refused:
		return &c.Refused
	case Throttled:
		return &c.Throttled
	case Dropped:
		return &c.Dropped
	case Unreachable:
		return &c.Unreachable
	case Overflowed:
		return &c.Overflowed
	}
	return &c.Pending
}

// Recorder keeps every connection a Proxy was asked for. It is safe for
// concurrent use; readers get copies. The zero value is ready.
type Recorder struct {
	mu       sync.Mutex
	base     int
	attempts blocks
	counts   Counts
	changed  waitfor.Broadcast
}

func (r *Recorder) accept(at time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.base + r.attempts.len()
	r.attempts.add(Attempt{Seq: seq, Accept: at})
	r.counts.Attempts++
	r.counts.Pending++
	r.changed.Notify()
	return seq
}

func (r *Recorder) at(seq int) *Attempt {
	i := seq - r.base
	if i < 0 || i >= r.attempts.len() {
		return nil
	}
	return r.attempts.at(i)
}

// decide settles an attempt's outcome once.
func (r *Recorder) decide(seq int, o Outcome, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.at(seq)
	if a == nil || a.Outcome != Pending {
		return
	}
	*r.counts.of(Pending)--
	*r.counts.of(o)++
	a.Outcome, a.Decided = o, at
	r.changed.Notify()
}

// sniff reads the client ID from the device's first bytes, if they are a
// whole MQTT CONNECT in the clear.
func (r *Recorder) sniff(seq int, first []byte) {
	id, ok := ConnectClientID(first)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.at(seq); a != nil {
		a.ClientID = id
	}
}

// Attempts returns a copy of every attempt since the last Reset.
func (r *Recorder) Attempts() []Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts.copy()
}

// Counts returns the attempts by outcome since the last Reset.
func (r *Recorder) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// Reset forgets what was recorded; attempts still pending are settled
// unseen.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.base += r.attempts.len()
	r.attempts = blocks{}
	r.counts = Counts{}
	r.changed.Notify()
}

// Await blocks until cond holds for the counts, ctx ends, or timeout
// passes. cond runs with the recorder locked: it must be quick.
func (r *Recorder) Await(ctx context.Context, timeout time.Duration, cond func(Counts) bool) error {
	err := waitfor.UntilContext(ctx, &r.mu, &r.changed, timeout, func() bool { return cond(r.counts) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("faultproxy: condition not met after %v; counts %+v", timeout, r.Counts())
}

// blocks holds the attempts in fixed-size blocks: a storm's millions of
// connections are recorded without ever copying the ones before, which a
// growing slice would do under the lock every accept waits on.
type blocks struct {
	full [][]Attempt
	last []Attempt
}

const blockSize = 4096

func (b *blocks) len() int { return len(b.full)*blockSize + len(b.last) }

func (b *blocks) add(a Attempt) {
	if len(b.last) == blockSize {
		b.full = append(b.full, b.last)
		b.last = nil
	}
	if b.last == nil {
		b.last = make([]Attempt, 0, blockSize)
	}
	b.last = append(b.last, a)
}

func (b *blocks) at(i int) *Attempt {
	if k := i / blockSize; k < len(b.full) {
		return &b.full[k][i%blockSize]
	}
	return &b.last[i-len(b.full)*blockSize]
}

func (b *blocks) copy() []Attempt {
	out := make([]Attempt, 0, b.len())
	for _, f := range b.full {
		out = append(out, f...)
	}
	return append(out, b.last...)
}

// ConnectClientID reads the client ID from an MQTT 3.1 or 3.1.1 CONNECT at
// the start of b. ok is false for anything else: another packet, TLS, or a
// CONNECT cut short.
func ConnectClientID(b []byte) (id string, ok bool) {
	if len(b) < 2 || b[0] != 0x10 {
		return "", false
	}
	// Remaining length: up to four bytes, seven bits each.
	length, i := 0, 1
	for shift := 0; ; shift += 7 {
		if i >= len(b) || shift > 21 {
			return "", false
		}
		c := b[i]
		i++
		length |= int(c&0x7f) << shift
		if c&0x80 == 0 {
			break
		}
	}
	if length > len(b)-i {
		return "", false
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
	if !ok || (proto != "MQTT" && proto != "MQIsdp") {
		return "", false
	}
	at += 4 // level, flags, keepalive
	id, _, ok = str(at)
	return id, ok
}
