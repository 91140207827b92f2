package observer

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
)

// A run through the fault proxy whose agents do not fit beside it (three
// or four descriptors a device) runs them in child processes, as a large
// TCP fleet does. That leaves this process the proxy's two descriptors a
// device (and the in-process broker's one). Its measurement needs the
// devices' word as it happens: who is connected, who noticed a silent
// path. Each child's device log therefore streams its records to the
// parent on a pipe, through the attempt codec (attempts begun and
// decided, sessions lost). The parent's log follows them as if the agents
// were here.

// StreamTo makes l write every record it makes to w from now on, as a live
// stream (attempt.NewStreamWriter). It never blocks the agent that reports
// a record. An agent's events must not block, and a parent busy with a
// storm may read late. Records therefore queue in memory, and one
// goroutine writes them out, in order. close writes out what is queued and
// stops.
func (l *DeviceLog) StreamTo(w io.Writer) (close func()) {
	s := newQueuedWriter(w)
	l.mu.Lock()
	l.stream = attempt.NewStreamWriter(s)
	l.mu.Unlock()
	return s.close
}

// Follow reads a child's stream of records into l until the child closes
// it, and tells metrics, if set, as the agents' own hooks would have.
func (l *DeviceLog) Follow(rd io.Reader, metrics func(i int) device.Metrics) error {
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
			l.Begin(at, dev, r.Lag)
		case attempt.Attempt:
			// a cluster's agents run in its process, not in children
			l.End(at, dev, r.Outcome, int(r.Code), 0)
			if metrics != nil {
				tellMetrics(metrics(dev), r.Outcome)
			}
		case attempt.Lost:
			l.Lost(at, dev)
			if metrics != nil {
				metrics(dev).SessionDown(true)
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

// queuedWriter queues what it is given in memory and writes it out to w on
// a goroutine of its own, in order: Write never waits for the reader.
type queuedWriter struct {
	w       io.Writer
	mu      sync.Mutex
	pending []byte
	closing bool
	wake    chan struct{} // one wake-up waiting at most
	done    chan struct{}
}

func newQueuedWriter(w io.Writer) *queuedWriter {
	s := &queuedWriter{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues p; it never fails and never waits for the reader.
func (s *queuedWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.pending = append(s.pending, p...)
	s.mu.Unlock()
	s.poke()
	return len(p), nil
}

func (s *queuedWriter) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *queuedWriter) run() {
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
func (s *queuedWriter) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}
