package reconnect

import (
	"fmt"
	"math"
	"time"
)

// Shape is the curve a [Policy] follows: the wait before retry number n (n
// = 0 is the first retry). Shapes are plain configuration values. Once
// given to [New] they are copied and never change. One Policy can thus be
// shared by any number of goroutines and devices. A nil Shape is invalid:
// New refuses it.
//
// Delay must be a pure function of its arguments. prev is the previous
// wait, 0 before the first retry. Only [Decorrelated] and [FleetSafe] use
// prev. u is a uniform random number in [0, 1) supplied by the caller.
// Every draw is thus reproducible from a seed.
type Shape interface {
	Delay(n int, prev time.Duration, u float64) time.Duration
	// Validate reports why the parameters cannot produce a sane schedule.
	Validate() error
	String() string
}

// IoTCore is the mission's formula. Google Cloud IoT Core documented it
// for devices:
//
//	wait_n = min(2^n * Base + U[0, Jitter], MaxBackoff)
//
// The first wait (n = 0) is Base + U[0, Jitter]. Taken literally, the
// formula loses all jitter once 2^n * Base + Jitter passes MaxBackoff.
// Every device then waits exactly MaxBackoff. A fleet that drifts there
// retries in step. JitterAtCap applies the min before adding the jitter
// instead. The wait is then:
//
//	wait_n = min(2^n * Base, MaxBackoff) + U[0, Jitter]
//
// Waits at the cap then still spread over Jitter. They may exceed
// MaxBackoff by up to Jitter.
//
// The zero IoTCore is invalid (Base must be > 0); start from
// DefaultIoTCore. It is a plain value with pure methods: safe for
// concurrent use.
type IoTCore struct {
	Base        time.Duration
	Jitter      time.Duration
	MaxBackoff  time.Duration
	JitterAtCap bool
}

// DefaultIoTCore is the formula with its documented parameters: 1 s base,
// 1000 ms of jitter, 32 s cap. Copy and adjust it; 64 s is a common cap.
var DefaultIoTCore = IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: 32 * time.Second}

func (s IoTCore) Delay(n int, _ time.Duration, u float64) time.Duration {
	exp := pow2(s.Base, n, s.MaxBackoff)
	jitter := scale(s.Jitter, u)
	if s.JitterAtCap {
		return exp + jitter // Validate keeps MaxBackoff+Jitter from overflowing
	}
	if exp > s.MaxBackoff-jitter {
		return s.MaxBackoff
	}
	return exp + jitter
}

func (s IoTCore) Validate() error {
	return firstErr(
		positive("Base", s.Base),
		nonNegative("Jitter", s.Jitter),
		atLeast("MaxBackoff", s.MaxBackoff, "Base", s.Base),
		fits("MaxBackoff+Jitter", s.MaxBackoff, s.Jitter),
	)
}

func (s IoTCore) String() string {
	tail := ""
	if s.JitterAtCap {
		tail = ",jitter-at-cap"
	}
	return fmt.Sprintf("iotcore(base=%v,jitter=%v,max=%v%s)", s.Base, s.Jitter, s.MaxBackoff, tail)
}

// Exponential is backoff without jitter: min(Max, Base * Multiplier^n). With
// Base 1 s, Multiplier 2 and Max 10 min it is what paho.mqtt.golang's built-in
// reconnect does, and why a fleet using it returns in lockstep. It is here as
// the baseline to compare against. The zero Exponential is invalid (Base must
// be > 0). It is a plain value with pure methods: safe for concurrent use.
type Exponential struct {
	Base       time.Duration
	Multiplier float64
	Max        time.Duration
}

func (s Exponential) Delay(n int, _ time.Duration, _ float64) time.Duration {
	if s.Multiplier == 2 {
		return pow2(s.Base, n, s.Max)
	}
	v := float64(s.Base) * math.Pow(s.Multiplier, float64(max(n, 0)))
	if v >= float64(s.Max) || math.IsNaN(v) {
		return s.Max
	}
	return time.Duration(v)
}

