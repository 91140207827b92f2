// Package virtual is the engine that drives every device's reconnect
// state machine (the same device.Machine the Agent runs) against a model
// of the broker in virtual time: no goroutine, socket or timer per device, so millions of
// devices fit in one process and a synchronised wave is measured as the
// devices make it, not as the host manages to serve it. The model: the
// broker refuses dials while down, answers instantly when up, and applies
// admission (refuse, pause or accept-then-disconnect) and flapping as the
// test broker does; a paused attempt waits for a token up to the connect
// timeout, unseen by the broker if it gives up. What it leaves out is the
// broker's own speed: it admits whatever the admission limit allows,
// however many arrive at once.
package virtual

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/devicecore"
	"github.com/herdguard/herdguard/internal/eventq"
	"github.com/herdguard/herdguard/internal/hugepage"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/prefetch"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/reconnect"
)

// The kinds of the engine's events.
const (
	vDue     uint8 = iota // the device's wait is over
	vResult               // a paused attempt's answer arrives (Code: the CONNACK code, or NoConnack)
	vLost                 // the broker drops the device's session
	vDisrupt              // a further disruption on the timeline (Code: its index in strikes; Dev: -1)
)

// fleet is the engine's state.
type fleet struct {
	p       plan.Plan
	giveUp  *GiveUp // a grid cell's bounds, or nil
	epoch   time.Time
	devs    []unit
	timings []devicecore.Timing // by group: a mixed fleet's groups each on their own policy
	ends    []int               // by group: the index after its last device
	v5      []bool              // by group: speaks MQTT 5, and so reads reason codes
	up      int
	q       eventq.Queue
	broker  *brokerModel    // nodes[0]: the broker, when there is one
	nodes   []brokerModel   // the cluster's nodes
	node    []uint8         // by device: the node its next attempt goes to
	order   *rand.Rand      // tie-breaks, seeded: runs repeat exactly
	b       *report.Builder // the report's
	sink    *pipe           // every attempt from t0, as it is made, on its way to b
	back    time.Duration   // since t0: when the broker returned
	// afterReturn counts the attempts made since back, for the grid's
	// early end (the builder counts them too, a batch behind)
	afterReturn int64
	now         time.Duration
	t0          time.Duration
	strikes     []plan.Strike // the timeline, a rolling restart node by node
	pending     int           // further disruptions still to come
	// limited is what every node together admits at most, once the
	// admission limit is in force
	limited admitting
	// session counts each device's sessions, where the broker flaps: a
	// flapping drop ends the session it was scheduled for, not a later one
	session []uint16
	// gap is the longest any device waits between attempts while it is
	// not admitted; 0 where that is not known (see longestGap)
	gap time.Duration
	// least is leastToCome's answer while upFor devices are up: it
	// depends on nothing else that changes, and admissions are rare
	// beside attempts
	least float64
	upFor int
	// refusals says whether the builder counts what the broker turned
	// away, or only what it admitted
	refusals bool
}

// GiveUp is a grid cell's bounds, as a virtual run can check them while
// it runs: a run past them fails whatever comes after, and ends there. A
// run ends as soon as its failure is certain: too few devices up to reach
// P99Count by P99By even were every node to admit at its limit's full rate
// and burst from now on, or too many attempts, made already or bound to
// be. Devices still down retry until admitted, each within the longest
// gap its timing allows between attempts, and the nodes admit no faster
// than their limits: the fewest attempts still to come follow. A GiveUp
// serves one run at a time, which sets Certain.
type GiveUp struct {
	MaxAfterReturn int64         // attempts, all devices together, once the broker is back
	P99By          time.Duration // since the disruption
	P99Count       int           // devices back by then
	// Certain is set by a run that ended on its attempts: those made
	// since the return and the fewest still to come, together; 0 by any
	// other run.
	Certain int64
}

