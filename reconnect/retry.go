package reconnect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/jitter"
)

// Errors a [Retry] ends with. The error returned is a *RetryError; test it
// with errors.Is against these, and against the operation's own last error.
var (
	// ErrExhausted: the policy's retry cap or elapsed limit was reached.
	ErrExhausted = errors.New("reconnect: retries exhausted")
	// ErrCancelled: the context ended the loop (the RetryError also wraps
	// ctx.Err(), so errors.Is(err, context.DeadlineExceeded) works too).
	ErrCancelled = errors.New("reconnect: cancelled")
	// ErrPermanent: the last error was not retryable. [Permanent] marks an
	// error so; errors.Is(err, ErrPermanent) is true for a marked error.
	ErrPermanent = errors.New("reconnect: permanent error")
)

// DefaultMaxRetryAfter is the ceiling put on a server's Retry-After hint
// when [Retry.MaxRetryAfter] is zero. It is long enough to honour a real
// overload. It is short enough that a hostile or broken "Retry-After:
// 9999999" cannot park a device.
const DefaultMaxRetryAfter = 5 * time.Minute

// DefaultMaxRetryAfterJitter bounds the jitter added to a server's hint when
// [Retry.RetryAfterJitter] is zero; see there.
const DefaultMaxRetryAfterJitter = time.Minute

// Retry runs one operation until it succeeds, fails permanently, runs out
// of retries or its context ends. It is plain configuration. The zero value
// is not usable, as Policy is required. A Retry value may be shared and
// used by concurrent Do calls. Each Do call keeps its own state and its own
// random generator (see Source).
type Retry struct {
	// Policy times the waits and caps the retries. Required.
	Policy *Policy
	// Retryable decides whether an error is worth another attempt. nil means
	// [IsRetryable]: everything except errors marked permanent.
	Retryable func(error) bool
	// MaxRetryAfter caps a server's hint (an error carrying a RetryAfterHint).
	// 0 means DefaultMaxRetryAfter; a negative value ignores hints.
	MaxRetryAfter time.Duration
	// RetryAfterJitter bounds the jitter added to a hint. A hint is a
	// floor, not an instant. After a hint h (already capped by
	// MaxRetryAfter) the wait is h + U[0, J), or the policy's own wait if
	// that is longer. A fleet given the same hint at the same moment thus
	// does not come back at the same instant. 0 means
	// J = min(h, DefaultMaxRetryAfterJitter): the fleet returns spread over
	// [h, 2h), at most one minute past h. A positive value is J itself. A
	// negative one adds no jitter.
	RetryAfterJitter time.Duration
	// Notify, if set, is called before each wait. It must not block.
	Notify func(Notice)
	// Clock is the source of time (nil: SystemClock). Tests pass a fake.
	Clock Clock
	// Source seeds the jitter. Each Do call seeds a generator of its own
	// with two draws from Source. The draws are made under a lock that
	// every Retry shares. One Retry with a Source may thus serve concurrent
	// Do calls. A seeded Source makes a sequence of Do calls reproducible.
	// Source itself must not be drawn from elsewhere while a Do call may be
	// starting. nil: each Do call seeds its generator from crypto/rand.
	Source rand.Source
}

// Notice describes a wait that is about to start. The zero Notice is never
// sent (Attempt counts from 1). A Notice is a plain value, passed by copy:
// safe to share.
type Notice struct {
	Attempt int           // attempts made so far (1 after the first failure)
	Delay   time.Duration // how long the loop will wait
	Hint    time.Duration // the server's hint after clamping, before its jitter; 0 if none
	Cause   error         // the error that caused the retry
}

// RetryError is the error Do returns when it gives up. errors.Is matches
// Reason (ErrExhausted, ErrCancelled or ErrPermanent), the last error the
// operation returned, and on cancellation the context's error. The zero
// RetryError is not meaningful: Do makes them. Once made it is not changed,
// so it is safe to share.
type RetryError struct {
	Attempts int
	Reason   error
	Last     error
	ctxErr   error
}

func (e *RetryError) Error() string {
	if e.Last == nil {
		return fmt.Sprintf("%v after %d attempts", e.Reason, e.Attempts)
	}
	return fmt.Sprintf("%v after %d attempts: %v", e.Reason, e.Attempts, e.Last)
}

