// Package virtual is the engine that drives every device's reconnect state
// machine against a model of the broker in virtual time. The state machine
// is device.Machine, the same one the Agent runs. The engine keeps no
// goroutine, socket or timer per device. Millions of devices therefore fit
// in one process. A synchronised wave is measured as the devices make it,
// not as the host manages to serve it. In the model, the broker refuses
// dials while down and answers instantly when up. It applies admission
// (refuse, pause or accept-then-disconnect) and flapping as the test broker
// does. A paused attempt waits for a token up to the connect timeout. If
// the attempt gives up, the broker never sees it. What the model leaves out
// is the broker's own speed. It admits whatever the admission limit allows,
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
	// vDue: the device's wait is over.
	vDue uint8 = iota
	// vResult: a paused attempt's answer arrives (Code: the CONNACK code,
	// or NoConnack).
	vResult
	// vLost: the broker drops the device's session.
	vLost
	// vDisrupt: a further disruption on the timeline (Code: its index in
	// strikes; Dev: -1).
	vDisrupt
)

// fleet is the engine's state.
type fleet struct {
	p      plan.Plan
	giveUp *GiveUp // a grid cell's bounds, or nil
	epoch  time.Time
	devs   []unit
	groups
	up    int
	q     eventq.Queue
	order *rand.Rand // tie-breaks, seeded: runs repeat exactly
	brokers
	b    *report.Builder // the report's
	sink *pipe           // every attempt from t0, as it is made, on its way to b
	timeline
	// session counts each device's sessions, where the broker flaps: a
	// flapping drop ends the session it was scheduled for, not a later one
	session []uint16
	bounds
	// refusals says whether the builder counts what the broker turned
	// away, or only what it admitted
	refusals bool
}

// groups is the fleet's devices by group: a mixed fleet's groups each on
// their own policy.
type groups struct {
	timings []devicecore.Timing
	ends    []int  // the index after each group's last device
	v5      []bool // each speaks MQTT 5, and so reads reason codes
}

// brokers is the model of the broker, or of a cluster's nodes.
type brokers struct {
	broker *brokerModel  // nodes[0]: the broker, when there is one
	nodes  []brokerModel // the cluster's nodes
	node   []uint8       // by device: the node its next attempt goes to
	// limited is what every node together admits at most, once the
	// admission limit is in force
	limited admitting
}

// timeline is where the run stands against its disruptions.
type timeline struct {
	now     time.Duration
	t0      time.Duration
	back    time.Duration // since t0: when the broker returned
	strikes []plan.Strike // the timeline, a rolling restart node by node
	pending int           // further disruptions still to come
	// afterReturn counts the attempts made since back, for the grid's
	// early end (the builder counts them too, a batch behind)
	afterReturn int64
}

// bounds are what the engine knows of how long devices can go on: for
// leastToCome, which a grid cell's early end asks after every admission.
type bounds struct {
	// gap is the longest any device waits between attempts while it is
	// not admitted; 0 where that is not known (see longestGap)
	gap time.Duration
	// least is leastToCome's answer while upFor devices are up: it
	// depends on nothing else that changes, and admissions are rare
	// beside attempts
	least float64
	upFor int
}

