package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// window is the stretch of the fleet's life one recovery covers. It runs
// from its first disruption until the fleet was back. It holds every
// disruption made meanwhile (a timeline's, a rolling restart's node by
// node).
type window struct {
	t0     time.Time
	at     []time.Duration // each disruption's start since t0, unscaled
	events []plan.Event    // each disruption, as at has them
	// returned is when the broker was back after the first disruption;
	// node restarts that follow move it to the last node's return.
	returned time.Time
	// ends are the disruptions the fleet's return waits for: while the
	// broker is down, flaps or sits behind a black hole, nobody is back.
	ends []<-chan struct{}
	// noticed is set for a disruption the devices hear of only later
	// (through the proxy, or a primary that died). It is who must notice
	// it before their word on who is connected means anything: the last
	// one's.
	noticed *owed
	fetched func() error // config-outage: the fetches' end
	// stopProgress ends the progress lines, if the run prints them.
	stopProgress func()
}

// owed is the devices connected when a disruption began at at.
type owed struct {
	at      time.Time
	devices []int
}

// begin opens a window at now if none is open, and records disruption e
// beginning now in it.
func (f *Fleet) begin(now time.Time, e plan.Event) {
	if f.w == nil {
		f.open(now, true)
	}
	f.w.at = append(f.w.at, f.unscale(now.Sub(f.w.t0)))
	f.w.events = append(f.w.events, e)
}

// open starts a window at t0. The attempts recorded before it (the boot's,
// the last storm's) are forgotten if forget says so. In virtual time the
// last boot connect falls on the disruption's instant, and only the order
// of the records tells them apart. The live metrics hear of the
// disruption, and the progress lines begin.
func (f *Fleet) open(t0 time.Time, forget bool) {
	f.w = &window{t0: t0, returned: t0}
	if forget {
		f.forget()
	}
	if f.p.Metrics != nil {
		f.p.Metrics.Disrupted(t0)
	}
	f.w.stopProgress = progress(f.p.Progress, f.obs, len(f.ids), f.p.TimeScale, t0)
}

// Disrupt makes disruption e now and returns once it is under way. e's At
// is the caller's to keep: a timeline's driver calls Disrupt at each
// event's time. The fleet carries out how long it lasts on its own, and
// AwaitRecovery waits for its end. The first disruption after Start,
// AwaitUp or the last recovery opens a window. AwaitRecovery closes the
// window and Report reports it: every disruption made in it is judged on
// its own. Disruptions may overlap, as the model's do: a node is down
// while any outage of it lasts.
//
// On a cluster, e strikes every node at once, or the node e.Node names
// alone, whose devices fail over to the others. The fleet's return waits
// for the end of a disruption of every node (and of any flapping window),
// not for one node's outage. A rolling restart is its nodes' restarts,
// one a gap: Run makes them, RestartNode each.
//
// e's durations are unscaled; a Flap, Latency or LatencyJitter of 0 is the
// plan's. A throttled restart brings the nodes back admitting the plan's
// rate, every node, unless a limit is already in force. Observe waits here
// for the first session lost since the fleet was up, and the window
// begins there.
func (f *Fleet) Disrupt(ctx context.Context, e plan.Event) error {
	if err := f.faultsErr(); err != nil {
		return err
	}
	struck, err := f.struck(e)
	if err != nil {
		return err
	}
	var noticed []int
	if len(f.nodes.Proxies) > 0 || f.nodes.Standby != nil {
		node := plan.AllNodes
		if e.Node != nil {
			node = *e.Node
		}
		noticed = f.devlog.ConnectedDevices(node) // before anyone can notice
	}
	now := time.Now()
	if e.Scenario == plan.Observe {
		lost, err := f.devlog.AwaitLoss(ctx, f.upAt, f.p.Duration)
		if err != nil {
			return fmt.Errorf("no disruption within %v: %w", f.p.Duration, err)
		}
		// The losses and attempts since are the disruption's, recorded
		// already: the window starts in the past, forgetting nothing.
		now = lost
		if f.w == nil {
			f.open(now, false)
		}
	}
	f.begin(now, e)
	back, err := f.carryOut(ctx, e, struck)
	if err != nil {
		return err
	}
	switch {
	case len(f.w.at) == 1:
		f.w.returned = back
	// node restarts one after another: the cluster whole when the last is back
	case e.Node != nil && back.After(f.w.returned):
		f.w.returned = back
	}
	if noticed != nil {
		f.w.noticed = &owed{at: now, devices: noticed}
	}
	return nil
}

// struck is the nodes e strikes: the one it names, or every one.
func (f *Fleet) struck(e plan.Event) ([]int, error) {
	n := len(f.faults)
	switch {
	case e.Scenario == plan.RollingRestart || e.Scenario == plan.RollingDrain && e.Node == nil:
		return nil, fmt.Errorf("agents: a %s is its nodes' strikes, one a gap: RestartNode or DrainNode each", e.Scenario)
	case e.Node == nil:
		all := make([]int, n)
		for k := range all {
			all[k] = k
		}
		return all, nil
	case n < 2 || *e.Node < 0 || *e.Node >= n:
		return nil, fmt.Errorf("agents: no node %d in a cluster of %d", *e.Node, n)
	}
	return []int{*e.Node}, nil
}