// Options are what a study of many runs asks of each. The zero Options
// run to the end, the report built beside the model.
type Options struct {
	// GiveUp, if set, is a grid cell's bounds: the run ends as soon as it
	// fails them.
	GiveUp *GiveUp
	// Inline builds the report on the model's own goroutine. Otherwise
	// the builder runs on a second one, on a second core if there is one,
	// and the queue sorts its crowded buckets on a third beside it; a
	// study that runs as many engines at once as there are cores gains
	// nothing from that but the hand-over between them.
	Inline bool
	// FleetVerdictOnly judges only the fleet's arrivals, whose verdict is
	// the run's: the report has no Broker side.
	FleetVerdictOnly bool
}

// Run runs plan c (which the caller has validated) in virtual time. A run
// that ends with devices still offline returns its report and an error
// wrapping report.ErrNotRecovered.
func Run(ctx context.Context, p plan.Plan, o Options) (*report.Report, error) {
	start := time.Now()
	p.TimeScale = 1 // virtual time costs nothing to run at full length
	p = p.WithDefaults()
	groups := p.GroupsOrWhole()
	timings, ends, err := groupTimings(groups)
	if err != nil {
		return nil, err
	}
	v5 := make([]bool, len(groups))
	for k, g := range groups {
		v5[k] = *g.MQTT5
	}
	if o.GiveUp != nil {
		o.GiveUp.Certain = 0
	}
	before := report.HeapInUse()
	v := newFleet(p, o.GiveUp, start, timings, ends)
	v.v5 = v5
	v.q.SortAhead = !o.Inline && runtime.GOMAXPROCS(0) > 1 // a core beside the builder's: a wave's buckets are sorted there
	returned := v.setup()
	v.b = report.NewBuilder(p.Devices, v.at(v.t0), v.at(returned), 1, "devices", "broker", p.Events)
	v.b.FleetVerdictOnly = o.FleetVerdictOnly
	v.b.SplitGroups(groups)
	v.b.SplitNodes(len(v.nodes))
	v.refusals = v.b.CountsRefusals()
	v.back = v.b.Back()
	bound := p.RecoveryBound(p.Devices)
	last := v.splitDisruptions() // the last disruption, after the first
	pipe := newPipe(v.b, o.Inline)
	v.sink = pipe
	finished, err := v.run(ctx, v.t0+last+bound)
	pipe.close() // the builder has every record
	if err != nil {
		return nil, err
	}
	until := max(v.now, v.t0)
	if finished {
		until += p.MaxBackoff // everyone back: nobody left to retry
	}
	v.b.WatchedUntil(v.at(until))
	memPerDevice := float64(report.HeapInUse()-before) / float64(p.Devices) / 1024 // machines, queue and the report's state
	v.devs, v.q = nil, eventq.Queue{}                                              // the report needs neither: judging it may reuse their memory
	runtime.GC()
	rep := report.New(p, plan.Virtual, "model", p.Devices, v.at(v.t0))
	if err := v.b.Fill(rep); err != nil {
		return nil, err
	}
	rep.Limit, rep.BrokerBackS = report.LimitOf(p.AdmitRate, p.Devices), v.b.Back().Seconds()
	rep.Host.WallS, rep.Host.MemoryPerDeviceKB = time.Since(start).Seconds(), memPerDevice
	rep.Recovery.AllRecovered = finished && rep.Stranded() == 0 // every device up, and every device the run disrupted back
	if !rep.Recovery.AllRecovered {
		return rep, fmt.Errorf("%w: %d of %d within %v (virtual)", report.ErrNotRecovered, rep.Recovered(), p.Devices, bound)
	}
	return rep, nil
}

// groupTimings is each group's timing (its policy, retry cap and boot
// window), and the index after each group's last device.
func groupTimings(groups []plan.Group) ([]devicecore.Timing, []int, error) {
	timings, ends := make([]devicecore.Timing, len(groups)), make([]int, len(groups))
	for k, g := range groups {
		ends[k] = g.Devices
		if k > 0 {
			ends[k] += ends[k-1]
		}
		shape, _ := plan.Shape(g.Policy, g.MaxBackoff)
		policy, err := reconnect.New(shape, reconnect.Limits{MaxRetries: *g.RetryCap})
		if err != nil {
			return nil, nil, err
		}
		t := device.DefaultTiming()
		t.Policy, t.BootSpread, t.IgnoreServerSignals = policy, g.BootWindow(), *g.IgnoreSignals
		if err := t.Validate(); err != nil {
			return nil, nil, err
		}
		timings[k] = coreTiming(t)
	}
	return timings, ends, nil
}

