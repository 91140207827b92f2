package agents

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/waitfor"
	"github.com/herdguard/herdguard/testbroker"
)

// sighting is one connection attempt where it was seen (a device log, the
// broker's recorder, the proxy's, the config server's), stamped with
// wall-clock time and client ID: the builder turns it into an
// attempt.Record.
type sighting struct {
	at       time.Time
	clientID string
	outcome  fault.Outcome
	code     int // CONNACK return code, or HTTP status for config requests
	// lag is how late the device started it against its own schedule (the
	// end of its wait): what the host adds. Negative: not known.
	lag time.Duration
}

// observer is where a run watches its fleet from: the in-process broker's
// recorder (the broker's side, what the issue asks for), or the devices'
// own events when the broker is external and records nothing for us.
type observer interface {
	connected() int
	attempted() int // attempts so far
	// await waits until cond holds for the number of devices connected,
	// the bound passes, or ctx ends.
	await(ctx context.Context, timeout time.Duration, cond func(connected int) bool) error
	// since returns the attempts at or after t, in the order they started.
	since(t time.Time) []sighting
	// awaitLoss waits for a session loss at or after t and returns the
	// earliest one.
	awaitLoss(ctx context.Context, t time.Time, timeout time.Duration) (time.Time, error)
}

// brokerObserver reads the in-process broker's recorder.
type brokerObserver struct{ r *testbroker.Recorder }

func (o brokerObserver) connected() int { return o.r.Counts().Connected }
func (o brokerObserver) attempted() int { return o.r.Counts().Attempts }

func (o brokerObserver) await(ctx context.Context, timeout time.Duration, cond func(int) bool) error {
	return o.r.Await(ctx, timeout, func(k testbroker.Counts) bool { return cond(k.Connected) })
}

func (o brokerObserver) since(t time.Time) []sighting {
	var out []sighting
	for _, a := range o.r.Attempts() {
		at := a.Connect
		if at.IsZero() {
			at = a.Accept
		}
		if !at.Before(t) {
			out = append(out, sighting{at: at, clientID: a.ClientID, outcome: a.Outcome, code: int(a.Code)})
		}
	}
	return inOrder(out)
}

// awaitLoss is for observe runs, which validate() allows only against an
// external broker.
func (o brokerObserver) awaitLoss(context.Context, time.Time, time.Duration) (time.Time, error) {
	return time.Time{}, fmt.Errorf("fleetsim: observe watches an external broker")
}

// deviceLog records what the devices themselves saw: every attempt's start
// and outcome, and every session's end. A refused dial counts as an attempt
// here, although no broker saw it.
type deviceLog struct {
	mu        sync.Mutex
	changed   waitfor.Broadcast
	up        int
	attempts  []sighting
	losses    []loss
	connected []bool  // by device index: a device reports each change once
	pending   []int32 // by device index: its attempt in flight, in attempts; -1: none
	// from is where the disruption's attempts begin: in virtual time the
	// last boot connect and the disruption fall on one instant, and the
	// order they were recorded in, not the clock, tells them apart.
	from int
	// stream, if set, is told every record as it is made: a child's
	// agents, reported to the parent running the proxy they go through.
	stream *attempt.Writer
}

func newDeviceLog(devices int) *deviceLog {
	l := &deviceLog{connected: make([]bool, devices), pending: make([]int32, devices)}
	for i := range l.pending {
		l.pending[i] = -1
	}
	return l
}

// begin records the start of device's attempt, lag after its schedule
// (negative: unknown). A device has one attempt in flight at a time: end
// settles it.
func (l *deviceLog) begin(at time.Time, device int, lag time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, sighting{at: at, clientID: attempt.ClientID(device), outcome: fault.Pending, lag: lag})
	l.pending[device] = int32(len(l.attempts) - 1)
	if l.stream != nil {
		l.stream.Add(attempt.Record{T: time.Duration(at.UnixNano()), Lag: lag, Device: int32(device), Kind: attempt.Begun})
	}
}

// end records the outcome of device's attempt in flight (if begin saw it);
// a connected device is counted as up.
func (l *deviceLog) end(device int, o fault.Outcome, code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := attempt.Record{Lag: -1, Device: int32(device), Code: int32(code), Outcome: o}
	if k := l.pending[device]; k >= 0 {
		a := &l.attempts[k]
		a.outcome, a.code, l.pending[device] = o, code, -1
		r.T, r.Lag = time.Duration(a.at.UnixNano()), a.lag
	}
	if l.stream != nil {
		l.stream.Add(r)
	}
	if o == fault.Accepted && !l.connected[device] {
		l.connected[device] = true
		l.up++
	}
	l.changed.Notify()
}

// awaitSettled waits until every attempt since the disruption has its
// outcome, ctx ends, or timeout passes. The broker admits the last device
// an instant before the device hears so; in virtual time that is the same
// instant, and without this wait the report would take the outcome as it
// found it, pending or not, by how the scheduler ran.
func (l *deviceLog) awaitSettled(ctx context.Context, timeout time.Duration) {
	next := l.from
	_ = waitfor.UntilContext(ctx, &l.mu, &l.changed, timeout, func() bool {
		for ; next < len(l.attempts); next++ {
			if l.attempts[next].outcome == fault.Pending {
				return false
			}
		}
		return true
	})
}

