package agents

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
)

// A run through the fault proxy whose agents do not fit beside it (three
// or four descriptors a device) runs them in child processes, as a large
// TCP fleet does, leaving this process the proxy's two descriptors a device
// (and the in-process broker's one). Its measurement needs the devices'
// word as it happens (who is connected, who noticed a silent path), so each
// child streams its device log's records to this one on a pipe, through the
// attempt codec (attempts begun and decided, sessions lost), and the run
// follows them into its own log as if the agents were here.

// follow reads a child's stream of records (written by its device log)
// into l until the child closes it, and tells m, if set, as the agents
// would have.
func (l *deviceLog) follow(rd io.Reader, m plan.LiveMetrics) error {
	records, err := attempt.NewReader(rd)
	if err != nil {
		return fmt.Errorf("child's records: %w", err)
	}
	for {
		r, err := records.Read()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("child's records: %w", err)
		case r.Device < 0 || int(r.Device) >= len(l.connected):
			return fmt.Errorf("child's records: device %d is not one of the fleet's %d", r.Device, len(l.connected))
		}
		dev, at := int(r.Device), time.Unix(0, int64(r.T))
		switch r.Kind {
		case attempt.Begun:
			l.begin(at, dev, r.Lag)
		case attempt.Attempt:
			l.end(dev, r.Outcome, int(r.Code))
			if m != nil {
				tellMetrics(m.Device(dev), r.Outcome)
			}
		case attempt.Lost:
			l.lost(at, dev)
			if m != nil {
				m.Device(dev).SessionDown(true)
			}
		}
	}
}

// tellMetrics is an attempt's end as the agent's own metrics hook sees it.
func tellMetrics(d device.Metrics, o fault.Outcome) {
	switch o {
	case fault.Accepted:
		d.Attempt(device.AttemptAccepted)
		d.SessionUp()
	case fault.Refused:
		d.Attempt(device.AttemptRefused)
	default:
		d.Attempt(device.AttemptFailed)
	}
}

// eventStream hands a child's stream of records to its parent without ever
// blocking the agent that reports them (an agent's OnEvent must not block,
// and a parent busy with a storm may read late): lines queue in memory and
// one goroutine writes them out, in order.
type eventStream struct {
	w       io.Writer
	mu      sync.Mutex
	pending []byte
	closing bool
	wake    chan struct{} // one wake-up waiting at most
	done    chan struct{}
}

func newEventStream(w io.Writer) *eventStream {
	s := &eventStream{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues p; it never fails and never waits for the reader.
func (s *eventStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.pending = append(s.pending, p...)
	s.mu.Unlock()
	s.poke()
	return len(p), nil
}

func (s *eventStream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *eventStream) run() {
	defer close(s.done)
	var out []byte
	failed := false
	for range s.wake {
		s.mu.Lock()
		out, s.pending = s.pending, out[:0]
		closing := s.closing
		s.mu.Unlock()
		if len(out) > 0 && !failed {
			_, err := s.w.Write(out)
			failed = err != nil // the parent is gone: nobody left to tell
		}
		if closing {
			return
		}
	}
}

// close writes out what is queued and stops.
func (s *eventStream) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}
