package devicecore

import (
	"math"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// The flood guard's token bucket, kept in a Core as 16 bytes and a bit
// (tokens, filled, guardUsed) rather than as a rate.Limiter of its own.
// A rate.Limiter is 80 bytes on the heap, a mutex and a pointer. It would
// be the largest part of a device in a hundred-million-device simulation,
// and a cache miss on every attempt. The bucket's arithmetic is
// golang.org/x/time/rate's, step for step, as reconnect.FloodGuard uses
// it: same float operations in the same order. A device thus takes the
// same slots either way. A test checks this by driving both on the same
// times.

// rateOf is the guard's refill rate in tokens a second, and its burst.
func rateOf(g *reconnect.FloodGuardConfig) (limit, burst float64) {
	return float64(g.Requests) / g.Window.Seconds(), float64(max(g.Burst, 1))
}

// available is the tokens at now in the bucket of a guard of limit and
// burst (rate.Limiter.advance).
func (c *Core) available(limit, burst float64, now time.Duration) float64 {
	if !c.is(guardUsed) {
		return burst // a new limiter starts full
	}
	last := min(c.filled, now)
	tokens := c.tokens + (now-last).Seconds()*limit
	return min(tokens, burst)
}

// reserve takes a slot at now and returns how long until it may be used
// (rate.Limiter.ReserveN(now, 1).DelayFrom(now)).
func (c *Core) reserve(g *reconnect.FloodGuardConfig, now time.Duration) time.Duration {
	limit, burst := rateOf(g)
	tokens := c.available(limit, burst, now) - 1
	var wait time.Duration
	if tokens < 0 {
		wait = durationFromTokens(-tokens, limit)
	}
	c.tokens, c.filled = tokens, now
	c.set(guardUsed)
	return wait
}

// tryReserve takes a slot at now if one is free and returns 0. Otherwise
// it leaves the bucket as it was and returns how long until one is. This
// is reconnect.FloodGuard.TryReserve: a reservation cancelled at once.
func (c *Core) tryReserve(g *reconnect.FloodGuardConfig, now time.Duration) time.Duration {
	wait := c.reserve(g, now)
	if wait > 0 { // Reservation.CancelAt(now): the token comes back
		_, burst := rateOf(g)
		c.tokens = min(c.tokens+1, burst)
	}
	return wait
}

// durationFromTokens is rate.Limit.durationFromTokens.
func durationFromTokens(tokens, limit float64) time.Duration {
	d := tokens / limit * float64(time.Second)
	if d > float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}
