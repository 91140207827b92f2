package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/internal/waitfor"
	"github.com/herdguard/herdguard/reconnect"
)

// Errors Publish returns; nothing else makes it fail.
var (
	// ErrInvalid: every invalid input (a message over MaxPayload or
	// without a topic, a Config, BoltOptions) is an error wrapping it.
	ErrInvalid   = errors.New("publisher: invalid input")
	ErrQueueFull = errors.New("publisher: queue full")
)

// Session is what the publisher delivers through: device.Agent, or any
// session that can publish at QoS 1 and say when it is connected. A session
// that also has a Connected() bool method lets the publisher skip its own
// backoff when a publish failed because the session went away. New refuses a
// nil Session. The Publisher calls it only from Run, one call at a time; a
// Session other code also uses (an Agent) must be safe for concurrent use.
type Session interface {
	// Publish returns once a QoS 1 message is acknowledged (PUBACK).
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
	// AwaitConnection blocks until the session is up or ctx ends.
	AwaitConnection(ctx context.Context) error
}

// Overflow is what Publish does when the queue is full. The zero Overflow is
// DropOldest. It is a plain value, safe to share.
type Overflow int

const (
	// DropOldest makes room by dropping the oldest messages (counted). It
	// does so for the queue's bounds and when the store's disk is full
	// (ENOSPC). A full disk thus loses the oldest telemetry, not the
	// newest.
	DropOldest Overflow = iota
	// RejectNew refuses the new message with ErrQueueFull (counted). On a
	// full disk Publish returns the store's error (wrapping ENOSPC).
	RejectNew
)

// Config configures a Publisher. Session is required: the zero Config is
// invalid and New refuses it. New copies it, but its Store becomes the
// Publisher's (which closes it) and Run draws from its Source: give each
// Publisher its own of both.
type Config struct {
	Session Session
	// Store holds the queue (nil: a MemoryStore). The Publisher closes it.
	Store Store
	// Queue bounds: 0 means 10,000 messages and 16 MiB.
	MaxMessages int
	MaxBytes    int64
	// MaxPayload bounds one payload (0: 256 KiB).
	MaxPayload int
	Overflow   Overflow
	// DrainRate paces delivery in messages per second, so that a fleet's
	// backlog flush after an outage is not a storm of its own (0: 50/s).
	// DrainBurst is how many may go at once (0: 10).
	DrainRate  float64
	DrainBurst int
	// Retry times the waits after a failed publish (nil: IoTCore, forever).
	// With a finite cap (MaxRetries or MaxElapsed), Run gives up when one
	// message has used it up. It then returns an error wrapping
	// reconnect.ErrExhausted. The message stays at the front of the queue
	// for the next Run. Failures while the session is down do not count:
	// the session's own reconnect paces those.
	Retry *reconnect.Policy
	// PublishTimeout bounds one publish waiting for its PUBACK (0: 30 s).
	PublishTimeout time.Duration
	Clock          reconnect.Clock
	Source         rand.Source
	Logger         *slog.Logger
}

// Stats are exact counters. At every instant (a Stats value is one
// consistent snapshot) each message the queue has held is in exactly one
// place:
//
//	Restored + Enqueued = Delivered + DroppedOldest + Queued
//
// A message Publish refused (Rejected) never entered the queue, so what
// Publish was offered with valid input is Enqueued + Rejected.
//
// The zero Stats counts nothing. A Stats is a copy: a plain value, safe to
// share.
type Stats struct {
	Restored uint64 // queued in the store when New opened it (left by an earlier run)
	Enqueued uint64 // accepted by Publish
	// Delivered counts messages acknowledged by the broker and removed. One
	// that DropOldest removed while it was in flight counts as dropped, even
	// if its PUBACK comes later.
	Delivered     uint64
	DroppedOldest uint64 // removed to make room (DropOldest): for the bounds or on a full disk
	Rejected      uint64 // refused with ErrQueueFull (RejectNew)
	Failures      uint64 // publish attempts that failed and were retried
	Queued        int    // in the queue now (including one in flight)
	QueuedBytes   int64
}

// Publisher is store-and-forward telemetry: Publish enqueues at any time and
// never waits for the network; Run delivers at least once, in order, at
// QoS 1, removing a message only after its PUBACK. Every message carries its
// store's epoch and a sequence number (see Envelope) so that the receiver
// can drop the duplicates that at-least-once delivery implies. Safe for
// concurrent use. The zero value is not usable: use New.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	clock reconnect.Clock
	lim   *rate.Limiter

	epoch string // the store's, read once

	mu     sync.Mutex
	store  Store
	stats  Stats
	wake   chan struct{}     // signalled when a message is enqueued
	left   waitfor.Broadcast // announces every message leaving the queue
	closed bool
	// inFlight is the seq Run is publishing (0: none); inFlightDropped says
	// DropOldest removed it meanwhile, so its PUBACK must not count it again.
	inFlight        uint64
	inFlightDropped bool
}

