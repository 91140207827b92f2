// Package timedfault holds a fleet's faults for as long as each lasts,
// each ended by a timer of its own. The disruptions of a timeline may
// thus overlap as the virtual engine's do. The broker stays down while
// any outage lasts. It flaps while any flapping window does, each session
// at the flap of the first window still open. It sits behind a black hole
// while any lasts. It is as slow as the latest slow path still in force.
package timedfault

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
)

// Path is what the path's own faults act on: the fault proxy.
type Path interface {
	BeginBlackhole()
	EndBlackhole()
	SetLatency(latency, jitter time.Duration) error
	DropAll() int
}

// Faults are the faults in force at one breaker and one path, and the
// timers that end them. Each method that begins a fault returns a channel
// closed once the fault is over (or Stop came first). Its zero value holds
// none; its methods are safe for concurrent use.
type Faults struct {
	mu        sync.Mutex
	outages   int
	flaps     []time.Duration    // the flapping windows open, in the order they began
	blackhole int                // black holes in force
	latencies [][2]time.Duration // the slow paths in force, latest last
	stopped   chan struct{}      // closed by Stop
	running   sync.WaitGroup
	err       error // the first end that failed
}

// Outage takes br down now and brings it back after d, unless another
// outage still holds it down. It runs beforeEnd (if set) just before:
// a throttled restart's broker comes back admitting at its limit.
func (s *Faults) Outage(br fault.Breaker, d time.Duration, beforeEnd func() error) <-chan struct{} {
	s.mu.Lock()
	s.outages++
	s.mu.Unlock()
	br.BeginOutage() // drops whoever came back meanwhile, if already down
	return s.After(d, func() error {
		if beforeEnd != nil {
			if err := beforeEnd(); err != nil {
				return err
			}
		}
		s.mu.Lock()
		s.outages--
		last := s.outages == 0
		s.mu.Unlock()
		if !last {
			return nil
		}
		return br.EndOutage()
	})
}

// Flapping makes br drop every session now, and for d every session flap
// after its CONNACK. Its channel closes once the sessions admitted just
// before the window's end have been dropped too, d + flap from now.
func (s *Faults) Flapping(br fault.Breaker, d, flap time.Duration) (<-chan struct{}, error) {
	s.mu.Lock()
	s.flaps = append(s.flaps, flap)
	err := br.SetFlapping(s.flaps[0])
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	br.DropAll()
	s.After(d, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := slices.Index(s.flaps, flap)
		s.flaps = slices.Delete(s.flaps, k, k+1)
		if len(s.flaps) == 0 {
			return br.SetFlapping(0)
		}
		return br.SetFlapping(s.flaps[0])
	})
	return s.After(d+flap+10*time.Millisecond, func() error { return nil }), nil
}

// Blackhole makes p's path silent for d.
func (s *Faults) Blackhole(p Path, d time.Duration) <-chan struct{} {
	s.mu.Lock()
	s.blackhole++
	p.BeginBlackhole()
	s.mu.Unlock()
	return s.After(d, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.blackhole--; s.blackhole == 0 {
			p.EndBlackhole()
		}
		return nil
	})
}

// Latency drops every session on p's path now, and for d makes every
// byte each way latency plus U[0, jitter) late.
func (s *Faults) Latency(p Path, d, latency, jitter time.Duration) (<-chan struct{}, error) {
	slow := [2]time.Duration{latency, jitter}
	s.mu.Lock()
	s.latencies = append(s.latencies, slow)
	err := p.SetLatency(latency, jitter)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p.DropAll()
	return s.After(d, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := slices.Index(s.latencies, slow)
		s.latencies = slices.Delete(s.latencies, k, k+1)
		if n := len(s.latencies); n > 0 {
			return p.SetLatency(s.latencies[n-1][0], s.latencies[n-1][1])
		}
		return p.SetLatency(0, 0)
	}), nil
}

// After runs end after d on a goroutine of its own, unless Stop comes
// first. It returns a channel closed once end has run (or will not). An
// error end returns is kept for Err.
func (s *Faults) After(d time.Duration, end func() error) <-chan struct{} {
	s.mu.Lock()
	if s.stopped == nil {
		s.stopped = make(chan struct{})
	}
	stopped := s.stopped
	s.mu.Unlock()
	done := make(chan struct{})
	s.running.Go(func() {
		defer close(done)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-stopped:
			return
		case <-t.C:
		}
		if err := end(); err != nil {
			s.mu.Lock()
			s.err = cmp.Or(s.err, err)
			s.mu.Unlock()
		}
	})
	return done
}

// Err is the first error a fault's end met, if any: a broker that could
// not come back.
func (s *Faults) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stop cancels the ends still due and waits for those running.
func (s *Faults) Stop() {
	s.mu.Lock()
	if s.stopped == nil {
		s.stopped = make(chan struct{})
	}
	select {
	case <-s.stopped:
	default:
		close(s.stopped)
	}
	s.mu.Unlock()
	s.running.Wait()
}
