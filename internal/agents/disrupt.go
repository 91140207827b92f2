package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// window is the stretch of the fleet's life one recovery covers: from its
// first disruption until the fleet was back, with every disruption made
// meanwhile (a timeline's, a rolling restart's node by node).
type window struct {
	t0 time.Time
	at []time.Duration // each disruption's start since t0, unscaled
	// returned is when the broker was back after the first disruption; a
	// cluster's node restarts move it to the last node's return.
	returned time.Time
	// ends are the disruptions the fleet's return waits for: while the
	// broker is down, flaps or sits behind a black hole, nobody is back.
	ends []<-chan struct{}
	// noticed, for a disruption the devices hear of only later (through
	// the proxy, or a primary that died), is who must notice it before
	// their word on who is connected means anything: the last one's.
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

// begin opens a window at now if none is open, and records a disruption
// beginning now in it; it returns now.
func (f *Fleet) begin(now time.Time) time.Time {
	if f.w == nil {
		f.open(now, true)
	}
	f.w.at = append(f.w.at, f.unscale(now.Sub(f.w.t0)))
	return now
}

// open starts a window at t0: the attempts recorded before it (the boot's,
// the last storm's) are forgotten if forget says so, since in virtual time
// the last boot connect falls on the disruption's instant and only the
// order of the records tells them apart; the live metrics hear of the
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

// Disrupt makes disruption e now (its At is the caller's to keep: a
// timeline's driver calls Disrupt at each event's time) and returns once it
// is under way; how long it lasts, the fleet carries out on its own, and
// AwaitRecovery waits for its end. The first disruption after Start,
// AwaitUp or the last recovery opens a window, which AwaitRecovery closes
// and Report reports: every disruption made in it is judged on its own.
// Disruptions may overlap, as the model's do: the broker is down while any
// outage lasts.
//
// e's durations are unscaled; a Flap, Latency or LatencyJitter of 0 is the
// plan's. A throttled restart brings the broker back admitting the plan's
// rate, unless a limit is already in force. Observe waits here for the
// first session lost since the fleet was up, and the window begins there.
func (f *Fleet) Disrupt(ctx context.Context, e plan.Event) error {
	if err := f.faults.Err(); err != nil {
		return err
	}
	var noticed []int
	if f.proxy != nil || f.standby != nil {
		noticed = f.devlog.ConnectedDevices() // before anyone can notice
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
	f.begin(now)
	back, err := f.carryOut(ctx, e)
	if err != nil {
		return err
	}
	if len(f.w.at) == 1 {
		f.w.returned = back
	}
	if noticed != nil {
		f.w.noticed = &owed{at: now, devices: noticed}
	}
	return nil
}

// carryOut makes e's disruption at its breaker now, leaving its end to a
// timer, and returns when the broker is (or will be) back.
func (f *Fleet) carryOut(ctx context.Context, e plan.Event) (back time.Time, err error) {
	now, outage := time.Now(), f.scale(e.Outage)
	var end <-chan struct{}
	switch e.Scenario {
	case plan.BrokerRestart:
		end = f.faults.Outage(f.breaker(), outage, nil)
	case plan.ThrottledRestart:
		end = f.faults.Outage(f.breaker(), outage, func() error {
			if f.admitting {
				return nil
			}
			return f.admit(f.admission)
		})
	case plan.DropAll:
		f.breaker().DropAll()
	case plan.Flapping:
		end, err = f.faults.Flapping(f.breaker(), outage, f.scale(cmp.Or(e.Flap, f.p.Flap)))
	case plan.Blackhole:
		end = f.faults.Blackhole(f.proxy, outage)
	case plan.Latency:
		// The path stays slow for the outage, in the background: the fleet
		// is measured coming back through it.
		_, err = f.faults.Latency(f.proxy, outage, f.scale(cmp.Or(e.Latency, f.p.Latency)), f.scale(cmp.Or(e.LatencyJitter, f.p.LatencyJitter)))
		return now, err
	case plan.Failover:
		f.breaker().BeginOutage() // for good: the fleet's survivor is the standby
		return now, nil
	case plan.ConfigOutage:
		return now.Add(f.p.Outage), f.configOutage(ctx, now)
	case plan.Observe: // the disruption is the user's
		return now, nil
	default:
		return now, fmt.Errorf("agents: %s is not a disruption a live fleet makes", e.Scenario)
	}
	if end == nil {
		return now, err
	}
	f.w.ends = append(f.w.ends, end)
	return now.Add(outage), err
}

// breaker is what the fleet's disruptions act on: the fault proxy when one
// stands in the devices' path, else the in-process broker.
func (f *Fleet) breaker() fault.Breaker {
	if f.proxy != nil {
		return f.proxy
	}
	return f.nodes[0]
}

// errNoWindow is AwaitRecovery's when nothing was disrupted.
var errNoWindow = errors.New("agents: no disruption to recover from")