// New validates cfg and opens the publisher over its store.
func New(cfg Config) (*Publisher, error) {
	if cfg.Session == nil {
		return nil, fmt.Errorf("%w: Config.Session is required", ErrInvalid)
	}
	if cfg.MaxMessages < 0 || cfg.MaxBytes < 0 || cfg.MaxPayload < 0 || cfg.DrainRate < 0 || cfg.DrainBurst < 0 || cfg.PublishTimeout < 0 {
		return nil, fmt.Errorf("%w: publisher limits must be >= 0", ErrInvalid)
	}
	if cfg.Overflow != DropOldest && cfg.Overflow != RejectNew {
		return nil, fmt.Errorf("%w: unknown Overflow %d", ErrInvalid, cfg.Overflow)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.MaxMessages, 10_000)
	def(&cfg.MaxPayload, 256<<10)
	def(&cfg.DrainBurst, 10)
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 16 << 20
	}
	if cfg.DrainRate == 0 {
		cfg.DrainRate = 50
	}
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = 30 * time.Second
	}
	if cfg.Retry == nil {
		p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: reconnect.RetryForever})
		if err != nil {
			return nil, err
		}
		cfg.Retry = p
	}
	if cfg.Store == nil {
		cfg.Store = &MemoryStore{}
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, store: cfg.Store, wake: make(chan struct{}, 1),
		lim: rate.NewLimiter(rate.Limit(cfg.DrainRate), cfg.DrainBurst)}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.clock == nil {
		p.clock = reconnect.SystemClock
	}
	n, _ := p.store.Len()
	p.stats.Restored = uint64(n)
	p.epoch = p.store.Epoch()
	if !validEpoch(p.epoch) && p.epoch != "" {
		return nil, fmt.Errorf("%w: the store's epoch %q is not 1-64 printable ASCII bytes", ErrInvalid, p.epoch)
	}
	return p, nil
}

// validTopic applies MQTT's rules for a topic one publishes to.
func validTopic(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	case len(t) > 65535:
		return fmt.Errorf("%w: topic over 65,535 bytes", ErrInvalid)
	case strings.ContainsAny(t, "+#"):
		return fmt.Errorf("%w: wildcard in topic %q", ErrInvalid, t)
	case strings.ContainsRune(t, 0):
		return fmt.Errorf("%w: NUL in topic", ErrInvalid)
	}
	return nil
}