// coreTiming is what a devicecore.Core reads of t, as device.Machine takes
// it (TestCoreTimingHasEveryFieldOfTiming holds the two together).
func coreTiming(t device.Timing) devicecore.Timing {
	return devicecore.Timing{Policy: t.Policy, BootSpread: t.BootSpread, StableAfter: t.StableAfter,
		CredentialsArePermanent: t.Credentials == device.CredentialsArePermanent, CredentialsWait: t.CredentialsWait,
		Guard: t.Guard, IgnoreServerSignals: t.IgnoreServerSignals}
}

// newFleet lays out c's fleet, each device seeded with its own source,
// and its broker's nodes.
func newFleet(p plan.Plan, giveUp *GiveUp, start time.Time, timings []devicecore.Timing, ends []int) *fleet {
	v := &fleet{p: p, giveUp: giveUp, epoch: start.Truncate(time.Millisecond), devs: hugepage.Make[unit](p.Devices), timings: timings, ends: ends,
		order: rand.New(rand.NewPCG(p.Seed, 1<<63)), strikes: p.Strikes(), gap: longestGap(timings, p.AdmitMode), upFor: -1}
	if len(v.strikes) > 1 && p.Storm.Has(plan.Flapping) { // a flapping drop may outlive its session: count them
		v.session = make([]uint16, p.Devices)
	}
	v.nodes = make([]brokerModel, max(p.Nodes, 1))
	v.broker = &v.nodes[0]
	if p.Nodes > 1 {
		v.node = make([]uint8, p.Devices)
		for i := range v.node {
			v.node[i] = uint8(i % p.Nodes) // its home node
		}
	}
	inParallel(len(v.devs), func(i int) { v.devs[i].rng.Seed(p.Seed, uint64(i)) })
	return v
}

// inParallel calls f for every device index below n, the indexes split
// between the cores: for work that touches each device's state alone,
// such as seeding and booting a fleet, whose first touch of a hundred
// million devices' memory is most of a second's work per gigabyte.
func inParallel(n int, f func(i int)) {
	parts := min(runtime.GOMAXPROCS(0), max(n/10_000, 1))
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() {
			for i := k * n / parts; i < (k+1)*n/parts; i++ {
				f(i)
			}
		})
	}
	wg.Wait()
}

// splitDisruptions has the report judge each disruption's recovery on its
// own, a timeline's and a rolling restart's node by node, and returns when
// the last one comes, after the first.
func (v *fleet) splitDisruptions() (last time.Duration) {
	at := make([]time.Duration, len(v.strikes))
	for k, s := range v.strikes {
		at[k] = s.At
	}
	v.b.SplitDisruptions(at)
	return at[len(at)-1]
}

func (v *fleet) at(d time.Duration) time.Time { return v.epoch.Add(d) }

// admitting is the nodes' admission limits together: from from on, at
// most rate connects a second and a burst of burst. A zero rate: none.
type admitting struct {
	from        time.Duration
	rate, burst float64
}

// unit is one device of the model: its reconnect state (the Agent's
// Machine without the clock, timing and source a fleet shares) beside its
// jitter's source, 64 bytes: an event touches one cache line of the fleet.
type unit struct {
	core devicecore.Core
	rng  rand.PCG
}

// timing is device i's group's.
func (v *fleet) timing(i int) *devicecore.Timing { return &v.timings[v.group(i)] }

// group is device i's group.
func (v *fleet) group(i int) int {
	k := 0
	for i >= v.ends[k] {
		k++
	}
	return k
}

