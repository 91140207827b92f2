package device

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/herdguard/herdguard/device/internal/transport"
	"github.com/herdguard/herdguard/internal/devicecore"
	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/reconnect"
)

// Errors the session ends with; the agent's Err wraps one of them.
var (
	// ErrGaveUp: the retry cap was reached without a stable connection.
	ErrGaveUp = errors.New("device: gave up reconnecting")
	// ErrRefused: the broker refused with a code the device must not retry
	// (1 protocol version, 2 identifier rejected; 4 and 5 when credentials
	// failures are configured as permanent).
	ErrRefused = errors.New("device: connection refused permanently")
	// ErrInvalid: every invalid input (a Config, a Timing, a Subscribe's
	// arguments) is an error wrapping it. One another package found
	// invalid (a reconnect policy's parameters) wraps that package's
	// ErrInvalid too.
	ErrInvalid = errors.New("device: invalid input")
)

// ConnackError is a broker's refusal: the return code of its CONNACK. MQTT
// 3.1.1 uses 1 to 5. Any other non-zero byte a broker sent is kept as sent.
// errors.As finds it in an EventAttemptFailed's Err and in a Step's Err.
// errors.As also finds it in Agent.Err, beside ErrRefused, when the refusal
// ended the session. It is there too, beside ErrGaveUp, when the refusal
// was the last before the retry cap. Err is the transport's own report of
// the same refusal, if it made one. The zero ConnackError (Code 0) is not a
// refusal and not meaningful. Once made it is not changed, so it is safe to
// share.
type ConnackError struct {
	Code int
	Err  error
	// Reference is the Server Reference an MQTT 5 broker named with 0x9C
	// (use another server) or 0x9D (server moved), if it named one.
	Reference string
}

func (e *ConnackError) Error() string {
	s := fmt.Sprintf("CONNACK %d (%s)", e.Code, transport.CodeText(e.Code))
	if e.Reference != "" {
		s += " to " + e.Reference
	}
	return s
}

// Unwrap returns the transport's report (paho's), or nil.
func (e *ConnackError) Unwrap() error { return e.Err }

// CredentialsHandling is what a CONNACK 4 (bad user name or password) or 5
// (not authorised) means to the device. The zero CredentialsHandling is
// RetryCredentialsAtCap. It is a plain value, safe to share.
type CredentialsHandling = devicecore.CredentialsHandling

const (
	// RetryCredentialsAtCap keeps retrying, but never sooner than the policy's
	// cap: credentials may be fixed server-side, and a fleet with revoked
	// credentials must not hammer the broker.
	RetryCredentialsAtCap = devicecore.RetryCredentialsAtCap
	// CredentialsArePermanent stops the session with ErrRefused.
	CredentialsArePermanent = devicecore.CredentialsArePermanent
)

// Timing is the reconnect timing of a session: plain, read-only data that a
// whole fleet can share. Its layout is devicecore.Timing's, which the
// machine converts it to (a field added here must be added there). The zero Timing is invalid (no Policy): NewMachine
// refuses it. Start from DefaultTiming.
type Timing struct {
	// Policy times every wait and caps consecutive unstable attempts.
	Policy *reconnect.Policy
	// BootSpread: at start the first connect waits U[0, BootSpread), so a
	// fleet that powers on together does not connect together. Must be > 0.
	BootSpread time.Duration
	// StableAfter: the retry count resets only once a connection has stayed
	// up this long, so a broker that accepts and then drops still meets a
	// growing backoff.
	StableAfter time.Duration
	// Credentials says what CONNACK 4 and 5 mean.
	Credentials CredentialsHandling
	// CredentialsWait is the least wait after a credentials refusal when
	// retrying them (RetryCredentialsAtCap); plus up to 1 s of jitter.
	CredentialsWait time.Duration
	// Guard, if set, bounds connect attempts whatever the policy says.
	Guard *reconnect.FloodGuardConfig
	// IgnoreServerSignals makes MQTT 5's back-pressure codes (0x89, 0x97,
	// 0x9F) plain failures, as a client that does not read them would
	// take them: a simulator's control group. Firmware leaves it false.
	IgnoreServerSignals bool
}

// DefaultTiming returns the session's defaults. The policy is the IoTCore
// formula (1 s base, 1000 ms jitter, 32 s cap), retrying forever. The boot
// spread is 10 s. The stability window is 60 s. Credential refusals are
// retried at the 32 s cap. The guard allows 10 attempts a minute with
// bursts of 5. The formula's own schedule never reaches that guard.
func DefaultTiming() Timing {
	p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	if err != nil {
		panic(err) // the defaults are valid; a test proves it
	}
	return Timing{
		Policy:          p,
		BootSpread:      10 * time.Second,
		StableAfter:     time.Minute,
		Credentials:     RetryCredentialsAtCap,
		CredentialsWait: reconnect.DefaultIoTCore.MaxBackoff,
		Guard:           &reconnect.FloodGuardConfig{Requests: 10, Window: time.Minute, Burst: 5},
	}
}

