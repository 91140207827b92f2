package proxystorm

import (
	"cmp"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/plan"
)

// openFault is a disruption Strike began with no end of its own: End ends
// it.
type openFault struct {
	event plan.Event
	end   func() error
}

// Strike makes disruption e now, at the node e.Node names or every node.
// Its Outage is how long it lasts; a disruption that lasts (an outage, a
// black hole, a flapping window, a slow path) with no Outage lasts until
// End. A rate limit lasts until End either way. The first Strike begins the storm, whatever its
// trigger. One open disruption at a time: End it before the next.
func (s *Storm) Strike(e plan.Event) error {
	if err := Supported(e.Scenario); err != nil {
		return err
	}
	switch {
	case e.Scenario == plan.RollingRestart:
		return fmt.Errorf("%w: a rolling restart is its nodes' restarts: strike a broker-restart of each node in turn", ErrInvalid)
	case e.Node != nil && (*e.Node < 0 || *e.Node >= len(s.proxies)):
		return fmt.Errorf("%w: no node %d of %d", ErrInvalid, *e.Node, len(s.proxies))
	case e.Outage < 0 || e.Outage > plan.MaxDisruption:
		return fmt.Errorf("%w: outage %v: within 0 and %v", ErrInvalid, e.Outage, plan.MaxDisruption)
	}
	s.mu.Lock()
	if s.state == Done {
		s.mu.Unlock()
		return fmt.Errorf("%w: the storm is over", ErrInvalid)
	}
	if s.open != nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s is still in force: end it first", ErrInvalid, s.open.event.Scenario)
	}
	s.mu.Unlock()
	if e.Outage == 0 && lasts(e.Scenario) || e.Scenario == plan.RateLimited {
		return s.strikeOpen(e)
	}
	_, err := s.strike(e)
	return err
}

// lasts says whether a scenario lasts until it is ended.
func lasts(sc plan.Scenario) bool { return sc != plan.DropAll }

// End ends the disruption Strike began with no end of its own. A
// throttled restart's broker comes back admitting at the plan's limit.
func (s *Storm) End() error {
	s.mu.Lock()
	o := s.open
	s.open = nil
	if o != nil && len(s.strikes) == 1 {
		s.returned = time.Now()
	}
	s.mu.Unlock()
	if o == nil {
		return fmt.Errorf("%w: no disruption is open", ErrInvalid)
	}
	return o.end()
}

// begin records disruption e beginning now: the first takes the census of
// the fleet and begins the storm.
func (s *Storm) begin(e plan.Event) time.Time {
	fl := s.census() // before anything is dropped
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t0.IsZero() {
		s.t0, s.fleet = now, fl
		select {
		case <-s.trigger:
		default:
			close(s.trigger)
		}
	}
	s.strikes = append(s.strikes, struck{at: now, event: e})
	return now
}

// strike makes e now, its end left to a timer of each node's.
func (s *Storm) strike(e plan.Event) (time.Time, error) {
	now := s.begin(e)
	outage, admission := e.Outage, s.admission()
	for _, k := range s.nodes(e) {
		p, f := s.proxies[k], s.faults[k]
		var end <-chan struct{}
		var err error
		switch e.Scenario {
		case plan.BrokerRestart:
			end = f.Outage(p, outage, nil)
		case plan.ThrottledRestart:
			end = f.Outage(p, outage, func() error { return p.SetAdmission(admission) })
		case plan.DropAll:
			p.DropAll()
		case plan.Flapping:
			end, err = f.Flapping(p, outage, cmp.Or(e.Flap, s.cfg.Plan.Flap))
		case plan.Blackhole:
			end = f.Blackhole(p, outage)
		case plan.Latency:
			end, err = f.Latency(p, outage, cmp.Or(e.Latency, s.cfg.Plan.Latency), cmp.Or(e.LatencyJitter, s.cfg.Plan.LatencyJitter))
		case plan.RateLimited: // the limit stays: the fleet comes back through it
			if err = p.SetAdmission(admission); err == nil {
				p.DropAll()
			}
		}
		if err != nil {
			return now, err
		}
		if end != nil {
			s.mu.Lock()
			s.ends = append(s.ends, end)
			s.mu.Unlock()
		}
	}
	s.cfg.Logger.Info("disruption", "scenario", e.Scenario, "outage", outage, "nodes", len(s.nodes(e)))
	return now, nil
}

// strikeOpen begins e at its nodes with no end but End.
func (s *Storm) strikeOpen(e plan.Event) error {
	s.begin(e)
	nodes, admission := s.nodes(e), s.admission()
	each := func(do func(p *faultproxy.Proxy) error) error {
		for _, k := range nodes {
			if err := do(s.proxies[k]); err != nil {
				return err
			}
		}
		return nil
	}
	var end func() error
	var err error
	switch e.Scenario {
	case plan.BrokerRestart, plan.ThrottledRestart:
		_ = each(func(p *faultproxy.Proxy) error { p.BeginOutage(); return nil })
		end = func() error {
			return each(func(p *faultproxy.Proxy) error {
				if e.Scenario == plan.ThrottledRestart {
					if err := p.SetAdmission(admission); err != nil {
						return err
					}
				}
				return p.EndOutage()
			})
		}
	case plan.Flapping:
		err = each(func(p *faultproxy.Proxy) error { p.DropAll(); return p.SetFlapping(cmp.Or(e.Flap, s.cfg.Plan.Flap)) })
		end = func() error { return each(func(p *faultproxy.Proxy) error { return p.SetFlapping(0) }) }
	case plan.Blackhole:
		_ = each(func(p *faultproxy.Proxy) error { p.BeginBlackhole(); return nil })
		end = func() error { return each(func(p *faultproxy.Proxy) error { p.EndBlackhole(); return nil }) }
	case plan.Latency:
		err = each(func(p *faultproxy.Proxy) error {
			p.DropAll()
			return p.SetLatency(cmp.Or(e.Latency, s.cfg.Plan.Latency), cmp.Or(e.LatencyJitter, s.cfg.Plan.LatencyJitter))
		})
		end = func() error { return each(func(p *faultproxy.Proxy) error { return p.SetLatency(0, 0) }) }
	case plan.RateLimited:
		err = each(func(p *faultproxy.Proxy) error { p.DropAll(); return p.SetAdmission(admission) })
		end = func() error {
			return each(func(p *faultproxy.Proxy) error { return p.SetAdmission(fault.Admission{}) })
		}
	}
	s.mu.Lock()
	s.open = &openFault{event: e, end: end}
	s.mu.Unlock()
	s.cfg.Logger.Info("disruption begins, until ended", "scenario", e.Scenario, "nodes", len(nodes))
	return err
}

// nodes are the nodes e strikes: the one it names, or every one.
func (s *Storm) nodes(e plan.Event) []int {
	if e.Node != nil {
		return []int{*e.Node}
	}
	all := make([]int, len(s.proxies))
	for k := range all {
		all[k] = k
	}
	return all
}

// settled says whether every disruption with an end of its own is over.
func (s *Storm) settled() bool {
	s.mu.Lock()
	ends := s.ends
	s.mu.Unlock()
	for _, end := range ends {
		select {
		case <-end:
		default:
			return false
		}
	}
	return true
}