// Publish enqueues payload for topic and returns its sequence number (in
// the store's epoch: see Epoch). It never waits for the network. It fails
// only on bad input, a full queue under RejectNew, or a store that cannot
// be written. Under DropOldest, a full disk fails it only once dropping
// every older message did not make room.
func (p *Publisher) Publish(topic string, payload []byte) (uint64, error) {
	if err := validTopic(topic); err != nil {
		return 0, err
	}
	if len(payload) > p.cfg.MaxPayload {
		return 0, fmt.Errorf("%w: payload of %d bytes over the %d-byte maximum", ErrInvalid, len(payload), p.cfg.MaxPayload)
	}
	m := Message{Topic: topic, Payload: append([]byte(nil), payload...), Time: p.clock.Now()}
	if m.size() > p.cfg.MaxBytes {
		return 0, fmt.Errorf("%w: message of %d bytes larger than the whole queue", ErrInvalid, m.size())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	for {
		n, bytes := p.store.Len()
		if n < p.cfg.MaxMessages && bytes+m.size() <= p.cfg.MaxBytes {
			break
		}
		if p.cfg.Overflow == RejectNew {
			p.stats.Rejected++
			return 0, ErrQueueFull
		}
		dropped, err := p.dropOldest(1)
		if err != nil || len(dropped) == 0 {
			return 0, fmt.Errorf("publisher: making room: %w", err)
		}
		p.log.Warn("queue full: dropped the oldest message", "seq", dropped[0])
	}
	m.Seq = p.store.LastSeq() + 1
	if err := p.appendMakingRoom(m); err != nil {
		return 0, err
	}
	p.stats.Enqueued++
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return m.Seq, nil
}

// appendMakingRoom appends m to the store. Under DropOldest, a full disk
// (ENOSPC) costs the oldest messages rather than m. They are dropped and
// counted, and the append is tried again. This goes on until the append
// succeeds or the queue is empty.
//
// Each round drops twice as many as the last. That takes few attempts,
// about log2 of the number that must go. It drops at most about twice as
// many as needed. One at a time would cost an attempt per message and often
// free nothing. bbolt reuses only whole pages (dozens of small messages).
// It reuses them only once the transaction that freed them has committed. A
// BoltStore drops each round in a transaction of its own.
//
// Dropping needs room too: bbolt rewrites a leaf it removes part of. A leaf
// of large messages spans several pages, for which a full disk may have no
// free run. Such a leaf holds at most maxLeafMessages. Dropping it whole
// rewrites only one-page parents. A drop that fails for want of room is
// thus retried one message further, up to maxLeafMessages times, before the
// count doubles.
func (p *Publisher) appendMakingRoom(m Message) error {
	err := p.store.Append(m)
	for want, further := 1, 0; err != nil && p.cfg.Overflow == DropOldest && errors.Is(err, syscall.ENOSPC); {
		n, _ := p.store.Len()
		if n == 0 {
			return fmt.Errorf("publisher: enqueue: %w (with the queue empty)", err)
		}
		want = min(want, n)
		dropped, derr := p.dropOldest(want)
		if len(dropped) > 0 {
			p.log.Warn("disk full: dropped the oldest messages", "from", dropped[0], "to", dropped[len(dropped)-1], "error", err)
		}
		switch {
		case derr == nil:
			err = p.store.Append(m)
			want, further = 2*want, 0
		case errors.Is(derr, syscall.ENOSPC) && want < n:
			if len(dropped) > 0 { // a Store that removes one at a time got some way
				err = p.store.Append(m)
			}
			if further < maxLeafMessages {
				want, further = want+1, further+1
			} else {
				want, further = 2*want, 0
			}
		default:
			return fmt.Errorf("publisher: making room on a full disk (%v): %w", err, derr)
		}
	}
	if err != nil {
		return fmt.Errorf("publisher: enqueue: %w", err)
	}
	return nil
}

// maxLeafMessages is the most messages a bbolt (v1.4) leaf spanning
// several pages holds: a node over a page is split once it has more than
// 2*MinKeysPerPage = 4 keys.
const maxLeafMessages = 4

// oldestRemover is a Store that removes its n oldest messages in one step,
// all or none, returning their seqs (BoltStore: in one transaction).
type oldestRemover interface {
	removeOldest(n int) (seqs []uint64, err error)
}

// dropOldest removes up to n of the oldest messages and counts those it
// removed, even if it then fails. A message in flight counts here and not
// again when its PUBACK arrives (see delivered).
func (p *Publisher) dropOldest(n int) (dropped []uint64, err error) {
	if r, ok := p.store.(oldestRemover); ok {
		dropped, err = r.removeOldest(n)
	} else {
		for len(dropped) < n {
			m, ok, ferr := p.store.Front()
			if ferr != nil || !ok {
				err = ferr
				break
			}
			if err = p.store.Remove(m.Seq); err != nil {
				break
			}
			dropped = append(dropped, m.Seq)
		}
	}
	for _, seq := range dropped {
		if seq == p.inFlight {
			p.inFlightDropped = true
		}
	}
	if len(dropped) > 0 {
		p.stats.DroppedOldest += uint64(len(dropped))
		p.left.Notify()
	}
	return dropped, err
}

// Epoch returns the epoch of the publisher's store, which every envelope
// carries.
func (p *Publisher) Epoch() string { return p.epoch }

// Stats returns the counters, as one consistent snapshot.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Queued, s.QueuedBytes = p.store.Len()
	return s
}

// front returns the oldest message and marks it in flight.
func (p *Publisher) front() (Message, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Message{}, false, ErrClosed
	}
	m, ok, err := p.store.Front()
	if ok && err == nil {
		p.inFlight, p.inFlightDropped = m.Seq, false
	}
	return m, ok, err
}

// delivered removes m after its PUBACK, unless DropOldest already did (and
// counted it) while it was in flight.
func (p *Publisher) delivered(m Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	dropped := p.inFlightDropped && p.inFlight == m.Seq
	p.inFlight, p.inFlightDropped = 0, false
	if dropped {
		return nil
	}
	if err := p.store.Remove(m.Seq); err != nil {
		return err
	}
	p.stats.Delivered++
	p.left.Notify()
	return nil
}