// The device's state machine, driven in virtual time: now is since the
// epoch, as the Machine the Agent runs counts from its first instant.
func (v *fleet) start(i int) devicecore.Step {
	d := &v.devs[i]
	return d.core.Start(v.timing(i), &d.rng)
}

func (v *fleet) due(i int, now time.Duration) devicecore.Step {
	d := &v.devs[i]
	return d.core.Due(v.timing(i), &d.rng, now)
}

func (v *fleet) result(i int, now time.Duration, r devicecore.Result) devicecore.Step {
	d := &v.devs[i]
	return d.core.Result(v.timing(i), &d.rng, now, r)
}

// setup boots the fleet (online at once, outside boot-storm), arranges the
// timeline's outages and flapping windows at the nodes they strike, makes
// its first disruption at t0 and schedules the rest, and returns when the
// broker (every node) is first back.
func (v *fleet) setup() (returned time.Duration) {
	p := v.p
	v.t0 = time.Second
	if p.Scenario == plan.BootStorm {
		v.t0 = 0
		for i := range v.devs {
			v.schedule(i, 0, v.start(i))
		}
		if p.AdmitRate > 0 {
			v.limitNodes(0)
		}
		return 0
	}
	inParallel(len(v.devs), func(i int) { // booted before the disruption: setup, not measurement
		v.start(i)
		v.due(i, 0)
		v.result(i, 0, devicecore.Result{})
	})
	v.up = len(v.devs)
	for _, s := range v.strikes {
		v.arrange(s)
	}
	returned = v.t0 + p.FirstReturn()
	if p.AdmitRate > 0 {
		from := v.t0
		if p.Scenario == plan.ThrottledRestart {
			from = returned
		}
		v.limitNodes(from)
	}
	for k, s := range v.strikes[1:] { // first at its instant (key 0, device -1): it ends the sessions of that instant
		v.q.Push(eventq.Event{At: v.t0 + s.At, Dev: -1, What: eventq.What{Kind: vDisrupt, Code: int16(k + 1)}})
		v.pending++
	}
	v.endSessions(v.strikes[0], v.t0)
	return returned
}

// arrange sets a disruption's outage or flapping window at the nodes it
// strikes, ahead of its time: a paused socket in a node's backlog fails
// when the node goes down.
func (v *fleet) arrange(s plan.Strike) {
	from := v.t0 + s.At
	for k := range v.nodes {
		if s.Node != plan.AllNodes && s.Node != k {
			continue
		}
		n := &v.nodes[k]
		switch s.Event.Scenario {
		case plan.BrokerRestart, plan.ThrottledRestart, plan.RollingDrain: // a drained node restarts
			n.down = append(n.down, window{from: from, until: from + s.Event.Outage})
		case plan.BusyNode:
			n.busy = append(n.busy, window{from: from, until: from + s.Event.Outage})
		case plan.Flapping: // its sessions last > 0 (the plan checks): the broker's answer reads 0 as no flap
			n.flap = append(n.flap, window{from: from, until: from + s.Event.Outage, after: cmp.Or(s.Event.Flap, v.p.Flap)})
		}
	}
}

// endSessions ends the sessions a disruption ends at now: every device's,
// or those on the node it strikes; a drain and a busy node end theirs
// with a DISCONNECT that MQTT 5 devices read.
func (v *fleet) endSessions(s plan.Strike, now time.Duration) {
	code := 0
	switch s.Event.Scenario {
	case plan.RollingDrain:
		code = device.CodeUseAnotherServer
	case plan.BusyNode:
		code = int(v.p.Busy())
	}
	if s.Node != plan.AllNodes {
		for i := range v.devs {
			if v.devs[i].core.Online() && v.nodeOf(i) == s.Node {
				v.loseWith(i, now, code)
			}
		}
		return
	}
	for i := range v.devs {
		v.loseWith(i, now, code)
	}
}

func (v *fleet) push(at time.Duration, dev int, kind uint8, code int) {
	v.q.Push(eventq.Event{At: at, Key: v.order.Uint32(), Dev: int32(dev), What: eventq.What{Kind: kind, Code: int16(code)}})
}

