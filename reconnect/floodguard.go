package reconnect

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// FloodGuard keeps a caller under Requests per Window, whatever its retry
// policy says, by making each call wait just long enough. It is a token
// bucket (golang.org/x/time/rate) refilled at Requests/Window with room for
// Burst. In any Window a caller makes at most Requests + Burst - 1 calls.
// Burst 1 (the default) is thus a hard "at most Requests per Window".
//
// A FloodGuard is safe for concurrent use. The zero value is not usable:
// use [NewFloodGuard].
type FloodGuard struct {
	lim   *rate.Limiter
	clock Clock
}

// FloodGuardConfig configures a FloodGuard. The zero FloodGuardConfig is
// invalid: NewFloodGuard refuses it. It is a plain value that NewFloodGuard
// copies, so it is safe to share.
type FloodGuardConfig struct {
	Requests int           // > 0
	Window   time.Duration // > 0
	Burst    int           // 0 means 1
	Clock    Clock         // nil: SystemClock
}

// Validate reports the first unusable field, as NewFloodGuard would.
func (c FloodGuardConfig) Validate() error {
	if c.Requests <= 0 {
		return invalid("FloodGuard Requests must be > 0, got %d", c.Requests)
	}
	if err := positive("FloodGuard Window", c.Window); err != nil {
		return err
	}
	if c.Burst < 0 {
		return invalid("FloodGuard Burst must be >= 0, got %d", c.Burst)
	}
	return nil
}

// NewFloodGuard validates c and returns the guard.
func NewFloodGuard(c FloodGuardConfig) (*FloodGuard, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	burst := max(c.Burst, 1)
	every := rate.Limit(float64(c.Requests) / c.Window.Seconds())
	return &FloodGuard{lim: rate.NewLimiter(every, burst), clock: clockOrSystem(c.Clock)}, nil
}

// Wait blocks until the caller may make one request, or ctx ends. The slot is
// given back if ctx ends first.
func (g *FloodGuard) Wait(ctx context.Context) error {
	now := g.clock.Now()
	r := g.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if err := Sleep(ctx, g.clock, d); err != nil {
		r.CancelAt(g.clock.Now())
		return err
	}
	return nil
}

// Reserve takes a slot at time now and returns how long the caller must wait
// before using it. It never blocks; a caller that drives its own timers (a
// state machine, a simulator in virtual time) uses it instead of Wait.
func (g *FloodGuard) Reserve(now time.Time) time.Duration {
	return g.lim.ReserveN(now, 1).DelayFrom(now)
}

// TryReserve takes a slot at time now if one is free and returns 0;
// otherwise it takes nothing and returns how long until one is. A caller
// that then waits longer than that (to add jitter) calls TryReserve again
// when done, so the bound holds whatever it added.
func (g *FloodGuard) TryReserve(now time.Time) time.Duration {
	r := g.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}