// Flush blocks until the queue is empty (every message delivered or
// dropped), ctx ends (ctx.Err()), or the publisher is closed (ErrClosed). It
// needs Run to be delivering.
func (p *Publisher) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		n, _ := p.store.Len()
		closed := p.closed
		next := p.left.Next()
		p.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case n == 0:
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Run delivers the queue until ctx ends, then returns ctx.Err(). Messages
// go one at a time in sequence order. One that fails stays at the front and
// is retried after a backoff wait. If the Retry policy has a finite cap and
// one message uses it up, Run returns an error wrapping
// reconnect.ErrExhausted (and the message's last error). The message stays
// queued. Calling Run again starts a fresh retry sequence. Run also returns
// when the session ends for good (its AwaitConnection error) or the store
// fails. Only one Run may be active at a time.
func (p *Publisher) Run(ctx context.Context) error {
	src := p.cfg.Source
	if src == nil {
		src = jitter.NewSource()
	}
	backoff := reconnect.NewBackoff(p.cfg.Retry, src)
	for {
		if err := p.cfg.Session.AwaitConnection(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err // the session ended for good
		}
		m, ok, err := p.front()
		if err != nil {
			return err
		}
		if !ok {
			select {
			case <-p.wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		now := p.clock.Now()
		if err := reconnect.Sleep(ctx, p.clock, p.lim.ReserveN(now, 1).DelayFrom(now)); err != nil {
			return err
		}
		env, err := Envelope{Epoch: p.epoch, Seq: m.Seq, Time: m.Time, Payload: m.Payload}.Marshal()
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
		err = p.cfg.Session.Publish(pctx, m.Topic, 1, false, env)
		cancel()
		if err == nil {
			backoff.Reset()
			if err := p.delivered(m); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.mu.Lock()
		p.stats.Failures++
		p.mu.Unlock()
		if s, ok := p.cfg.Session.(interface{ Connected() bool }); ok && !s.Connected() {
			// The session went away: its own reconnect paces the return, and
			// the backlog should drain as soon as it is back.
			p.log.Info("publish failed with the session down; waiting for it", "seq", m.Seq, "error", err)
			continue
		}
		wait, ok := backoff.Next(p.clock.Now())
		if !ok {
			p.log.Warn("publish retries exhausted; message stays queued", "seq", m.Seq, "error", err)
			return fmt.Errorf("publisher: message %d not delivered after %d retries: %w: %w", m.Seq, backoff.Retries(),
				reconnect.ErrExhausted, err)
		}
		p.log.Info("publish failed; message stays at the front", "seq", m.Seq, "wait", wait, "error", err)
		if err := reconnect.Sleep(ctx, p.clock, wait); err != nil {
			return err
		}
	}
}

// Close closes the store; Publish fails with ErrClosed afterwards. Stop Run
// (cancel its context) first.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.left.Notify()
	return p.store.Close()
}

// Envelope is the payload the publisher sends, as JSON:
//
//	{"epoch": "5f3ab2c0d1e4f607", "seq": 42,
//	 "time": "2026-11-21T10:00:00.123Z", "payload": "<base64>"}
//
// (epoch, seq) identifies a message of one device. seq counts from 1 within
// the epoch and is never reused in it. seq survives restarts with a durable
// store. The epoch changes whenever the sequence may restart (see
// Store.Epoch). With at-least-once delivery, a receiver keeps the highest
// seq seen, per device and epoch. It drops a message at or below it. A
// message in an epoch it has not seen is new. time is when the device
// enqueued the message. An envelope from before epochs has none ("").
//
// The zero Envelope is not one the publisher sends: DecodeEnvelope rejects
// seq 0. It is a plain value. Copies share Payload, so one is safe to share
// while no one changes its Payload.
type Envelope struct {
	Epoch   string    `json:"epoch,omitempty"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Payload []byte    `json:"payload"`
}

// Marshal encodes the envelope.
func (e Envelope) Marshal() ([]byte, error) { return json.Marshal(e) }

// ErrNotEnvelope is wrapped by DecodeEnvelope's errors.
var ErrNotEnvelope = errors.New("publisher: not an envelope")

// DecodeEnvelope parses what the publisher sent. It rejects, wrapping
// ErrNotEnvelope, anything that is not one JSON envelope with a seq of at
// least 1 and an epoch of at most 64 printable ASCII bytes.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrNotEnvelope, err)
	}
	if e.Seq == 0 {
		return Envelope{}, fmt.Errorf("%w: no sequence number", ErrNotEnvelope)
	}
	if e.Epoch != "" && !validEpoch(e.Epoch) {
		return Envelope{}, fmt.Errorf("%w: epoch %q is not 1-64 printable ASCII bytes", ErrNotEnvelope, e.Epoch)
	}
	return e, nil
}
