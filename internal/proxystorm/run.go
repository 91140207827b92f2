package proxystorm

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/reconnect"
)

// poll is how often the storm looks at what the proxies saw while it waits
// for the trigger or the fleet's return. The figures come from the proxies'
// own timestamps: the poll only decides when to stop looking.
const poll = 50 * time.Millisecond

// Run waits for the trigger, makes the storm (the plan's disruptions at
// their times, or those Strike makes), watches until the fleet is back or
// the watch ends, and reports. A report whose devices were not all back
// comes with an error wrapping ErrNotRecovered; an interrupted one (ctx
// ended) with ctx's error.
func (s *Storm) Run(ctx context.Context) (*report.Report, error) {
	if err := s.awaitTrigger(ctx); err != nil {
		return nil, err
	}
	late := startLateness()
	if !s.cfg.Manual {
		s.timeline(ctx)
	}
	s.setState(Watching)
	back, err := s.watch(ctx)
	until := time.Now()
	for _, f := range s.faults {
		f.Stop()
	}
	p50, p99 := late.end()
	rep, rerr := s.report(until, p50, p99, ctx.Err() != nil)
	if rerr != nil {
		return nil, rerr
	}
	s.setState(Done)
	switch {
	case ctx.Err() != nil:
		return rep, fmt.Errorf("interrupted with %d of %d devices back: %w", rep.Recovered(), rep.Devices, ctx.Err())
	case err != nil:
		return rep, err
	case !back:
		return rep, fmt.Errorf("%w: %d of %d within %v", ErrNotRecovered, rep.Recovered(), rep.Devices, s.watchBound())
	}
	return rep, nil
}

// awaitTrigger waits for the storm's start: enough sessions, the instant,
// or a Strike.
func (s *Storm) awaitTrigger(ctx context.Context) error {
	if at := s.cfg.DisruptAt; !at.IsZero() {
		if time.Until(at) < 0 {
			return fmt.Errorf("%w: -disrupt-at %s is past", ErrInvalid, at.Format(time.RFC3339))
		}
		select {
		case <-time.After(time.Until(at)):
			return nil
		case <-s.trigger:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if n := s.cfg.AwaitSessions; n > 0 && s.Sessions() >= n {
			return nil
		}
		select {
		case <-tick.C:
		case <-s.trigger:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// timeline makes the plan's disruptions, each at its time after the first.
// An interrupt between them ends the timeline there.
func (s *Storm) timeline(ctx context.Context) {
	s.setState(Striking)
	var first time.Time
	for _, st := range s.cfg.Plan.Strikes() {
		e := st.Event
		if st.Node != -1 {
			e.Node = &st.Node
		}
		if !first.IsZero() && reconnect.Sleep(ctx, nil, time.Until(first.Add(st.At))) != nil {
			return
		}
		at, err := s.strike(e)
		if err != nil {
			s.cfg.Logger.Error("disruption failed", "scenario", e.Scenario, "error", err)
			return
		}
		if first.IsZero() {
			first = at
		}
	}
}

// watch waits until every device disrupted is back and no disruption is
// in force, the watch's bound passes, Finish is called, or ctx ends. back
// says whether the fleet was back. A Manual storm's disruptions are the
// caller's, who may make another: it watches until Finish.
func (s *Storm) watch(ctx context.Context) (back bool, err error) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		s.mu.Lock()
		last, open := s.lastStrike(), s.open != nil
		s.mu.Unlock()
		if last.IsZero() { // a Manual storm, triggered by sessions or time, with no disruption yet
			last = time.Now()
		}
		if !s.cfg.Manual && !open && s.settled() && s.fleetBack() {
			return true, nil
		}
		if time.Since(last) > s.watchBound() {
			return false, nil
		}
		select {
		case <-tick.C:
		case <-s.finish:
			return s.fleetBack(), nil
		case <-ctx.Done():
			return false, nil
		}
		for _, f := range s.faults {
			if err := f.Err(); err != nil {
				return false, err
			}
		}
	}
}

// watchBound is the longest the storm watches after its last disruption.
func (s *Storm) watchBound() time.Duration {
	if s.cfg.Watch > 0 {
		return s.cfg.Watch
	}
	s.mu.Lock()
	n := 0
	if s.fleet != nil {
		n = s.fleet.devices()
	}
	s.mu.Unlock()
	return s.cfg.Plan.RecoveryBound(max(n, 1))
}

// fleetBack says whether every device of the fleet has a session open now.
func (s *Storm) fleetBack() bool {
	s.mu.Lock()
	f := s.fleet
	s.mu.Unlock()
	if f == nil {
		return false
	}
	open, anonymous := s.openSessions()
	for _, id := range f.ids {
		if !open[id] {
			return false
		}
	}
	return anonymous >= f.anonymous
}

// openSessions are the client IDs with a session open now across the
// nodes, and how many open sessions carry no client ID.
func (s *Storm) openSessions() (byID map[string]bool, anonymous int) {
	byID = map[string]bool{}
	for _, p := range s.proxies {
		for _, a := range p.Recorder().Attempts() {
			if !isOpen(a) {
				continue
			}
			if a.ClientID == "" {
				anonymous++
				continue
			}
			byID[a.ClientID] = true
		}
	}
	return byID, anonymous
}

// isOpen says whether a is a session open now: let through, answered, not
// ended.
func isOpen(a fault.Attempt) bool {
	return a.Outcome == fault.Accepted && !a.Answered.IsZero() && a.Ended.IsZero()
}

// lastStrike is the last disruption's instant. The caller holds mu.
func (s *Storm) lastStrike() time.Time {
	if len(s.strikes) == 0 {
		return time.Time{}
	}
	return s.strikes[len(s.strikes)-1].at
}

func (s *Storm) setState(st State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
}

// fleet is who had a session when the storm began: the devices by client
// ID, and how many sessions named none (under TLS).
type fleet struct {
	ids       []string
	index     map[string]int
	anonymous int
}

func (f *fleet) devices() int { return len(f.ids) + f.anonymous }

// census is the fleet as the proxies' open sessions have it now.
func (s *Storm) census() *fleet {
	byID, anonymous := s.openSessions()
	f := &fleet{index: map[string]int{}, anonymous: anonymous}
	for id := range byID {
		f.ids = append(f.ids, id)
	}
	slices.Sort(f.ids)
	for i, id := range f.ids {
		f.index[id] = i
	}
	return f
}