// GiveUp is a grid cell's bounds, in the form a virtual run can check while
// it runs. A run past them fails whatever comes after, and ends there. A
// run ends as soon as its failure is certain. Failure is certain when too
// few devices can be up to reach P99Count by P99By. That holds even were
// every node to admit at its limit's full rate and burst from now on.
// Failure is also certain with too many attempts, made already or bound to
// be. The fewest attempts still to come follow from two facts. Devices
// still down retry until admitted, each within the longest gap its timing
// allows between attempts. The nodes admit no faster than their limits. A
// GiveUp serves one run at a time, which sets Certain.
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
	// Inline builds the report on the model's own goroutine. Otherwise the
	// builder runs on a second goroutine, on a second core if there is one.
	// The queue then sorts its crowded buckets on a third goroutine beside
	// it. A study that runs as many engines at once as there are cores
	// gains nothing from that but the hand-over between them.
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
	// a core beside the builder's: a wave's buckets are sorted there
	v.q.SortAhead = !o.Inline && runtime.GOMAXPROCS(0) > 1
	returned := v.setup()
	at := make([]time.Duration, len(v.strikes)) // each disruption's recovery judged on its own
	for k, s := range v.strikes {
		at[k] = s.At
	}
	v.b = report.NewBuilder(report.Run{Plan: p, Engine: plan.Virtual, Transport: "model", Devices: p.Devices,
		T0: v.at(v.t0), Returned: v.at(returned), TimeScale: 1, FleetAt: "devices", BrokerAt: "broker", Events: p.Events,
		Groups: groups, Disruptions: at, Nodes: len(v.nodes), FleetVerdictOnly: o.FleetVerdictOnly})
	v.refusals = v.b.CountsRefusals()
	v.back = v.b.Back()
	bound := p.RecoveryBound(p.Devices)
	last := at[len(at)-1] // the last disruption, after the first
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
	// machines, queue and the report's state
	memPerDevice := float64(report.HeapInUse()-before) / float64(p.Devices) / 1024
	v.devs, v.q = nil, eventq.Queue{} // the report needs neither: judging it may reuse their memory
	runtime.GC()
	rep, err := v.b.Report(report.End{Until: v.at(until), Finished: finished, Started: start, Host: report.Host{MemoryPerDeviceKB: memPerDevice}})
	if err != nil {
		return nil, err
	}
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
		t.Policy, t.BootSpread, t.IgnoreServerSignals = policy, g.BootSpreadUsed(), *g.IgnoreServerSignals
		if guard := plan.Guard(g.Policy); guard != nil {
			t.Guard = guard
		}
		if err := t.Validate(); err != nil {
			return nil, nil, err
		}
		timings[k] = devicecore.Timing(t)
	}
	return timings, ends, nil
}

// newFleet lays out c's fleet, each device seeded with its own source,
// and its broker's nodes.
func newFleet(p plan.Plan, giveUp *GiveUp, start time.Time, timings []devicecore.Timing, ends []int) *fleet {
	v := &fleet{p: p, giveUp: giveUp, epoch: start.Truncate(time.Millisecond), devs: hugepage.Make[unit](p.Devices),
		groups: groups{timings: timings, ends: ends}, order: rand.New(rand.NewPCG(p.Seed, 1<<63)),
		timeline: timeline{strikes: p.Strikes()}, bounds: bounds{gap: longestGap(timings, p.AdmitMode), upFor: -1}}
	// a flapping drop may outlive its session: count them
	if len(v.strikes) > 1 && p.Storm.Has(plan.Flapping) {
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

// inParallel calls f for every device index below n, with the indexes split
// between the cores. It is for work that touches each device's state alone,
// such as seeding and booting a fleet. The first touch of a hundred million
// devices' memory is most of a second's work per gigabyte.
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

func (v *fleet) at(d time.Duration) time.Time { return v.epoch.Add(d) }

// admitting is the nodes' admission limits together: from from on, at
// most rate connects a second and a burst of burst. A zero rate: none.
type admitting struct {
	from        time.Duration
	rate, burst float64
}

// unit is one device of the model: its reconnect state beside its jitter's
// source. The reconnect state is the Agent's Machine without the clock,
// timing and source a fleet shares. A unit takes 64 bytes. An event touches
// one cache line of the fleet.
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

// setup boots the fleet, online at once and outside boot-storm. It arranges
// the timeline's outages and flapping windows at the nodes they strike. It
// makes its first disruption at t0 and schedules the rest. It returns when
// the broker (every node) is first back.
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
	// first at its instant (key 0, device -1): it ends the sessions of that
	// instant
	for k, s := range v.strikes[1:] {
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
		// a drained node restarts
		case plan.BrokerRestart, plan.ThrottledRestart, plan.RollingDrain:
			n.down = append(n.down, window{from: from, until: from + s.Event.Outage})
		case plan.BusyNode:
			n.busy = append(n.busy, window{from: from, until: from + s.Event.Outage})
		// its sessions last > 0 (the plan checks): the broker's answer
		// reads 0 as no flap
		case plan.Flapping:
			n.flap = append(n.flap, window{from: from, until: from + s.Event.Outage, after: cmp.Or(s.Event.Flap, v.p.Flap)})
		}
	}
}

// endSessions ends the sessions a disruption ends at now. Those are every
// device's sessions, or those on the node the disruption strikes. A drain
// and a busy node end theirs with a DISCONNECT that MQTT 5 devices read.
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

// loseWith ends device i's session at now. If code is not 0, it is the
// reason code of the DISCONNECT that ends the session. An MQTT 5 device
// reads that code. A back-pressure code stretches the device's wait. 0x9C
// sends its next attempt to the next node, as the drain's Server Reference
// names it, unless the device ignores server signals. The failover would
// send it there too.
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
	// virtual time is exact: no lag
	r := attempt.Record{T: now - v.t0, Lag: -1, Device: int32(i), Code: int32(code), Outcome: o}
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
		// the next attempt goes to the next node (a throttled session's
		// loss fails it over below)
		v.failOver(i)
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

