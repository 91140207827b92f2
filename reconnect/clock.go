package reconnect

import (
	"context"
	"time"
)

// Clock is the source of time for everything in this package that waits.
// Tests pass a fake clock so that no test has to sleep; production code
// passes nil wherever a Clock is optional, which means [SystemClock].
// Implementations must be safe for concurrent use: a Retry, FloodGuard or
// Responsive shared by goroutines calls its Clock from each of them.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers once on C after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that waiting needs. A Clock must not
// return a nil Timer. [Sleep] uses each Timer from one goroutine only, so it
// need not be safe for concurrent use.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; see time.Timer.Stop.
	Stop() bool
}

// SystemClock is the real clock, backed by package time.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }

func clockOrSystem(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

// Sleep waits for d on clock c (nil means [SystemClock]), or until ctx is done,
// whichever comes first. It returns ctx.Err() if ctx ended the wait. A
// non-positive d returns at once, still reporting a done ctx.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clockOrSystem(c).NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
