package observer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/waitfor"
)

// DeviceLog records what the devices themselves saw: every attempt's start
// and outcome, and every session's end, as each device's member tells it
// (it is a member.Log). A refused dial counts as an attempt here, although
// no broker saw it. It watches the fleet from the devices' side: a device
// is connected from its CONNACK until it notices its session is gone. Its
// zero value is not usable: use NewDeviceLog. It is safe for concurrent
// use.
type DeviceLog struct {
	mu        sync.Mutex
	changed   waitfor.Broadcast
	up        int
	attempts  []tried
	losses    []loss
	connected []bool  // by device index: a device reports each change once
	node      []uint8 // by device index: the cluster's node its last session was on
	pending   []int32 // by device index: its attempt in flight, in attempts; -1: none
	// stream, if set, is told every record as it is made: a child's
	// agents, reported to the parent running the proxy they go through.
	stream *attempt.Writer
}

// tried is one attempt as its device made it: when it began, how late
// against its schedule (<0: unknown), and its outcome, heard at heard
// (zero while pending).
type tried struct {
	at, heard time.Time
	lag       time.Duration
	device    int32
	code      int32
	outcome   fault.Outcome
}

// loss is a session's end as its device noticed it.
type loss struct {
	at     time.Time
	device int
}

// NewDeviceLog returns the log of a fleet of devices (indexes 0 to
// devices-1).
func NewDeviceLog(devices int) *DeviceLog {
	l := &DeviceLog{connected: make([]bool, devices), node: make([]uint8, devices), pending: make([]int32, devices)}
	for i := range l.pending {
		l.pending[i] = -1
	}
	return l
}

// Begin records the start of device's attempt, lag after its schedule
// (negative: unknown). A device has one attempt in flight at a time: End
// settles it.
func (l *DeviceLog) Begin(at time.Time, device int, lag time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, tried{at: at, lag: lag, device: int32(device), outcome: fault.Pending})
	l.pending[device] = int32(len(l.attempts) - 1)
	if l.stream != nil {
		l.stream.Add(attempt.Record{T: time.Duration(at.UnixNano()), Lag: lag, Device: int32(device), Kind: attempt.Begun})
	}
}

// End records the outcome of device's attempt in flight (if Begin saw
// it), heard at at, made at a cluster's node (0 with one broker). A
// connected device is counted as up, on that node.
func (l *DeviceLog) End(at time.Time, device int, o fault.Outcome, code, node int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := attempt.Record{T: time.Duration(at.UnixNano()), Lag: -1, Device: int32(device), Code: int32(code), Outcome: o}
	if k := l.pending[device]; k >= 0 {
		a := &l.attempts[k]
		a.outcome, a.code, a.heard, l.pending[device] = o, int32(code), at, -1
		r.Lag = a.lag
	}
	if l.stream != nil {
		l.stream.Add(r)
	}
	if o == fault.Accepted && !l.connected[device] {
		l.connected[device], l.node[device] = true, uint8(node)
		l.up++
	}
	l.changed.Notify()
}

// Lost records the end of a device's session, when the device noticed.
func (l *DeviceLog) Lost(at time.Time, device int) {
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

// AwaitSettled waits until every attempt recorded has its outcome, ctx
// ends, or timeout passes. The broker admits the last device an instant
// before the device hears so. In virtual time that is the same instant.
// Without this wait the report would take the outcome as it found it,
// pending or not, by how the scheduler ran.
func (l *DeviceLog) AwaitSettled(ctx context.Context, timeout time.Duration) {
	next := 0
	_ = waitfor.UntilContext(ctx, &l.mu, &l.changed, timeout, func() bool {
		for ; next < len(l.attempts); next++ {
			if l.attempts[next].outcome == fault.Pending {
				return false
			}
		}
		return true
	})
}

// Noticed returns, for each disruption begun at starts[k] (in order of
// time), how long after it each device took to notice. Only devices that
// lost their session before the next disruption began count. A device's
// notice is its first loss in that time. A device a disruption left alone
// (one node's, on a cluster) is not in its list.
func (l *DeviceLog) Noticed(starts []time.Time) [][]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]time.Duration, len(starts))
	seen := make([]map[int]bool, len(starts))
	for _, x := range l.losses {
		k := len(starts) - 1
		for k >= 0 && x.at.Before(starts[k]) {
			k--
		}
		if k < 0 || seen[k][x.device] {
			continue
		}
		if seen[k] == nil {
			seen[k] = map[int]bool{}
		}
		seen[k][x.device] = true
		out[k] = append(out[k], x.at.Sub(starts[k]))
	}
	return out
}

