// Package fakeclock is a manually advanced clock for tests. Code under test
// creates timers on it; the test waits until the expected timers exist (a
// bounded wait on an event, never a sleep) and then moves time forward.
package fakeclock

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/waitfor"
	"github.com/herdguard/herdguard/reconnect"
)

// Clock is a fake [reconnect.Clock]. The zero value is not usable: call New.
// It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed waitfor.Broadcast // announces every change to the set of timers
}

// New returns a clock that reads start until advanced.
func New(start time.Time) *Clock {
	return &Clock{now: start}
}

var _ reconnect.Clock = (*Clock)(nil)

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock is advanced past now+d.
func (c *Clock) NewTimer(d time.Duration) reconnect.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, when: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.notifyLocked()
	return t
}

// Advance moves the clock forward by d, firing, in deadline order, every timer
// that falls due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].when.Before(c.timers[j].when) })
	kept := c.timers[:0]
	fired := false
	for _, t := range c.timers {
		if !t.when.After(c.now) {
			t.ch <- t.when
			fired = true
			continue
		}
		kept = append(kept, t)
	}
	c.timers = kept
	if fired {
		c.notifyLocked()
	}
}

// Pending reports the durations from now until each pending timer fires,
// soonest first.
func (c *Clock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, 0, len(c.timers))
	for _, t := range c.timers {
		out = append(out, t.when.Sub(c.now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// WaitTimers blocks until at least n timers are pending, or fails after the
// real-time bound timeout. It returns the pending durations, soonest first.
func (c *Clock) WaitTimers(n int, timeout time.Duration) ([]time.Duration, error) {
	if err := waitfor.Until(&c.mu, &c.changed, timeout, func() bool { return len(c.timers) >= n }); err != nil {
		return nil, fmt.Errorf("fakeclock: %d timers pending after %v, want %d", len(c.Pending()), timeout, n)
	}
	return c.Pending(), nil
}

// AdvanceToNext waits (bounded by timeout) for a pending timer and advances the
// clock exactly to the soonest one. It returns how far the clock moved.
func (c *Clock) AdvanceToNext(timeout time.Duration) (time.Duration, error) {
	p, err := c.WaitTimers(1, timeout)
	if err != nil {
		return 0, err
	}
	c.Advance(p[0])
	return p[0], nil
}

func (c *Clock) notifyLocked() { c.changed.Notify() }

type timer struct {
	clock *Clock
	when  time.Time
	ch    chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.notifyLocked()
			return true
		}
	}
	return false
}