// carryOut makes e's disruption at the breakers of the nodes it strikes
// now, leaving its end to timers, and returns when the broker is (or will
// be) back.
func (f *Fleet) carryOut(ctx context.Context, e plan.Event, struck []int) (back time.Time, err error) {
	now, outage := time.Now(), f.scale(e.Outage)
	// The fleet's return waits for a disruption of every node; one node's
	// devices go elsewhere. A flapping drop still due anywhere, it always
	// waits for, as the model does.
	waits := e.Node == nil || e.Scenario == plan.Flapping
	var ends []<-chan struct{}
	for _, k := range struck {
		var end <-chan struct{}
		switch e.Scenario {
		case plan.BrokerRestart:
			end = f.faults[k].Outage(f.breaker(k), outage, nil)
		case plan.ThrottledRestart:
			end = f.faults[k].Outage(f.breaker(k), outage, func() error { return f.nodes.AdmitUnlessLimited(f.admission) })
		case plan.DropAll:
			f.breaker(k).DropAll()
		case plan.Flapping:
			end, err = f.faults[k].Flapping(f.breaker(k), outage, f.scale(cmp.Or(e.Flap, f.p.Flap)))
		case plan.Blackhole:
			end = f.faults[k].Blackhole(f.nodes.Proxies[k], outage)
		case plan.Latency:
			// The path stays slow for the outage, in the background: the
			// fleet is measured coming back through it.
			_, err = f.faults[k].Latency(f.nodes.Proxies[k], outage, f.scale(cmp.Or(e.Latency, f.p.Latency)), f.scale(cmp.Or(e.LatencyJitter, f.p.LatencyJitter)))
		case plan.RateLimited: // the limit stays: the fleet comes back through it
			if err = f.nodes.AdmitUnlessLimited(f.admission); err == nil {
				f.breaker(k).DropAll()
			}
		case plan.RollingDrain: // one node's: its devices are handed to the next
			b := f.nodes.Brokers[k].Faults()
			b.Drain(device.CodeUseAnotherServer, f.nodes.Reference((k+1)%len(f.faults)))
			end = f.faults[k].Outage(b, outage, nil)
		case plan.BusyNode:
			b := f.nodes.Brokers[k].Faults()
			if err = b.BeginBusy(f.p.Busy()); err == nil {
				b.Drain(f.p.Busy(), "")
				end = f.faults[k].After(outage, func() error { b.EndBusy(); return nil })
			}
		default:
			return f.carryOutElsewhere(ctx, e, now)
		}
		if err != nil {
			return now, err
		}
		if end != nil {
			ends = append(ends, end)
		}
	}
	if waits {
		f.w.ends = append(f.w.ends, ends...)
	}
	if len(ends) == 0 {
		return now, nil
	}
	return now.Add(outage), nil
}

// carryOutElsewhere makes the disruptions that strike no node: the
// primary's death (failover), the config server's outage, and the user's
// own (observe).
func (f *Fleet) carryOutElsewhere(ctx context.Context, e plan.Event, now time.Time) (back time.Time, err error) {
	switch e.Scenario {
	case plan.Failover:
		f.breaker(0).BeginOutage() // for good: the fleet's survivor is the standby
		return now, nil
	case plan.ConfigOutage:
		return now.Add(f.p.Outage), f.configOutage(ctx, now)
	case plan.Observe: // the disruption is the user's
		return now, nil
	}
	return now, fmt.Errorf("agents: %s is not a disruption a live fleet makes", e.Scenario)
}

// breaker is what the fleet's disruptions of node k act on.
func (f *Fleet) breaker(k int) fault.Breaker { return f.nodes.Breaker(k) }

// RestartNode takes node k of the cluster down for outage (unscaled) and
// brings it back. It is one step of a rolling restart: Disrupt of a broker
// restart of node k alone. Its sessions end now, and their devices fail
// over to the next node on their policy's schedule. The fleet's return
// does not wait for the node's, since its devices go elsewhere.
func (f *Fleet) RestartNode(ctx context.Context, k int, outage time.Duration) error {
	return f.Disrupt(ctx, plan.Event{Scenario: plan.BrokerRestart, Outage: outage, Node: &k})
}

// DrainNode drains node k of the cluster to the next and takes it down
// for outage (unscaled). It is one step of a rolling drain. Its MQTT 5
// devices are sent on with 0x9C and a Server Reference. Its 3.1.1 devices
// see the connection close and fail over to the same next node.
func (f *Fleet) DrainNode(ctx context.Context, k int, outage time.Duration) error {
	return f.Disrupt(ctx, plan.Event{Scenario: plan.RollingDrain, Outage: outage, Node: &k})
}

// faultsErr is the first error a disruption's end met at any node.
func (f *Fleet) faultsErr() error {
	for k := range f.faults {
		if err := f.faults[k].Err(); err != nil {
			return err
		}
	}
	return nil
}

// errNoWindow is AwaitRecovery's when nothing was disrupted.
var errNoWindow = errors.New("agents: no disruption to recover from")