func (v *fleet) lose(i int, now time.Duration) { v.loseWith(i, now, 0) }

// loseWith ends device i's session at now; code, if not 0, is the reason
// code of the DISCONNECT that ends it, which an MQTT 5 device reads: a
// back-pressure code stretches its wait, and 0x9C sends its next attempt
// to the next node as the drain's Server Reference names it (where the
// failover would send it too), unless it ignores server signals.
func (v *fleet) loseWith(i int, now time.Duration, code int) {
	if !v.devs[i].core.Online() {
		return
	}
	v.up--
	v.failOver(i)
	d, t := &v.devs[i], v.timing(i)
	if code == 0 || !v.v5[v.group(i)] {
		v.schedule(i, now, d.core.Lost(t, &d.rng, now))
		return
	}
	v.schedule(i, now, d.core.Disconnected(t, &d.rng, now, code))
}

// schedule carries out a Step at now.
func (v *fleet) schedule(i int, now time.Duration, s devicecore.Step) {
	switch s.Kind {
	case devicecore.KindWait:
		v.push(now+s.Wait, i, vDue, 0)
	case devicecore.KindConnect:
		v.connect(i, now)
	case devicecore.KindOnline:
		v.up++
	}
}

// record notes an attempt device i made at now as the device made it and,
// if it reached the broker, as the broker saw it (seen: when it took it).
func (v *fleet) record(i, node int, now time.Duration, o fault.Outcome, code int, seen time.Duration) {
	if now < v.t0 {
		return // the boot before the disruption is setup, not measurement
	}
	r := attempt.Record{T: now - v.t0, Lag: -1, Device: int32(i), Code: int32(code), Outcome: o} // virtual time is exact: no lag
	v.sink.Add(r)
	if r.T >= v.back {
		v.afterReturn++
	}
	if seen >= 0 && (v.refusals || o == fault.Accepted) {
		r.T, r.Code, r.Seen, r.Node = seen-v.t0, 0, attempt.Broker, uint8(node)
		v.sink.Add(r)
	}
}

// connect is one attempt of device i reaching the modelled broker at now.
func (v *fleet) connect(i int, now time.Duration) {
	node := v.nodeOf(i)
	a := v.nodes[node].connect(now)
	code := a.code()
	if a.outcome == fault.Refused && v.v5[v.group(i)] { // an MQTT 5 device reads why
		code = int(v.p.Admission().RefusalCode())
		if v.nodes[node].busyAt(now) {
			code = int(v.p.Busy())
		}
	}
	v.record(i, node, now, a.outcome, max(code, 0), a.seen)
	if a.outcome == fault.Dropped || a.outcome == fault.Refused {
		v.failOver(i) // the next attempt goes to the next node (a throttled session's loss fails it over below)
	}
	switch {
	case a.after > 0: // a paused socket: the answer comes later
		v.push(now+a.after, i, vResult, a.code())
	case a.outcome == fault.Dropped:
		v.schedule(i, now, v.result(i, now, devicecore.Result{Code: devicecore.NoConnack, Failed: true}))
	case a.outcome == fault.Refused:
		v.schedule(i, now, v.result(i, now, devicecore.Result{Code: code}))
	case a.outcome == fault.Throttled:
		v.schedule(i, now, v.result(i, now, devicecore.Result{}))
		v.lose(i, now)
	default:
		if a.lostAfter > 0 {
			v.push(now+a.lostAfter, i, vLost, v.newSession(i))
		}
		v.schedule(i, now, v.result(i, now, devicecore.Result{}))
	}
}

// failed reports whether a grid cell has failed for certain by virtual
// time at: too many attempts since the return, or fewer than 99 % of the
// devices back by the time the 99th percentile is due, or bound to be.
func (v *fleet) failed(at time.Duration) bool {
	g := v.giveUp
	if g == nil {
		return false
	}
	if v.afterReturn > g.MaxAfterReturn {
		return true
	}
	if least := v.leastToCome(at); least > 0 && float64(v.afterReturn)+least > float64(g.MaxAfterReturn)+1 { // 1: a margin for the float sums
		g.Certain = v.afterReturn + int64(least)
		return true
	}
	if at-v.t0 > g.P99By {
		return v.up < g.P99Count
	}
	return v.mostUp(at, v.t0+g.P99By) < float64(g.P99Count)
}

