package agents

import (
	"context"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/report"
)

// Queued counts the messages still in the devices' store-and-forward
// queues (here; a child's are its own).
func (f *Fleet) Queued() int {
	n := 0
	for _, m := range f.members {
		if a, ok := m.(member.Telemetered); ok {
			n += a.Stats().Queued
		}
	}
	return n
}

// Drain stops the devices producing readings and waits for their queues
// to empty, for at most a minute and two caps.
func (f *Fleet) Drain(ctx context.Context) error {
	for _, m := range f.members {
		if a, ok := m.(member.Telemetered); ok {
			a.StopTelemetry()
		}
	}
	return f.awaitQueued(ctx, 0)
}

// Settle waits until the devices' queues hold no more than one message a
// device (the one in flight), while they go on producing. It waits for at
// most a minute and two caps. It counts what the broker received by then
// (see Telemetry). It returns what was queued when it began.
func (f *Fleet) Settle(ctx context.Context) (queuedAtStart int, err error) {
	queuedAtStart = f.Queued()
	here := len(f.ids) // the devices whose queues Queued counts
	if f.children != nil {
		here = 0
	}
	if err := f.awaitQueued(ctx, here); err != nil {
		return queuedAtStart, err
	}
	f.takeReceived()
	return queuedAtStart, nil
}

// awaitQueued waits until no more than most messages are queued.
func (f *Fleet) awaitQueued(ctx context.Context, most int) error {
	bound := time.Now().Add(time.Minute + f.scale(2*f.p.MaxBackoff))
	tick := time.NewTicker(20 * time.Millisecond) // no event to wait on across thousands of queues
	defer tick.Stop()
	for {
		queued := f.Queued()
		if queued <= most {
			return nil
		}
		if time.Now().After(bound) {
			return fmt.Errorf("agents: %d telemetry messages still queued after the fleet recovered", queued)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Telemetry counts the fleet's messages end to end so far. It counts what
// the devices (and the children's, once reported) enqueued, had
// acknowledged and still hold. It counts what the in-process broker
// received once, by the envelope's rule. It takes what the broker
// recorded since the last call, so that a long run does not hold every
// message.
func (f *Fleet) Telemetry() *report.Telemetry {
	t := &report.Telemetry{RatePerDevice: f.p.TelemetryRate(), ReceivedUnique: -1}
	for _, m := range f.members {
		if a, ok := m.(member.Telemetered); ok {
			s := a.Stats()
			t.Enqueued += s.Enqueued
			t.Acknowledged += s.Delivered
			t.Retried += s.Failures
			t.DroppedOldest += s.DroppedOldest
			t.QueuedAtEnd += s.Queued
		}
	}
	for _, cr := range f.childReports { // agents in child processes
		if ct := cr.Telemetry; ct != nil {
			t.Enqueued += ct.Enqueued
			t.Acknowledged += ct.Acknowledged
			t.Retried += ct.Retried
			t.DroppedOldest += ct.DroppedOldest
			t.QueuedAtEnd += ct.QueuedAtEnd
		}
	}
	received := int64(t.Acknowledged)
	if len(f.nodes.Brokers) > 0 {
		f.takeReceived()
		t.ReceivedUnique, t.Duplicates = int(f.received.Unique), int(f.received.Duplicates)
		received = f.received.Unique
	}
	t.Lost = int64(t.Enqueued) - int64(t.DroppedOldest) - int64(t.QueuedAtEnd) - received
	return t
}

// takeReceived counts, and lets go of, what the in-process brokers
// received since the last take.
func (f *Fleet) takeReceived() {
	for _, b := range f.nodes.Brokers {
		f.received.Take(b.Recorder().TakePublishes())
	}
}