// lost records the end of a device's session.
func (l *deviceLog) lost(at time.Time, device int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.losses = append(l.losses, loss{at: at, device: device})
	if l.stream != nil {
		l.stream.Add(attempt.Record{T: time.Duration(at.UnixNano()), Lag: -1, Device: int32(device), Kind: attempt.Lost})
	}
	if l.connected[device] {
		l.connected[device] = false
		l.up--
	}
	l.changed.Notify()
}

// loss is a session's end as its device noticed it.
type loss struct {
	at     time.Time
	device int
}

// noticed returns how long after t each device that lost its session at or
// after t took to notice (its first loss since t).
func (l *deviceLog) noticed(t time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int]bool{}
	var out []time.Duration
	for _, x := range l.losses {
		if !x.at.Before(t) && !seen[x.device] {
			seen[x.device] = true
			out = append(out, x.at.Sub(t))
		}
	}
	return out
}

// awaitNoticed waits until n devices have each noticed a loss at or after
// t, ctx ends, or timeout passes.
func (l *deviceLog) awaitNoticed(ctx context.Context, t time.Time, n int, timeout time.Duration) error {
	seen, count, next := make([]bool, len(l.connected)), 0, 0
	err := waitfor.UntilContext(ctx, &l.mu, &l.changed, timeout, func() bool {
		for ; next < len(l.losses); next++ { // only the losses since the last look
			if x := l.losses[next]; !x.at.Before(t) && !seen[x.device] {
				seen[x.device] = true
				count++
			}
		}
		return count >= n
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("fleetsim: not every device noticed the disruption within %v", timeout)
	}
	return err
}

// markDisruption records that every attempt begun from now on is the
// disruption's (see since).
func (l *deviceLog) markDisruption() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from = len(l.attempts)
}

// lossCount is how many sessions ended since the log began or was reset.
func (l *deviceLog) lossCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.losses)
}

// reset forgets the attempts and losses recorded so far, keeping which
// devices are connected: a soak measures each storm on its own.
func (l *deviceLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts, l.losses, l.from = nil, nil, 0
	for i := range l.pending {
		l.pending[i] = -1
	}
}

func (l *deviceLog) connectedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

type deviceObserver struct{ l *deviceLog }

func (o deviceObserver) connected() int { return o.l.connectedCount() }

func (o deviceObserver) attempted() int {
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	return len(o.l.attempts)
}

func (o deviceObserver) await(ctx context.Context, timeout time.Duration, cond func(int) bool) error {
	if err := waitfor.UntilContext(ctx, &o.l.mu, &o.l.changed, timeout, func() bool { return cond(o.l.up) }); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("fleetsim: condition not met after %v; %d devices connected", timeout, o.l.connectedCount())
	}
	return nil
}

func (o deviceObserver) since(t time.Time) []sighting { return o.l.since(t) }

// since returns the attempts started at or after t and since the
// disruption was marked, in their order (see inOrder).
func (l *deviceLog) since(t time.Time) []sighting {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sighting
	for _, a := range l.attempts[l.from:] {
		if !a.at.Before(t) {
			out = append(out, a)
		}
	}
	return inOrder(out)
}

// inOrder sorts attempts by time and, at one instant, by device index
// (client IDs not of the fleet's form last, by name); one device's attempts
// keep the order they were recorded in. In virtual time many attempts share
// an instant, and this rule, not the scheduler, orders them, so that a seed
// gives the same events.csv on every run.
func inOrder(as []sighting) []sighting {
	if !slices.IsSortedFunc(as, attemptOrder) { // a wall-clock run's usually is: one pass, no sort
		slices.SortStableFunc(as, attemptOrder)
	}
	return as
}

// attemptOrder is inOrder's rule.
func attemptOrder(a, b sighting) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	da, oka := attempt.DeviceIndex(a.clientID)
	db, okb := attempt.DeviceIndex(b.clientID)
	switch {
	case oka && okb:
		return cmp.Compare(da, db)
	case oka != okb:
		if oka {
			return -1
		}
		return 1
	}
	return strings.Compare(a.clientID, b.clientID)
}

func (o deviceObserver) awaitLoss(ctx context.Context, t time.Time, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := waitfor.UntilContext(ctx, &o.l.mu, &o.l.changed, timeout, func() bool {
		for _, l := range o.l.losses {
			if !l.at.Before(t) {
				at = l.at
				return true
			}
		}
		return false
	})
	return at, err
}

// fleetRecord is a sighting in a device's log as the report's record: its
// time since the disruption and its lag, unscaled.
func fleetRecord(b *report.Builder, a sighting) attempt.Record {
	lag := time.Duration(-1)
	if a.lag >= 0 {
		lag = time.Duration(float64(a.lag) * b.TimeScale())
	}
	dev, _ := attempt.DeviceIndex(a.clientID)
	return attempt.Record{T: b.Since(a.at), Lag: lag, Device: int32(dev), Code: int32(a.code), Outcome: a.outcome}
}

// brokerRecord is a sighting in the broker's (or the proxy's) recorder as
// the report's record.
func brokerRecord(b *report.Builder, a sighting) attempt.Record {
	dev, _ := attempt.DeviceIndex(a.clientID)
	return attempt.Record{T: b.Since(a.at), Lag: -1, Device: int32(dev), Outcome: a.outcome, Side: attempt.Broker}
}