func (s Exponential) Validate() error {
	return firstErr(
		positive("Base", s.Base),
		multiplier("Multiplier", s.Multiplier),
		atLeast("Max", s.Max, "Base", s.Base),
	)
}

func (s Exponential) String() string {
	return fmt.Sprintf("exponential(base=%v,x%g,max=%v)", s.Base, s.Multiplier, s.Max)
}

// FullJitter waits U[0, min(Max, Base * 2^n)): the AWS Architecture Blog's
// "full jitter", the least synchronised of the exponential shapes. The zero
// FullJitter is invalid (Base must be > 0). It is a plain value with pure
// methods: safe for concurrent use.
type FullJitter struct {
	Base time.Duration
	Max  time.Duration
}

func (s FullJitter) Delay(n int, _ time.Duration, u float64) time.Duration {
	return scale(pow2(s.Base, n, s.Max), u)
}

func (s FullJitter) Validate() error {
	return firstErr(positive("Base", s.Base), atLeast("Max", s.Max, "Base", s.Base))
}

func (s FullJitter) String() string { return fmt.Sprintf("full(base=%v,max=%v)", s.Base, s.Max) }

// EqualJitter waits v/2 + U[0, v/2) with v = min(Max, Base * 2^n): never less
// than half the exponential wait, jittered over the other half. The zero
// EqualJitter is invalid (Base must be > 0). It is a plain value with pure
// methods: safe for concurrent use.
type EqualJitter struct {
	Base time.Duration
	Max  time.Duration
}

func (s EqualJitter) Delay(n int, _ time.Duration, u float64) time.Duration {
	half := pow2(s.Base, n, s.Max) / 2
	return half + scale(half, u)
}

func (s EqualJitter) Validate() error {
	return firstErr(positive("Base", s.Base), atLeast("Max", s.Max, "Base", s.Base))
}

func (s EqualJitter) String() string { return fmt.Sprintf("equal(base=%v,max=%v)", s.Base, s.Max) }

// Decorrelated waits min(Max, U[Base, 3 * prev)), with prev the previous
// wait (Base before the first retry). It is the AWS "decorrelated jitter",
// which grows from the last wait rather than from the retry count. The zero
// Decorrelated is invalid (Base must be > 0). It is a plain value with pure
// methods: safe for concurrent use.
type Decorrelated struct {
	Base time.Duration
	Max  time.Duration
}

func (s Decorrelated) Delay(_ int, prev time.Duration, u float64) time.Duration {
	prev = max(prev, s.Base)
	// In float64: 3*prev may overflow a Duration; the result is capped anyway.
	v := float64(s.Base) + u*(3*float64(prev)-float64(s.Base))
	if v >= float64(s.Max) {
		return s.Max
	}
	return time.Duration(v)
}

func (s Decorrelated) Validate() error {
	return firstErr(positive("Base", s.Base), atLeast("Max", s.Max, "Base", s.Base))
}

func (s Decorrelated) String() string {
	return fmt.Sprintf("decorrelated(base=%v,max=%v)", s.Base, s.Max)
}

// FleetSafe waits U[hi/2, hi) with hi = min(Max, 3 * prev), prev being the
// previous wait (Base before the first retry). This is equal jitter on the
// envelope of decorrelated jitter. The first wait is U[1.5, 3) x Base.
// FleetSafe is the shape that passes every cell of devicesim's grid
// (docs/measurements.md). The grid has fleets of 1,000 to a million devices
// against a broker back from a minute's outage. The broker admits 500 to
// 50,000 connects/s and refuses, holds or drops the rest:
//
//   - At the cap it still spreads its waits over [Max/2, Max). There
//     [Decorrelated] waits exactly Max two times in three. Devices refused
//     together under it come back together one cap later.
//   - It waits at least half its envelope, three quarters of the cap on
//     average once there. A fleet queued behind a slow admission thus makes
//     fewer attempts than with [FullJitter]. FullJitter's waits average half
//     the cap: too many attempts a device when the queue is long.
//   - Its envelope grows from each device's own previous draw. Devices that
//     lost their sessions together thus share no schedule after it. Under
//     [EqualJitter]'s 2^n envelope they do, and come back from a flapping
//     broker in rounds.
//
// The zero FleetSafe is invalid (Base must be > 0); start from
// DefaultFleetSafe. It is a plain value with pure methods: safe for
// concurrent use.
type FleetSafe struct {
	Base time.Duration
	Max  time.Duration
}

