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
	"time"

	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/reconnect"
)

// Errors Publish returns; nothing else makes it fail.
var (
	ErrInvalid   = errors.New("publisher: invalid message")
	ErrQueueFull = errors.New("publisher: queue full")
)

// Session is what the publisher delivers through: device.Agent, or any
// session that can publish at QoS 1 and say when it is connected. A session
// that also has a Connected() bool method lets the publisher skip its own
// backoff when a publish failed because the session went away.
type Session interface {
	// Publish returns once a QoS 1 message is acknowledged (PUBACK).
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
	// AwaitConnection blocks until the session is up or ctx ends.
	AwaitConnection(ctx context.Context) error
}

// Overflow is what Publish does when the queue is full.
type Overflow int

const (
	// DropOldest makes room by dropping the oldest messages (counted).
	DropOldest Overflow = iota
	// RejectNew refuses the new message with ErrQueueFull (counted).
	RejectNew
)

// Config configures a Publisher. Session is required.
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
	Retry *reconnect.Policy
	// PublishTimeout bounds one publish waiting for its PUBACK (0: 30 s).
	PublishTimeout time.Duration
	Clock          reconnect.Clock
	Source         rand.Source
	Logger         *slog.Logger
}

// Stats are exact counters: every message enqueued is delivered, still
// queued, or counted as dropped.
type Stats struct {
	Enqueued      uint64 // accepted by Publish
	Delivered     uint64 // acknowledged by the broker and removed
	DroppedOldest uint64 // removed to make room (DropOldest)
	Rejected      uint64 // refused with ErrQueueFull (RejectNew)
	Failures      uint64 // publish attempts that failed and were retried
	Queued        int    // in the queue now (including one in flight)
	QueuedBytes   int64
}

// Publisher is store-and-forward telemetry: Publish enqueues at any time and
// never waits for the network; Run delivers at least once, in order, at
// QoS 1, removing a message only after its PUBACK. Every message carries a
// per-device sequence number (see Envelope) so that the receiver can drop
// the duplicates that at-least-once delivery implies. Safe for concurrent
// use. The zero value is not usable: use New.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	clock reconnect.Clock
	lim   *rate.Limiter

	mu     sync.Mutex
	store  Store
	stats  Stats
	wake   chan struct{} // signalled when a message is enqueued
	closed bool
}

// New validates cfg and opens the publisher over its store.
func New(cfg Config) (*Publisher, error) {
	if cfg.Session == nil {
		return nil, fmt.Errorf("%w: Config.Session is required", reconnect.ErrInvalid)
	}
	if cfg.MaxMessages < 0 || cfg.MaxBytes < 0 || cfg.MaxPayload < 0 || cfg.DrainRate < 0 || cfg.DrainBurst < 0 || cfg.PublishTimeout < 0 {
		return nil, fmt.Errorf("%w: publisher limits must be >= 0", reconnect.ErrInvalid)
	}
	if cfg.Overflow != DropOldest && cfg.Overflow != RejectNew {
		return nil, fmt.Errorf("%w: unknown Overflow %d", reconnect.ErrInvalid, cfg.Overflow)
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
	p.stats.Queued, p.stats.QueuedBytes = p.store.Len()
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

// Publish enqueues payload for topic and returns its sequence number. It
// never waits for the network: it fails only on bad input, a full queue
// under RejectNew, or a store that cannot be written.
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
		oldest, ok, err := p.store.Front()
		if err != nil || !ok {
			return 0, fmt.Errorf("publisher: making room: %w", err)
		}
		if err := p.store.Remove(oldest.Seq); err != nil {
			return 0, fmt.Errorf("publisher: making room: %w", err)
		}
		p.stats.DroppedOldest++
		p.log.Warn("queue full: dropped the oldest message", "seq", oldest.Seq)
	}
	m.Seq = p.store.LastSeq() + 1
	if err := p.store.Append(m); err != nil {
		return 0, fmt.Errorf("publisher: enqueue: %w", err)
	}
	p.stats.Enqueued++
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return m.Seq, nil
}

// Stats returns the counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Queued, s.QueuedBytes = p.store.Len()
	return s
}

func (p *Publisher) front() (Message, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Message{}, false, ErrClosed
	}
	return p.store.Front()
}

// delivered removes m; it may already be gone if DropOldest dropped it while
// it was in flight.
func (p *Publisher) delivered(m Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.stats.Delivered++
	return p.store.Remove(m.Seq)
}

// Run delivers the queue until ctx ends, then returns ctx.Err(). Messages
// go one at a time in sequence order; one that fails stays at the front and
// is retried after a backoff wait.
func (p *Publisher) Run(ctx context.Context) error {
	src := p.cfg.Source
	if src == nil {
		src = reconnect.NewSource()
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
		env, err := Envelope{Seq: m.Seq, Time: m.Time, Payload: m.Payload}.Marshal()
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
		wait, _ := backoff.Next(p.clock.Now())
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
	return p.store.Close()
}

// Envelope is the payload the publisher sends, as JSON:
//
//	{"seq": 42, "time": "2026-11-21T10:00:00.123Z", "payload": "<base64>"}
//
// seq is the device's sequence number, from 1, never reused (it survives
// restarts with a durable store); with at-least-once delivery a receiver
// keeps the highest seq seen per device and drops anything at or below it.
// time is when the device enqueued the message.
type Envelope struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Payload []byte    `json:"payload"`
}

// Marshal encodes the envelope.
func (e Envelope) Marshal() ([]byte, error) { return json.Marshal(e) }

// DecodeEnvelope parses what the publisher sent.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, fmt.Errorf("publisher: not an envelope: %w", err)
	}
	if e.Seq == 0 {
		return Envelope{}, errors.New("publisher: envelope without a sequence number")
	}
	return e, nil
}
