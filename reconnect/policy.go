package reconnect

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/herdguard/herdguard/internal/jitter"
)

// RetryForever is the retry cap that never gives up. It must be asked for by
// name: a zero cap means no retries at all, never "use some default".
const RetryForever = -1

// Limits end a retry sequence. Both are explicit: there is no hidden default.
// The zero Limits allows no retry: the first attempt is the only one. It is a
// plain value that New copies, so it is safe to share.
type Limits struct {
	// MaxRetries is the number of retries after the first attempt, or
	// RetryForever. 0 means the first attempt is the only one.
	MaxRetries int
	// MaxElapsed, if > 0, ends the sequence when the next wait would end more
	// than MaxElapsed after the first failure. 0 means no limit on time.
	MaxElapsed time.Duration
}

// Validate reports a cap that is neither a count nor RetryForever, or a
// negative elapsed limit.
func (l Limits) Validate() error {
	if l.MaxRetries < 0 && l.MaxRetries != RetryForever {
		return invalid("MaxRetries must be >= 0 or RetryForever, got %d", l.MaxRetries)
	}
	return nonNegative("MaxElapsed", l.MaxElapsed)
}

// Policy is a validated Shape with its Limits. It is read-only after [New].
// A single *Policy is thus safe for concurrent use by any number of
// goroutines. It is meant to be shared by a whole fleet. The per-device
// part is a [Backoff]. The zero Policy is not valid: use New.
type Policy struct {
	shape  Shape
	limits Limits
}

// New validates shape and limits and returns the policy they describe.
// Invalid parameters are an error wrapping [ErrInvalid], never a panic.
func New(shape Shape, limits Limits) (*Policy, error) {
	if shape == nil {
		return nil, invalid("nil Shape")
	}
	if err := shape.Validate(); err != nil {
		return nil, fmt.Errorf("%v: %w", shape, err)
	}
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return &Policy{shape: shape, limits: limits}, nil
}

// Shape returns the policy's shape.
func (p *Policy) Shape() Shape { return p.shape }

// Limits returns the policy's limits.
func (p *Policy) Limits() Limits { return p.limits }

// Delay is the wait before retry n given the previous wait and a uniform
// random u in [0, 1). It ignores the limits; see [Backoff.Next] for those.
func (p *Policy) Delay(n int, prev time.Duration, u float64) time.Duration {
	return p.shape.Delay(n, prev, u)
}

// Next is the wait before retry n (0-based), drawing its jitter from src,
// given the previous wait and how long after the sequence's first failure
// the wait begins. ok is false, and nothing is drawn, when retry n is beyond
// the cap; ok is false too when the wait would end past MaxElapsed. A
// caller that keeps its own count and clock (a [Backoff], or a simulator's
// compact device state) steps through a sequence with it.
func (p *Policy) Next(n int, prev, elapsed time.Duration, src rand.Source) (wait time.Duration, ok bool) {
	if p.Exhausted(n) {
		return 0, false
	}
	d := p.shape.Delay(n, prev, jitter.Float64(src))
	if max := p.limits.MaxElapsed; max > 0 && elapsed+d > max {
		return 0, false
	}
	return d, true
}

// Exhausted reports whether retry n (0-based) is beyond the retry cap.
func (p *Policy) Exhausted(n int) bool {
	return p.limits.MaxRetries != RetryForever && n >= p.limits.MaxRetries
}

func (p *Policy) String() string {
	cap := "forever"
	if p.limits.MaxRetries != RetryForever {
		cap = fmt.Sprint(p.limits.MaxRetries)
	}
	s := fmt.Sprintf("%v retries=%s", p.shape, cap)
	if p.limits.MaxElapsed > 0 {
		s += fmt.Sprintf(" max-elapsed=%v", p.limits.MaxElapsed)
	}
	return s
}

// Backoff is one device's (or one operation's) position in a Policy: the retry
// count, the previous wait and its own random source. It is small (at most 64
// bytes on 64-bit platforms) so a simulator can hold a million of them.
// A Backoff is not safe for concurrent use; give each goroutine its own.
// The zero value is not usable: use [NewBackoff].
type Backoff struct {
	policy *Policy
	src    rand.Source
	n      int
	prev   time.Duration
	start  time.Time
}

// NewBackoff starts a retry sequence for p drawing jitter from src. A nil src
// means a source of its own seeded from crypto/rand, so that two devices never
// draw the same sequence; pass a seeded source (rand.NewPCG(seed, id)) for
// reproducible runs.
func NewBackoff(p *Policy, src rand.Source) *Backoff {
	if src == nil {
		src = jitter.NewSource()
	}
	return &Backoff{policy: p, src: src}
}

// Next returns the wait before the next retry, with now the time of the
// failure it follows. ok is false when the policy's limits say to stop: the
// retry cap is reached or the wait would end past MaxElapsed since the first
// failure. Each call with ok true counts one retry.
func (b *Backoff) Next(now time.Time) (wait time.Duration, ok bool) {
	if b.start.IsZero() && !b.policy.Exhausted(b.n) {
		b.start = now
	}
	d, ok := b.policy.Next(b.n, b.prev, now.Sub(b.start), b.src)
	if !ok {
		return 0, false
	}
	b.n++
	b.prev = d
	return d, true
}

// Retries returns how many retries Next has granted since the last Reset.
func (b *Backoff) Retries() int { return b.n }

// Reset starts the sequence again from retry 0, keeping the random source.
func (b *Backoff) Reset() {
	b.n, b.prev, b.start = 0, 0, time.Time{}
}

// Policy returns the policy b follows.
func (b *Backoff) Policy() *Policy { return b.policy }

// SetPolicy switches b to p from its next wait on, keeping the retry count:
// a device that takes new tuning mid-outage neither starts over nor jumps.
func (b *Backoff) SetPolicy(p *Policy) { b.policy = p }

// draw draws from b's source: a little more jitter from the same
// per-device sequence.
func (b *Backoff) draw() float64 { return jitter.Float64(b.src) }