func (e *RetryError) Unwrap() []error {
	errs := []error{e.Reason}
	if e.Last != nil {
		errs = append(errs, e.Last)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// Do calls op until it returns nil or the loop gives up (see [RetryError]).
// It never waits after the final attempt and returns promptly once ctx is done.
func (r Retry) Do(ctx context.Context, op func(context.Context) error) error {
	_, err := DoValue(ctx, r, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

// DoValue is Do for an operation that returns a value.
func DoValue[T any](ctx context.Context, r Retry, op func(context.Context) (T, error)) (T, error) {
	var zero T
	if r.Policy == nil {
		return zero, invalid("Retry.Policy is nil")
	}
	clock := clockOrSystem(r.Clock)
	retryable := r.Retryable
	if retryable == nil {
		retryable = IsRetryable
	}
	b := NewBackoff(r.Policy, r.callSource())
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return zero, &RetryError{Attempts: attempt - 1, Reason: ErrCancelled, ctxErr: err}
		}
		v, err := op(ctx)
		if err == nil {
			return v, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return zero, &RetryError{Attempts: attempt, Reason: ErrCancelled, Last: err, ctxErr: ctxErr}
		}
		if !retryable(err) {
			return zero, &RetryError{Attempts: attempt, Reason: ErrPermanent, Last: err}
		}
		now := clock.Now()
		delay, ok := b.Next(now)
		if !ok {
			return zero, &RetryError{Attempts: attempt, Reason: ErrExhausted, Last: err}
		}
		hint := r.clampHint(err)
		if hint > 0 {
			if floor := addSaturating(hint, r.hintJitter(hint, b.draw())); floor > delay {
				delay = floor
				if max := r.Policy.limits.MaxElapsed; max > 0 && now.Add(delay).Sub(b.start) > max {
					return zero, &RetryError{Attempts: attempt, Reason: ErrExhausted, Last: err}
				}
			}
		}
		if r.Notify != nil {
			r.Notify(Notice{Attempt: attempt, Delay: delay, Hint: hint, Cause: err})
		}
		if ctxErr := Sleep(ctx, clock, delay); ctxErr != nil {
			return zero, &RetryError{Attempts: attempt, Reason: ErrCancelled, Last: err, ctxErr: ctxErr}
		}
	}
}

// sourceMu serialises the seeding draws from every Retry's Source: a Retry
// is a value, copied freely, so the lock cannot live in it.
var sourceMu sync.Mutex

// callSource returns a generator for one Do call.
func (r Retry) callSource() rand.Source {
	if r.Source == nil {
		return jitter.NewSource()
	}
	sourceMu.Lock()
	defer sourceMu.Unlock()
	return rand.NewPCG(r.Source.Uint64(), r.Source.Uint64())
}

// hintJitter is the jitter added to hint h for a uniform u in [0, 1).
func (r Retry) hintJitter(h time.Duration, u float64) time.Duration {
	j := r.RetryAfterJitter
	switch {
	case j < 0:
		return 0
	case j == 0:
		j = min(h, DefaultMaxRetryAfterJitter)
	}
	return scale(j, u)
}

func addSaturating(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

func (r Retry) clampHint(err error) time.Duration {
	if r.MaxRetryAfter < 0 {
		return 0
	}
	hint, ok := RetryAfterOf(err)
	if !ok || hint <= 0 {
		return 0
	}
	ceiling := r.MaxRetryAfter
	if ceiling == 0 {
		ceiling = DefaultMaxRetryAfter
	}
	return min(hint, ceiling)
}

// RetryAfterHint is implemented by errors that carry a server's request to
// wait before retrying, such as *HTTPError with a Retry-After header. Only
// one found in an error's chain is asked; like the error, it should not
// change once made, so that any goroutine holding it may ask.
type RetryAfterHint interface {
	RetryAfterHint() time.Duration
}

// RetryAfterOf returns the first hint found in err's chain.
func RetryAfterOf(err error) (time.Duration, bool) {
	var h RetryAfterHint
	if errors.As(err, &h) {
		return h.RetryAfterHint(), true
	}
	return 0, false
}

// WithRetryAfter annotates err with a server's hint to wait at least d.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &hintError{err: err, hint: d}
}

type hintError struct {
	err  error
	hint time.Duration
}

func (e *hintError) Error() string                 { return e.err.Error() }
func (e *hintError) Unwrap() error                 { return e.err }
func (e *hintError) RetryAfterHint() time.Duration { return e.hint }

// Permanent marks err as not worth retrying. errors.Is(Permanent(err),
// ErrPermanent) and errors.Is(Permanent(err), err) both hold.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// Classifier is implemented by errors that know whether they are retryable,
// such as *HTTPError. Only one found in an error's chain is asked; like the
// error, it should not change once made, so that any goroutine may ask.
type Classifier interface {
	Retryable() bool
}

// IsRetryable is the default predicate: false for errors marked [Permanent]
// and for errors whose [Classifier] says so, true for everything else
// (including network errors and timeouts).
func IsRetryable(err error) bool {
	if errors.Is(err, ErrPermanent) {
		return false
	}
	var c Classifier
	if errors.As(err, &c) {
		return c.Retryable()
	}
	return true
}