// Validate reports the first unusable field.
func (t Timing) Validate() error {
	switch {
	case t.Policy == nil:
		return fmt.Errorf("%w: Timing.Policy is nil", ErrInvalid)
	case t.BootSpread <= 0:
		return fmt.Errorf("%w: Timing.BootSpread must be > 0 (no attempt is ever immediate), got %v", ErrInvalid, t.BootSpread)
	case t.StableAfter <= 0:
		return fmt.Errorf("%w: Timing.StableAfter must be > 0, got %v", ErrInvalid, t.StableAfter)
	case t.CredentialsWait < 0:
		return fmt.Errorf("%w: Timing.CredentialsWait must be >= 0, got %v", ErrInvalid, t.CredentialsWait)
	case t.Credentials != RetryCredentialsAtCap && t.Credentials != CredentialsArePermanent:
		return fmt.Errorf("%w: unknown Timing.Credentials %d", ErrInvalid, t.Credentials)
	}
	if t.Guard != nil {
		return alsoInvalid("Timing.Guard", t.Guard.Validate())
	}
	return nil
}

// Step is what the driver of a Machine must do next. The zero Step (Kind 0)
// is never returned. A Step is a plain value, safe to share.
type Step struct {
	Kind StepKind
	// Attempt numbers the connect attempt (KindConnect), or the attempt the
	// wait precedes (KindWait), counting from 1 since the last stable
	// connection; at KindStop, the attempts made. Event.Attempt counts the
	// same way.
	Attempt int
	// Wait is how long to wait before calling Machine.Due (KindWait).
	Wait time.Duration
	// Err says why the session ended (KindStop).
	Err error
}

// StepKind enumerates Steps. The zero StepKind is none of them: the kinds
// start at KindWait. A StepKind is a plain value, safe to share.
type StepKind uint8

const (
	KindWait    StepKind = iota + 1 // wait Step.Wait, then call Due
	KindConnect                     // make one connect attempt, then call Result
	KindOnline                      // connected: wait for the loss, then call Lost
	KindStop                        // the session is over: Step.Err says why
)

// A Machine passes devicecore's step kinds and NoConnack on as they are,
// and the transport's NoConnack: the build fails if they part.
var (
	_ [0]struct{} = [KindWait - StepKind(devicecore.KindWait)]struct{}{}
	_ [0]struct{} = [KindConnect - StepKind(devicecore.KindConnect)]struct{}{}
	_ [0]struct{} = [KindOnline - StepKind(devicecore.KindOnline)]struct{}{}
	_ [0]struct{} = [KindStop - StepKind(devicecore.KindStop)]struct{}{}
	_ [0]struct{} = [NoConnack - devicecore.NoConnack]struct{}{}
	_ [0]struct{} = [NoConnack - transport.NoConnack]struct{}{}
)

// Result is the outcome of one connect attempt. The zero Result is a
// successful connect: CONNACK 0 and no error. A Result is a plain value, safe
// to share.
type Result struct {
	// Code is the CONNACK return code as read off the wire (0 accepted), or
	// NoConnack if none arrived (network error, timeout).
	Code int
	// Err is the transport or protocol error, if any.
	Err error
}

// NoConnack is Result.Code for an attempt that got no CONNACK at all.
const NoConnack = -1

// Machine is the reconnect state machine of one device: when to attempt,
// what each outcome means, when to reset and when to give up. It does no
// I/O and starts no goroutine. Its driver passes the time in and carries
// out each Step. The driver is the Agent with the real clock, or a
// simulator in virtual time. A Machine is not safe for concurrent use. The
// zero value is not usable: use NewMachine.
type Machine struct {
	// A simulator of millions of devices drives devicecore.Cores itself;
	// a Machine is a Core with its own timing, random source and clock.
	core devicecore.Core
	// what the core reads of the caller's Timing, with the policy SetPolicy
	// chose
	ct        devicecore.Timing
	src       rand.Source // the jitter's
	origin    time.Time   // the first time the machine was given: core's times count from it
	lastError error       // what the retry sequence last met: a gave-up Step says it
	why       waitReason  // what chose the last Step's wait, for the agent's log
}

// NewMachine validates timing and returns a machine drawing its jitter from
// src (nil: a crypto-seeded source of its own). timing is copied; the
// Policy and Guard it points to may be shared by a fleet and must not
// change afterwards.
func NewMachine(timing *Timing, src rand.Source) (*Machine, error) {
	if err := timing.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		src = jitter.NewSource()
	}
	return &Machine{ct: devicecore.Timing(*timing), src: src}, nil
}

// SetPolicy switches to p for the following waits, keeping the retry count.
func (m *Machine) SetPolicy(p *reconnect.Policy) { m.ct.Policy = p }

// Attempts returns the attempts made since the last stable connection.
func (m *Machine) Attempts() int { return m.core.Attempts() }

// Start begins the session at boot: the first attempt waits a random time
// inside the boot spread.
func (m *Machine) Start(now time.Time) Step {
	m.since(now)
	m.why = waitBootSpread
	return m.step(m.core.Start(&m.ct, m.src))
}

// Due is called when a wait has elapsed: it returns KindConnect, or another
// wait if the flood guard needs one.
func (m *Machine) Due(now time.Time) Step {
	m.why = waitFloodGuard // Due waits only for the guard
	return m.step(m.core.Due(&m.ct, m.src, m.since(now)))
}

