package agents

import (
	"context"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/internal/report"
)

// queued counts the messages still in the devices' store-and-forward
// queues.
func (r *run) queued() int {
	n := 0
	for _, m := range r.members {
		n += m.(*agentMember).pub.Stats().Queued
	}
	return n
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
		queued := r.queued()
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

func (r *run) telemetry() *report.Telemetry {
	t := &report.Telemetry{RatePerDevice: r.c.Telemetry, ReceivedUnique: -1}
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
