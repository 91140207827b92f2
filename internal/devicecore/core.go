// Package devicecore is one device's reconnect state as a simulator keeps
// it. A Core's steps are device.Machine's. The timing, the random source
// and the clock are passed in on every call, so that a hundred million
// devices fit in memory. device.Machine is built on it; the virtual engine
// drives Cores directly. It is not part of any public API.
package devicecore

import (
	"math/rand/v2"
	"time"
	"unsafe"

	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/reconnect"
)

// Timing is device.Timing's layout: device converts its Timing to this one
// (devicecore.Timing(t)), and the compiler refuses the conversion the day a
// field is added to one and not the other. device.Timing's fields say what
// each means. Plain, read-only data a whole fleet shares.
type Timing struct {
	Policy              *reconnect.Policy
	BootSpread          time.Duration
	StableAfter         time.Duration
	Credentials         CredentialsHandling
	CredentialsWait     time.Duration
	Guard               *reconnect.FloodGuardConfig
	IgnoreServerSignals bool
}

// CredentialsHandling is what a CONNACK 4 (bad user name or password) or 5
// (not authorised) means to the device; package device exports it and its
// values under the same names.
type CredentialsHandling int

const (
	RetryCredentialsAtCap CredentialsHandling = iota
	CredentialsArePermanent
)

// Step is what the driver of a Core must do next. The zero Step (Kind 0) is
// never returned.
type Step struct {
	Kind Kind
	// Refused is the broker's code that stopped the session (KindStop);
	// 0 for a stop at the retry cap.
	Refused uint8
	// Attempt numbers the connect attempt (KindConnect), or the attempt the
	// wait precedes (KindWait), counting from 1 since the last stable
	// connection; at KindStop, the attempts made.
	Attempt int32
	// Wait is how long to wait before calling Due (KindWait).
	Wait time.Duration
}

// stepInRegisters fails the build if a Step outgrows 32 bytes on a 64-bit
// platform. The compiler keeps a Step of up to 32 in registers. At 40 it
// went through memory on every call, nearly a fifth of a simulated grid
// cell's time.
var _ [32 - unsafe.Sizeof(Step{})*(unsafe.Sizeof(uintptr(0))/8)]struct{}

// Kind enumerates Steps; device.StepKind has the same values.
type Kind uint8

const (
	KindWait    Kind = iota + 1 // wait Step.Wait, then call Due
	KindConnect                 // make one connect attempt, then call Result
	KindOnline                  // connected: wait for the loss, then call Lost
	KindStop                    // the session is over: Step.Refused says why
)

// Result is the outcome of one connect attempt: the zero Result is a
// session. Code is the CONNACK or reason code (NoConnack if none came);
// Failed says the attempt failed without one.
type Result struct {
	Code   int
	Failed bool
}

// NoConnack is Result.Code for an attempt that got no CONNACK at all.
const NoConnack = -1

// Core is a device.Machine without what a fleet shares or a simulator
// keeps once. The Timing, the random source and the clock are passed in on
// every call. Times are durations since an origin the caller chooses. A
// simulator thus keeps only each device's own state. A Machine is a Core
// with its Timing, source and clock; both take the same steps for the
// same inputs.
//
// The zero Core is a device that has not started; it is ready to use. A
// Core is not safe for concurrent use. Every call must pass the same valid
// Timing (Timing.Validate), or one whose Guard is the same, and times that
// do not go backwards. Its count of retries stops at 16,777,215, so a
// retry cap above that is never reached.
type Core struct {
	// A Core is 48 bytes, its flood guard's bucket included. With a
	// 16-byte random source beside it a device is one cache line. A
	// hundred million fit in a simulator's memory (TestCoreIsSmall).
	prev     time.Duration // the policy's previous wait (decorrelated jitter grows from it)
	start    time.Duration // the retry sequence's first failure (for MaxElapsed), when started
	upSince  time.Duration // when the current connection came up, when everUp
	tokens   float64       // the flood guard's bucket (see guard.go), when guardUsed
	filled   time.Duration // when the bucket last changed
	attempts int32         // attempts since the last stable connection
	// state is the retries the policy has granted since the sequence
	// began (the low 24 bits) and the flags (the top 8). It is one word,
	// so that a Core is 48 bytes
	state uint32
}

type coreFlags uint32

const (
	started   coreFlags = 1 << (24 + iota) // a retry sequence has begun: start is set
	everUp                                 // a connection has come up: upSince is set
	guarded                                // the guard's pending wait: its slot is free at its end
	guardUsed                              // the guard's bucket has been drawn from: tokens is set
	online                                 // connected: last step KindOnline, and Lost has not come

	maxRetries = 1<<24 - 1 // the count's bits in state
)

func (c *Core) is(f coreFlags) bool { return c.state&uint32(f) != 0 }
func (c *Core) set(f coreFlags)     { c.state |= uint32(f) }
func (c *Core) clear(f coreFlags)   { c.state &^= uint32(f) }

// retries is the count of retries the policy has granted.
func (c *Core) retries() int { return int(c.state & maxRetries) }