// failed reports whether a grid cell has failed for certain by virtual time
// at. A cell has failed when there were too many attempts since the return.
// It has also failed when fewer than 99 % of the devices are back by the
// time the 99th percentile is due. Either being bound to happen counts as
// well.
func (v *fleet) failed(at time.Duration) bool {
	g := v.giveUp
	if g == nil {
		return false
	}
	if v.afterReturn > g.MaxAfterReturn {
		return true
	}
	// 1: a margin for the float sums
	if least := v.leastToCome(at); least > 0 && float64(v.afterReturn)+least > float64(g.MaxAfterReturn)+1 {
		g.Certain = v.afterReturn + int64(least)
		return true
	}
	if at-v.t0 > g.P99By {
		return v.up < g.P99Count
	}
	return v.mostUp(at, v.t0+g.P99By) < float64(g.P99Count)
}

// mostUp is the most devices that can be up at until, seen from at. That is
// those up now plus every token the nodes' buckets can hand out meanwhile.
// A bucket never holds more than its burst. In any span it therefore admits
// at most its burst and its rate times the span. With no limit in force at
// every node from at on, mostUp is any number.
func (v *fleet) mostUp(at, until time.Duration) float64 {
	l := v.limited
	if l.rate == 0 || at < l.from {
		return math.Inf(1)
	}
	// 1: a margin for the float sums
	return float64(v.up) + l.burst + (until-at).Seconds()*l.rate + 1
}

// leastToCome is the fewest attempts the devices down at at are certain to
// make from then on. It counts them once the broker is back, where the
// admission limit is in force at every node and the gap between attempts is
// known. Otherwise it is 0. In each span of the gap from at, every device
// still down at the span's end made an attempt in it. The nodes can have
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
// while it is not admitted. That wait is its policy's longest wait, or the
// wait after a credentials refusal if longer. Where the broker pauses, the
// connect timeout of an attempt held in its backlog adds to it. Two of the
// flood guard's slots replace it if they are longer. Before the device's
// first attempt, its boot spread counts instead if it is longer. longestGap
// is 0 where a device may stop retrying (a retry cap, a limit on the time
// spent). It is also 0 where the policy's shape is not one of reconnect's.
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
		// Core.result: CredentialsWait and up to 1 s
		wait = max(wait, t.CredentialsWait+time.Second)
		if mode == fault.PauseOverLimit {
			wait += plan.ConnectTimeout
		}
		if g := t.Guard; g != nil {
			// An attempt leaves the guard's bucket at least empty. The
			// bucket refills over the attempt and the wait after it. A wait
			// of a slot or more finds a token. A shorter wait is held for
			// the rest of the slot and up to a slot's jitter (Core.Due).
			wait = max(wait, 2*g.Window/time.Duration(g.Requests))
		}
		gap = max(gap, wait, t.BootSpread)
	}
	return gap + time.Second // a margin for rounding
}

// longestWait is the longest wait a shape draws, whatever its count,
// previous wait and draw: its wait at a count and a previous wait past any
// cap, at the supremum of its draws (u = 1). Any shape answers it, a new
// one of reconnect's or a caller's own; no shape, 0.
func longestWait(s reconnect.Shape) time.Duration {
	if s == nil {
		return 0
	}
	return s.Delay(1<<20, 1<<58, 1)
}

// newSession counts a new session of device i's and returns its number, to
// match a flapping drop to it. It returns 0 where no later disruption can
// end a session first, as with one flapping window and nothing after it.
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

// readAhead is how many events' device state the engine asks for at a time,
// ahead of handling them: 16 at once, 16 to 31 events ahead. A load holds
// up what follows it until memory answers; a prefetch holds nothing up.
// Of 2, 8, 16 and 32 at once, 16 measured fastest on the million-device
// throttled restart (docs/measurements.md has the figures).
const readAhead = 16

// readAhead asks for the state of the devices whose events come after the
// next few. A million devices' state is not in cache. It arrives while the
// events before them are handled.
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
			// a connect timeout
			r := devicecore.Result{Code: int(e.What.Code), Failed: e.What.Code == devicecore.NoConnack}
			v.schedule(i, e.At, v.result(i, e.At, r))
		case vLost:
			if v.session == nil || int16(v.session[i]) == e.What.Code {
				v.lose(i, e.At)
			}
		}
	}
}