// mostUp is the most devices that can be up at until, seen from at: those
// up now and every token the nodes' buckets can hand out meanwhile (a
// bucket never holds more than its burst, so in any span it admits at most
// its burst and its rate times the span). With no limit in force at every
// node from at on, any number.
func (v *fleet) mostUp(at, until time.Duration) float64 {
	l := v.limited
	if l.rate == 0 || at < l.from {
		return math.Inf(1)
	}
	return float64(v.up) + l.burst + (until-at).Seconds()*l.rate + 1 // 1: a margin for the float sums
}

// leastToCome is the fewest attempts the devices down at at are certain
// to make from then on, counted once the broker is back, where the
// admission limit is in force at every node and the gap between attempts
// is known; 0 otherwise. In each span of the gap from at, every device
// still down at its end made an attempt in it, and the nodes can have
// admitted no more than their burst and their rate over the spans so far.
func (v *fleet) leastToCome(at time.Duration) float64 {
	l := v.limited
	if v.gap == 0 || l.rate == 0 || at < l.from || at-v.t0 < v.back || v.giveUp.MaxAfterReturn == math.MaxInt64 {
		return 0
	}
	if v.upFor == v.up {
		return v.least
	}
	v.upFor, v.least = v.up, 0
	down := float64(len(v.devs)-v.up) - l.burst
	per := l.rate * v.gap.Seconds()  // admitted at most a span
	spans := math.Ceil(down/per) - 1 // spans with some device still down at their end
	if spans > 0 {
		v.least = spans*down - per*spans*(spans+1)/2
	}
	return v.least
}

// longestGap is the longest a device of timings waits between attempts
// while it is not admitted: its policy's longest wait (or the wait after a
// credentials refusal, if longer) and, where the broker pauses, the
// connect timeout of an attempt held in its backlog, or two of the flood
// guard's slots if longer; or, before its first, its boot spread. 0 where
// a device may stop retrying (a retry cap, a limit on the time spent) or
// its policy's shape is not one of reconnect's.
func longestGap(timings []devicecore.Timing, mode fault.AdmissionMode) time.Duration {
	gap := time.Duration(0)
	for _, t := range timings {
		if l := t.Policy.Limits(); l.MaxRetries != reconnect.RetryForever || l.MaxElapsed > 0 {
			return 0
		}
		wait := longestWait(t.Policy.Shape())
		if wait == 0 {
			return 0
		}
		wait = max(wait, t.CredentialsWait+time.Second) // Core.result: CredentialsWait and up to 1 s
		if mode == fault.PauseOverLimit {
			wait += plan.ConnectTimeout
		}
		if g := t.Guard; g != nil {
			// An attempt leaves the guard's bucket at least empty, and it
			// refills over the attempt and the wait after it: a wait of a
			// slot or more finds a token, a shorter one is held for the
			// rest of the slot and up to a slot's jitter (Core.Due).
			wait = max(wait, 2*g.Window/time.Duration(g.Requests))
		}
		gap = max(gap, wait, t.BootSpread)
	}
	return gap + time.Second // a margin for rounding
}

// longestWait is the longest wait a shape draws, whatever its count,
// previous wait and draw; 0 for a shape not of reconnect's.
func longestWait(s reconnect.Shape) time.Duration {
	switch s := s.(type) {
	case reconnect.IoTCore:
		if s.JitterAtCap {
			return s.MaxBackoff + s.Jitter
		}
		return s.MaxBackoff
	case reconnect.Exponential:
		return s.Max
	case reconnect.FullJitter:
		return s.Max
	case reconnect.EqualJitter:
		return s.Max
	case reconnect.Decorrelated:
		return s.Max
	case reconnect.FleetSafe:
		return s.Max
	case reconnect.Linear:
		return s.Max
	case reconnect.Constant:
		return s.Interval
	}
	return 0
}