// Attempts returns the attempts made since the last stable connection.
func (c *Core) Attempts() int { return int(c.attempts) }

// Online reports whether the device is connected: its last step was
// KindOnline, and Lost has not been called since.
func (c *Core) Online() bool { return c.is(online) }

// Start begins the session at boot: the first attempt waits a random time
// inside the boot spread.
func (c *Core) Start(t *Timing, src rand.Source) Step {
	d := time.Duration(jitter.Float64(src) * float64(t.BootSpread))
	return c.waitFor(max(d, time.Millisecond))
}

// Due is called when a wait has elapsed, at now: it returns KindConnect, or
// another wait if the flood guard needs one.
func (c *Core) Due(t *Timing, src rand.Source, now time.Duration) Step {
	if g := t.Guard; g != nil {
		slot := g.Window / time.Duration(g.Requests)
		switch d := c.tryReserve(g, now); {
		case d > 0 && !c.is(guarded):
			c.set(guarded)
			// Every device whose bucket was full when a disruption hit the
			// fleet gets its slots on the same grid. Up to one slot's time
			// on top keeps guarded devices from retrying in step. The slot
			// is taken when the wait is over, so the guard's bound holds.
			return c.waitFor(d + time.Duration(jitter.Float64(src)*float64(slot)))
		case d > 0: // the wait ended a rounding error early: take the slot
			c.reserve(g, now)
		}
	}
	c.clear(guarded)
	c.attempts++
	return Step{Kind: KindConnect, Attempt: c.attempts}
}

// Result takes the outcome, at now, of the attempt Due asked for. A Core
// keeps no error: a KindStop after the retry cap says how many attempts
// were made, not what the last one met (a Machine says both).
func (c *Core) Result(t *Timing, src rand.Source, now time.Duration, r Result) Step {
	if r.Code == 0 && !r.Failed {
		c.upSince = now
		c.set(everUp | online)
		return Step{Kind: KindOnline, Attempt: c.attempts}
	}
	switch classOf(r.Code) {
	case permanent:
		return c.stop(r.Code)
	case credentials:
		if t.Credentials == CredentialsArePermanent {
			return c.stop(r.Code)
		}
		return c.retry(t, src, now, t.CredentialsWait+time.Duration(jitter.Float64(src)*float64(time.Second)))
	case backPressure:
		return c.stretch(t, src, c.retry(t, src, now, 0))
	}
	return c.retry(t, src, now, 0)
}

// Lost is called when an online session ends at now. The retry count
// resets only if the connection had been stable; the first reconnect then
// waits wait_0.
func (c *Core) Lost(t *Timing, src rand.Source, now time.Duration) Step {
	return c.Disconnected(t, src, now, 0)
}

// Disconnected is Lost for a session the broker ended with an MQTT 5
// DISCONNECT and its reason code. A back-pressure code (0x89, 0x97, 0x9F)
// stretches the wait, as in a CONNACK. Any other is a loss like any other.
func (c *Core) Disconnected(t *Timing, src rand.Source, now time.Duration, code int) Step {
	c.clear(online)
	if !c.is(everUp) || now-c.upSince >= t.StableAfter {
		c.prev, c.attempts = 0, 0
		c.state &^= maxRetries | uint32(started)
	}
	s := c.retry(t, src, now, 0)
	if classOf(code) == backPressure {
		return c.stretch(t, src, s)
	}
	return s
}

// stretch lengthens a wait the broker asked for with a back-pressure code
// (server busy, quota or connection rate exceeded), unless t ignores
// server signals. The policy's wait d becomes d + U[0, d). It is never
// shorter than the policy's, and 1.5 times as long on average. A fleet
// refused in the same second comes back spread over a whole d rather than
// over the policy's jitter. At the IoTCore formula's 32 s cap, that is
// over 32 s rather than 1.
func (c *Core) stretch(t *Timing, src rand.Source, s Step) Step {
	if s.Kind != KindWait || t.IgnoreServerSignals {
		return s
	}
	s.Wait += time.Duration(jitter.Float64(src) * float64(s.Wait))
	return s
}

// retry schedules the next attempt at least floor from now, or stops at
// the cap.
func (c *Core) retry(t *Timing, src rand.Source, now, floor time.Duration) Step {
	p := t.Policy
	if !c.is(started) && !p.Exhausted(c.retries()) {
		c.start = now
		c.set(started)
	}
	d, ok := p.Next(c.retries(), c.prev, now-c.start, src)
	if !ok {
		return c.stop(0)
	}
	if c.retries() < maxRetries {
		c.state++
	}
	c.prev = d
	return c.waitFor(max(d, floor))
}

func (c *Core) waitFor(d time.Duration) Step {
	return Step{Kind: KindWait, Wait: d, Attempt: c.attempts + 1}
}

// stop ends the session: refused with code, or at the retry cap (0).
func (c *Core) stop(code int) Step {
	return Step{Kind: KindStop, Attempt: c.attempts, Refused: uint8(code)}
}