func (s FleetSafe) Delay(_ int, prev time.Duration, u float64) time.Duration {
	prev = max(prev, s.Base)
	hi := min(float64(s.Max), 3*float64(prev)) // in float64: 3*prev may overflow a Duration
	return time.Duration(hi/2 + u*hi/2)
}

func (s FleetSafe) Validate() error {
	return firstErr(positive("Base", s.Base), atLeast("Max", s.Max, "Base", s.Base))
}

func (s FleetSafe) String() string { return fmt.Sprintf("fleet-safe(base=%v,max=%v)", s.Base, s.Max) }

// DefaultFleetSafe is FleetSafe with the mission's base and cap: 1 s and 32 s.
var DefaultFleetSafe = FleetSafe{Base: time.Second, Max: 32 * time.Second}

// Linear waits Initial + n * Step, up to Max. The zero Linear is invalid
// (Initial and Step must be > 0). It is a plain value with pure methods: safe
// for concurrent use.
type Linear struct {
	Initial time.Duration
	Step    time.Duration
	Max     time.Duration
}

func (s Linear) Delay(n int, _ time.Duration, _ float64) time.Duration {
	n = max(n, 0)
	if n > 0 && s.Step > 0 && time.Duration(n) > (s.Max-s.Initial)/s.Step {
		return s.Max
	}
	return min(s.Initial+time.Duration(n)*s.Step, s.Max)
}

func (s Linear) Validate() error {
	return firstErr(
		positive("Initial", s.Initial),
		positive("Step", s.Step),
		atLeast("Max", s.Max, "Initial", s.Initial),
	)
}

func (s Linear) String() string {
	return fmt.Sprintf("linear(initial=%v,step=%v,max=%v)", s.Initial, s.Step, s.Max)
}

// Constant waits Interval before every retry. The zero Constant is invalid
// (Interval must be > 0). It is a plain value with pure methods: safe for
// concurrent use.
type Constant struct {
	Interval time.Duration
}

func (s Constant) Delay(int, time.Duration, float64) time.Duration { return s.Interval }

func (s Constant) Validate() error { return positive("Interval", s.Interval) }

func (s Constant) String() string { return fmt.Sprintf("constant(%v)", s.Interval) }

// pow2 returns min(base * 2^n, limit) without overflowing.
func pow2(base time.Duration, n int, limit time.Duration) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 62 || base > limit>>uint(n) {
		return limit
	}
	return base << uint(n)
}

// scale returns d * u for u in [0, 1).
func scale(d time.Duration, u float64) time.Duration {
	return time.Duration(float64(d) * u)
}

// ErrInvalid is wrapped by every error that reports a bad parameter.
var ErrInvalid = errorString("reconnect: invalid parameter")

type errorString string

func (e errorString) Error() string { return string(e) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return invalid("%s must be > 0, got %v", name, d)
	}
	return nil
}

func nonNegative(name string, d time.Duration) error {
	if d < 0 {
		return invalid("%s must be >= 0, got %v", name, d)
	}
	return nil
}

func atLeast(name string, d time.Duration, otherName string, other time.Duration) error {
	if d < other {
		return invalid("%s (%v) must be >= %s (%v)", name, d, otherName, other)
	}
	return nil
}

func fits(name string, a, b time.Duration) error {
	if a > math.MaxInt64-b {
		return invalid("%s overflows a time.Duration", name)
	}
	return nil
}

func multiplier(name string, m float64) error {
	if math.IsNaN(m) || math.IsInf(m, 0) || m < 1 {
		return invalid("%s must be a finite number >= 1, got %g", name, m)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