// newSession counts a new session of device i's and returns its number,
// to match a flapping drop to it; 0 where no later disruption can end a
// session first (one flapping window and nothing after it).
func (v *fleet) newSession(i int) int {
	if v.session == nil {
		return 0
	}
	v.session[i]++
	return int(int16(v.session[i]))
}

// limitNodes applies the admission limit on every node from from.
func (v *fleet) limitNodes(from time.Duration) {
	a := v.p.Admission()
	for k := range v.nodes {
		v.nodes[k].limit(a, from)
	}
	n := float64(len(v.nodes))
	v.limited = admitting{from: from, rate: a.Rate * n, burst: float64(max(a.Burst, 1)) * n}
}

// nodeOf is the node device i's next attempt goes to.
func (v *fleet) nodeOf(i int) int {
	if v.node == nil {
		return 0
	}
	return int(v.node[i])
}

// failOver sends device i's next attempt to the next node of its list,
// as the agent does after a failed attempt or a lost session.
func (v *fleet) failOver(i int) {
	if v.node != nil {
		v.node[i] = uint8((int(v.node[i]) + 1) % len(v.nodes))
	}
}

// flapsEnd is when the last flapping window at any node ends, plus its
// sessions' length: no flapping drop is due after it.
func (v *fleet) flapsEnd() time.Duration {
	end := time.Duration(0)
	for k := range v.nodes {
		end = max(end, v.nodes[k].flapsEnd())
	}
	return end
}

// readAhead is how many events' device state the engine asks for at a
// time, ahead of handling them: 16 at once, 16 to 31 events ahead. As
// loads, which hold up what follows them until memory answers, they took
// the million-device throttled restart from 3.99 s to 3.57 s (medians of
// 4, interleaved; 2, 8 and 32 at once: 3.99, 3.68 and 3.63 s); as
// prefetches, which do not, 8 and 32 were no faster than 16.
const readAhead = 16

// readAhead asks for the state of the devices whose events come after the
// next few: a million devices' state is not in cache, and it arrives while
// the events before them are handled.
func (v *fleet) readAhead() {
	for _, f := range v.q.Coming(readAhead, 2*readAhead) {
		if f.Dev >= 0 {
			prefetch.Line(unsafe.Pointer(&v.devs[f.Dev]))
		}
	}
}

// run processes events until every device is back (and no flapping drop is
// still due), the queue empties, or the bound passes.
func (v *fleet) run(ctx context.Context, bound time.Duration) (bool, error) {
	for n := 0; ; n++ {
		if n%65536 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		if v.up == len(v.devs) && v.pending == 0 && (v.q.Len() == 0 || v.q.Peek().At >= max(v.flapsEnd(), v.p.Flap)) {
			return true, nil
		}
		if v.q.Len() == 0 {
			return false, nil
		}
		if next := v.q.Peek().At; next > bound || v.failed(next) {
			v.now = max(v.now, min(next, bound)) // nothing happened before the next event
			return false, nil
		}
		e := v.q.Pop()
		v.now = e.At
		if n%readAhead == 0 {
			v.readAhead()
		}
		switch e.What.Kind {
		case vDisrupt: // its outage or flapping is arranged: its sessions end now
			v.pending--
			v.endSessions(v.strikes[e.What.Code], e.At)
			continue
		}
		i := int(e.Dev)
		switch e.What.Kind {
		case vDue:
			v.schedule(i, e.At, v.due(i, e.At))
		case vResult:
			r := devicecore.Result{Code: int(e.What.Code), Failed: e.What.Code == devicecore.NoConnack} // a connect timeout
			v.schedule(i, e.At, v.result(i, e.At, r))
		case vLost:
			if v.session == nil || int16(v.session[i]) == e.What.Code {
				v.lose(i, e.At)
			}
		}
	}
}
