package reconnect

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/jitter"
)

// ResponsiveConfig configures a [Responsive] sleeper. The zero
// ResponsiveConfig is invalid: NewResponsive refuses it; start from
// DefaultResponsive. It is a plain value that NewResponsive copies, so it is
// safe to share.
type ResponsiveConfig struct {
	// InitialInterval is the first delay after a failure from no delay.
	InitialInterval time.Duration
	// MaxInterval caps the delay.
	MaxInterval time.Duration
	// RandomizationFactor spreads each sleep over delay*(1±factor), in [0, 1].
	RandomizationFactor float64
	// MaxRandomization bounds that spread in absolute terms.
	MaxRandomization time.Duration
	// UpMultiplier (>= 1) raises the delay on each failure.
	UpMultiplier float64
	// DownMultiplier (in (0, 1]) lowers it after DownMultiplierThreshold
	// consecutive successes; below InitialInterval it drops to zero.
	DownMultiplier          float64
	DownMultiplierThreshold int
}

// DefaultResponsive is the sleeper's documented tuning.
var DefaultResponsive = ResponsiveConfig{
	InitialInterval:         500 * time.Millisecond,
	MaxInterval:             15 * time.Minute,
	RandomizationFactor:     0.3,
	MaxRandomization:        2 * time.Minute,
	UpMultiplier:            1.5,
	DownMultiplier:          0.9,
	DownMultiplierThreshold: 10,
}

// Validate reports the first parameter out of range.
func (c ResponsiveConfig) Validate() error {
	if err := firstErr(
		positive("InitialInterval", c.InitialInterval),
		atLeast("MaxInterval", c.MaxInterval, "InitialInterval", c.InitialInterval),
		nonNegative("MaxRandomization", c.MaxRandomization),
		multiplier("UpMultiplier", c.UpMultiplier),
	); err != nil {
		return err
	}
	if !(c.RandomizationFactor >= 0 && c.RandomizationFactor <= 1) {
		return invalid("RandomizationFactor must be in [0, 1], got %g", c.RandomizationFactor)
	}
	if !(c.DownMultiplier > 0 && c.DownMultiplier <= 1) {
		return invalid("DownMultiplier must be in (0, 1], got %g", c.DownMultiplier)
	}
	if c.DownMultiplierThreshold < 1 {
		return invalid("DownMultiplierThreshold must be >= 1, got %d", c.DownMultiplierThreshold)
	}
	return nil
}

// Responsive paces a steady stream of calls against a service that
// throttles. It sleeps before each call for a delay that rises on every
// failure and falls after a run of successes. The callers thus settle near
// the rate the service accepts. Unlike a Backoff, one Responsive is shared
// by all the workers that call the same service. It is safe for concurrent
// use. The zero value is not usable: use [NewResponsive].
type Responsive struct {
	cfg   ResponsiveConfig
	clock Clock

	mu        sync.Mutex
	src       rand.Source
	delay     time.Duration
	successes int
	m         ResponsiveMetrics
}

// ResponsiveMetrics counts what a Responsive has done. The zero value counts
// nothing. It is a snapshot taken by Responsive.Metrics: a plain value, safe
// to share.
type ResponsiveMetrics struct {
	Invocations int64         // calls to Wait
	WentUp      int64         // failures that raised the delay
	WentDown    int64         // success runs that lowered it
	Slept       int64         // Waits that actually slept
	TotalSleep  time.Duration // time spent asleep (as scheduled)
	Delay       time.Duration // current base delay
}

// NewResponsive validates cfg and returns a sleeper with no delay yet. A nil
// clock means SystemClock; a nil src a crypto-seeded source of its own.
func NewResponsive(cfg ResponsiveConfig, clock Clock, src rand.Source) (*Responsive, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		src = jitter.NewSource()
	}
	return &Responsive{cfg: cfg, clock: clockOrSystem(clock), src: src}, nil
}

// Next counts an invocation and returns the randomised sleep due before it,
// without sleeping: for callers that run their own timers.
func (r *Responsive) Next() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Invocations++
	d := r.randomizedLocked()
	if d > 0 {
		r.m.Slept++
		r.m.TotalSleep += d
	}
	return d
}

// Wait sleeps for the current randomised delay, or until ctx ends.
func (r *Responsive) Wait(ctx context.Context) error {
	return Sleep(ctx, r.clock, r.Next())
}

// Failure raises the delay: from zero to InitialInterval, else by
// UpMultiplier, capped at MaxInterval. It also ends any run of successes.
func (r *Responsive) Failure() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.successes = 0
	next := r.cfg.InitialInterval
	if r.delay > 0 {
		next = mulDuration(r.delay, r.cfg.UpMultiplier, r.cfg.MaxInterval)
	}
	if next != r.delay {
		r.m.WentUp++
	}
	r.delay = next
}

// Success counts a success; every DownMultiplierThreshold in a row lowers the
// delay by DownMultiplier, to zero once it falls below InitialInterval.
func (r *Responsive) Success() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.successes++
	if r.successes < r.cfg.DownMultiplierThreshold || r.delay == 0 {
		return
	}
	r.successes = 0
	r.delay = mulDuration(r.delay, r.cfg.DownMultiplier, r.cfg.MaxInterval)
	if r.delay < r.cfg.InitialInterval {
		r.delay = 0
	}
	r.m.WentDown++
}

// Record is Success for a nil err and Failure otherwise.
func (r *Responsive) Record(err error) {
	if err == nil {
		r.Success()
	} else {
		r.Failure()
	}
}

// Metrics returns a snapshot of the counters.
func (r *Responsive) Metrics() ResponsiveMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.m
	m.Delay = r.delay
	return m
}

func (r *Responsive) randomizedLocked() time.Duration {
	if r.delay == 0 {
		return 0
	}
	spread := min(time.Duration(float64(r.delay)*r.cfg.RandomizationFactor), r.cfg.MaxRandomization)
	d := r.delay - spread + time.Duration(jitter.Float64(r.src)*float64(2*spread))
	return min(max(d, 0), r.cfg.MaxInterval)
}

func mulDuration(d time.Duration, m float64, limit time.Duration) time.Duration {
	v := float64(d) * m
	if v >= float64(limit) {
		return limit
	}
	return time.Duration(v)
}