// Result takes the outcome of the attempt Due asked for.
func (m *Machine) Result(now time.Time, r Result) Step {
	switch {
	case r.Code == 0 && r.Err == nil:
	case r.Code > 0:
		// 3 (server unavailable), and any code a 3.1.1 client does not know:
		// a refusal, never a session.
		m.lastError = connackRefusal(min(r.Code, 255))
	default:
		m.lastError = r.Err
	}
	before, at, res := m.core, m.since(now), devicecore.Result{Code: r.Code, Failed: r.Err != nil}
	m.why = m.reason(before, r.Code, func(c *devicecore.Core, t *devicecore.Timing, src rand.Source) devicecore.Step {
		return c.Result(t, src, at, res)
	})
	return m.step(m.core.Result(&m.ct, m.src, at, res))
}

// Lost is called when an online session ends. The retry count resets only if
// the connection had been stable; the first reconnect then waits wait_0.
func (m *Machine) Lost(now time.Time, cause error) Step {
	m.lastError = cause
	code := 0
	var de *DisconnectError
	if errors.As(cause, &de) {
		code = de.Code
	}
	before, at := m.core, m.since(now)
	m.why = m.reason(before, code, func(c *devicecore.Core, t *devicecore.Timing, src rand.Source) devicecore.Step {
		return c.Disconnected(t, src, at, code)
	})
	return m.step(m.core.Disconnected(&m.ct, m.src, at, code))
}

// step is the core's step as a Machine's: a stop says why, with the last
// error the retry sequence met.
func (m *Machine) step(s devicecore.Step) Step {
	out := Step{Kind: StepKind(s.Kind), Attempt: int(s.Attempt), Wait: s.Wait}
	switch {
	case s.Kind != devicecore.KindStop:
	case s.Refused != 0:
		out.Err = fmt.Errorf("%w: %w", ErrRefused, &ConnackError{Code: int(s.Refused)})
	case m.lastError == nil:
		out.Err = fmt.Errorf("%w after %d attempts", ErrGaveUp, s.Attempt)
	default:
		out.Err = fmt.Errorf("%w after %d attempts: %w", ErrGaveUp, s.Attempt, m.lastError)
	}
	return out
}

// since is now as the core counts time: since the first time m was given.
func (m *Machine) since(now time.Time) time.Duration {
	if m.origin.IsZero() {
		m.origin = now
	}
	return now.Sub(m.origin)
}

// connackRefusal is a refused CONNACK kept as the last error: a byte-sized
// value, so that a refusal allocates nothing (a simulator makes millions).
type connackRefusal uint8

func (c connackRefusal) Error() string {
	return fmt.Sprintf("CONNACK %d (%s)", int(c), transport.CodeText(int(c)))
}

// As lets errors.As find a *ConnackError in it.
func (c connackRefusal) As(target any) bool {
	if p, ok := target.(**ConnackError); ok {
		*p = &ConnackError{Code: int(c)}
		return true
	}
	return false
}

// alsoInvalid wraps err, another package's verdict on part of an input of
// this package's, in ErrInvalid as well; nil stays nil.
func alsoInvalid(part string, err error) error {
	if err == nil || errors.Is(err, ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalid, part, err)
}

// waitReason is what chose a wait: the agent logs it with the wait.
type waitReason uint8

const (
	waitPolicy       waitReason = iota // the policy's schedule
	waitBootSpread                     // the first connect, somewhere in the boot spread
	waitCredentials                    // a credentials refusal: no sooner than Timing.CredentialsWait
	waitBackPressure                   // the broker's back-pressure code stretched the policy's wait
	waitFloodGuard                     // the flood guard held an attempt the policy allowed
)

// reason says what chose the wait that follows a broker's code, given the
// core as it was before the code came. The core holds the one table of
// what each code means: reason asks it rather than keep a second table.
// On copies of the core, it takes the code again with credentials made
// permanent (a credentials code then stops), and with server signals
// ignored (a back-pressure code's wait then shrinks). Nothing of the
// machine changes, and its random source is not drawn from.
func (m *Machine) reason(before devicecore.Core, code int,
	next func(*devicecore.Core, *devicecore.Timing, rand.Source) devicecore.Step) waitReason {
	if code <= 0 {
		return waitPolicy
	}
	with := func(t devicecore.Timing) devicecore.Step {
		c := before
		return next(&c, &t, highestDraw{})
	}
	strict, deaf := m.ct, m.ct
	strict.Credentials, deaf.IgnoreServerSignals = CredentialsArePermanent, true
	if s := with(strict); s.Kind == devicecore.KindStop && s.Refused != 0 {
		return waitCredentials
	}
	if with(m.ct).Wait != with(deaf).Wait {
		return waitBackPressure
	}
	return waitPolicy
}

// highestDraw is a random source whose every draw is the highest, so that
// a stretched wait is as long as it gets, and never equal to one that is not.
type highestDraw struct{}

func (highestDraw) Uint64() uint64 { return math.MaxUint64 }
