package proxystorm

import (
	"errors"
	"slices"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/report/external"
)

// errNoStorm is Run's error when the storm never began.
var errNoStorm = errors.New("proxystorm: no disruption was made")

// seen is one attempt a node's proxy saw.
type seen struct {
	fault.Attempt
	node int
}

// attemptsSince are every node's attempts accepted at or after t0, in
// order of time.
func (s *Storm) attemptsSince(t0 time.Time) []seen {
	var out []seen
	for k, p := range s.proxies {
		for _, a := range p.Recorder().Attempts() {
			if !a.Accept.Before(t0) {
				out = append(out, seen{Attempt: a, node: k})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b seen) int { return a.Accept.Compare(b.Accept) })
	return out
}

// report is the storm as the report has it: the fleet's side is every
// attempt the proxies saw since the first disruption, the broker's what
// they let through. A device is its client ID; an attempt that named none
// (refused unread, or TLS) counts in the fleet's attempts but is no
// device's, and a session that named none and stayed to the end counts as
// one of the devices known by session only.
// late50 and late99 are how late the process's timers ran (lateness), in
// seconds: its stamps are no finer. An interrupted storm's report says so.
func (s *Storm) report(until time.Time, late50, late99 float64, interrupted bool) (*report.Report, error) {
	s.mu.Lock()
	t0, fl, strikes, returned := s.t0, s.fleet, slices.Clone(s.strikes), s.returned
	s.mu.Unlock()
	if t0.IsZero() {
		return nil, errNoStorm
	}
	p := s.cfg.Plan
	if returned.IsZero() {
		returned = t0.Add(p.FirstReturn())
	}
	p.TimeScale, p.Policy = 1, "the fleet's own"
	if s.cfg.Manual {
		p.Scenario = strikes[0].event.Scenario
	}
	at := make([]time.Duration, len(strikes))
	for k, st := range strikes {
		at[k] = st.at.Sub(t0)
	}
	b := report.NewBuilder(report.Run{Plan: p, Engine: plan.Proxy, Transport: "external", Devices: max(fl.devices(), 1),
		T0: t0, Returned: returned, TimeScale: 1, FleetAt: "proxy", BrokerAt: "proxy", Events: s.cfg.Events,
		Disruptions: at, Nodes: len(s.proxies), MinWidth: time.Duration(2 * late99 * float64(time.Second))})
	attempts := s.attemptsSince(t0)
	anonymous := stayedAnonymous(attempts, until, fl)
	counts := &report.ProxyCounts{}
	for _, a := range attempts {
		if a.Accept.After(until) {
			continue
		}
		dev := int32(-1)
		if i, ok := fl.index[a.ClientID]; ok && a.ClientID != "" {
			dev = int32(i)
		} else if i, ok := anonymous[a.Seq]; ok {
			dev = int32(i)
		}
		b.Add(attempt.Record{T: a.Accept.Sub(t0), Lag: -1, Device: dev, Outcome: a.Outcome})
		if a.Outcome == fault.Accepted {
			// the broker took it when the proxy passed it on, after any hold
			b.Add(attempt.Record{T: a.Decided.Sub(t0), Lag: -1, Device: dev, Outcome: a.Outcome, Seen: attempt.Broker, Node: uint8(a.node)})
		}
		counts.Add(countOf(a.Attempt))
	}
	external := s.devicesSeen(fl)
	end := report.End{Until: until, Finished: external.NeverBackCount == 0, Started: s.started, Proxy: counts, External: external,
		Host: report.Host{LagP50S: late50, LagP99S: late99, Bound: late99 > report.HostBoundLate.Seconds()}}
	if inferred, err := s.InferPolicy(); err == nil {
		end.Inferred = PolicyOf(inferred, s.cfg.Identify)
	}
	if interrupted {
		end.Incomplete = "interrupted"
	}
	return b.Report(end)
}

// stayedAnonymous gives each session with no client ID that was still open
// at until an index after the fleet's named devices, in order of arrival,
// as many as the fleet had such sessions: by Seq.
func stayedAnonymous(attempts []seen, until time.Time, fl *fleet) map[int]int {
	out := map[int]int{}
	next := len(fl.ids)
	for _, a := range attempts {
		if next >= fl.devices() {
			break
		}
		if a.ClientID == "" && a.Outcome == fault.Accepted && !a.Answered.IsZero() && (a.Ended.IsZero() || a.Ended.After(until)) {
			out[a.Seq] = next
			next++
		}
	}
	return out
}

// countOf is one attempt as the proxy's counts have it.
func countOf(a fault.Attempt) report.ProxyCounts {
	var c report.ProxyCounts
	switch a.Outcome {
	case fault.Accepted:
		c.Admitted = 1
		if !a.Answered.IsZero() {
			c.Answered = 1
		}
	case fault.Refused:
		c.Refused = 1
	case fault.Throttled:
		c.Throttled = 1
	case fault.Dropped:
		c.Dropped = 1
	case fault.Unreachable:
		c.Unreachable = 1
	case fault.Overflowed:
		c.Overflowed = 1
	}
	return c
}

// devicesSeen is how the fleet's devices were told apart, and who of them
// has no session now.
func (s *Storm) devicesSeen(fl *fleet) *external.Devices {
	x := &external.Devices{ByClientID: len(fl.ids), BySession: fl.anonymous, Identified: s.cfg.Identify}
	open, anonymous := s.openSessions()
	for _, id := range fl.ids {
		if !open[id] {
			x.NeverBackCount++
			if len(x.NeverBack) < external.MaxNeverBack {
				x.NeverBack = append(x.NeverBack, id)
			}
		}
	}
	x.NeverBackCount += max(0, fl.anonymous-anonymous)
	return x
}