// ConnectedDevices lists the devices connected now, by index: to a
// cluster's node, or to any (node < 0).
func (l *DeviceLog) ConnectedDevices(node int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for i, up := range l.connected {
		if up && (node < 0 || int(l.node[i]) == node) {
			out = append(out, i)
		}
	}
	return out
}

// AwaitNoticed waits until each of devices has noticed a loss at or after
// t, ctx ends, or timeout passes. A disruption through the fault proxy, or
// the death of a broker the devices then leave, is known to the devices a
// moment after it is made. Until they notice, they still say connected.
func (l *DeviceLog) AwaitNoticed(ctx context.Context, t time.Time, devices []int, timeout time.Duration) error {
	owed := make(map[int]bool, len(devices))
	for _, d := range devices {
		owed[d] = true
	}
	next := 0
	err := waitfor.UntilContext(ctx, &l.mu, &l.changed, timeout, func() bool {
		for ; next < len(l.losses); next++ { // only the losses since the last look
			if x := l.losses[next]; !x.at.Before(t) {
				delete(owed, x.device)
			}
		}
		return len(owed) == 0
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("observer: %d devices had not noticed the disruption within %v", len(owed), timeout)
	}
	return err
}

// AwaitLoss waits for a session loss at or after t and returns the
// earliest one (observe: the disruption is the user's, and this its first
// sign).
func (l *DeviceLog) AwaitLoss(ctx context.Context, t time.Time, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := waitfor.UntilContext(ctx, &l.mu, &l.changed, timeout, func() bool {
		for _, x := range l.losses {
			if !x.at.Before(t) {
				at = x.at
				return true
			}
		}
		return false
	})
	return at, err
}

// Losses counts the sessions ended since the log began or last forgot.
func (l *DeviceLog) Losses() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.losses)
}

// Forget forgets the attempts and losses recorded so far (the boot's, a
// storm's before the next), keeping which devices are connected; an
// attempt still in flight is settled unrecorded. In virtual time the last
// boot connect and the disruption fall on one instant: the order they were
// recorded in, not the clock, tells them apart.
func (l *DeviceLog) Forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts, l.losses = nil, nil
	for i := range l.pending {
		l.pending[i] = -1
	}
}

// Connected counts the devices connected now.
func (l *DeviceLog) Connected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// Attempted counts the attempts recorded since the log began or last
// forgot.
func (l *DeviceLog) Attempted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.attempts)
}

// Await waits until cond holds for the number of devices connected, the
// bound timeout passes, or ctx ends.
func (l *DeviceLog) Await(ctx context.Context, timeout time.Duration, cond func(int) bool) error {
	if err := waitfor.UntilContext(ctx, &l.mu, &l.changed, timeout, func() bool { return cond(l.up) }); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("observer: condition not met after %v; %d devices connected", timeout, l.Connected())
	}
	return nil
}

// AddTo adds to b the attempts started at or after t, as the fleet's
// side, in order of time and, at one instant, of device; and when each
// device heard it was admitted.
func (l *DeviceLog) AddTo(b *report.Builder, t time.Time) {
	for _, a := range l.since(t) {
		lag := time.Duration(-1)
		if a.lag >= 0 {
			lag = time.Duration(float64(a.lag) * b.TimeScale())
		}
		r := attempt.Record{T: b.Since(a.at), Lag: lag, Device: a.device, Code: a.code, Outcome: a.outcome}
		b.Add(r)
		if a.outcome == fault.Accepted && !a.heard.IsZero() {
			b.Heard(r.Device, b.Since(a.heard))
		}
	}
}

// since returns the attempts started at or after t, in AddTo's order.
func (l *DeviceLog) since(t time.Time) []tried {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tried
	for _, a := range l.attempts {
		if !a.at.Before(t) {
			out = append(out, a)
		}
	}
	order := func(x, y tried) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return cmp.Compare(x.device, y.device)
	}
	if !slices.IsSortedFunc(out, order) { // a wall-clock run's usually is: one pass, no sort
		slices.SortStableFunc(out, order)
	}
	return out
}
