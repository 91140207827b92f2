package fleetsim

import (
	"context"
	"fmt"
	"time"
)

// Telemetry counts a run's messages over the whole run (boot, disruption,
// recovery, drain).
type Telemetry struct {
	RatePerDevice float64 `json:"rate_per_device_per_s"` // unscaled
	Enqueued      uint64  `json:"enqueued"`
	Acknowledged  uint64  `json:"acknowledged"` // PUBACKed and removed from the queues
	Retried       uint64  `json:"publish_failures_retried"`
	DroppedOldest uint64  `json:"dropped_oldest"` // queue overflow
	QueuedAtEnd   int     `json:"queued_at_end"`
	// ReceivedUnique and Duplicates are counted by the in-process broker
	// (per device and sequence number); -1 against an external broker.
	ReceivedUnique int `json:"received_unique"`
	Duplicates     int `json:"duplicates"`
	// Lost: enqueued, never dropped by the queue, not queued, and not
	// received (acknowledged, against an external broker). 0 is the point.
	Lost int64 `json:"lost"`
}

// drainTelemetry stops the devices producing and waits for their queues to
// empty now that the fleet is back.
func (r *run) drainTelemetry(ctx context.Context) error {
	for _, m := range r.members {
		m.(*agentMember).stopTelemetry()
	}
	bound := time.Now().Add(time.Minute + r.scale(2*r.c.MaxBackoff))
	tick := time.NewTicker(20 * time.Millisecond) // no event to wait on across thousands of queues
	defer tick.Stop()
	for {
		queued := 0
		for _, m := range r.members {
			queued += m.(*agentMember).pub.Stats().Queued
		}
		if queued == 0 {
			return nil
		}
		if time.Now().After(bound) {
			return fmt.Errorf("fleetsim: %d telemetry messages still queued after the fleet recovered", queued)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (r *run) telemetry() *Telemetry {
	t := &Telemetry{RatePerDevice: r.c.Telemetry, ReceivedUnique: -1}
	for _, m := range r.members {
		s := m.(*agentMember).pub.Stats()
		t.Enqueued += s.Enqueued
		t.Acknowledged += s.Delivered
		t.Retried += s.Failures
		t.DroppedOldest += s.DroppedOldest
		t.QueuedAtEnd += s.Queued
	}
	for _, cr := range r.childReports { // agents in child processes
		if ct := cr.Telemetry; ct != nil {
			t.Enqueued += ct.Enqueued
			t.Acknowledged += ct.Acknowledged
			t.Retried += ct.Retried
			t.DroppedOldest += ct.DroppedOldest
			t.QueuedAtEnd += ct.QueuedAtEnd
		}
	}
	received := int64(t.Acknowledged)
	if r.broker != nil {
		rc := newReceiver()
		rc.take(r.broker.Recorder().Publishes())
		t.ReceivedUnique, t.Duplicates = int(rc.unique), int(rc.duplicates)
		received = rc.unique
	}
	t.Lost = int64(t.Enqueued) - int64(t.DroppedOldest) - int64(t.QueuedAtEnd) - received
	return t
}
