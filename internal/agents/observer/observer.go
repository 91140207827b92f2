// Package observer is where a run of real agents watches its fleet from.
// It watches either the devices' own log of every attempt and session
// (DeviceLog) or the recorders of the in-process brokers (Brokers). The
// run waits on these to know when its fleet is up. Each adds what it saw
// to the report afterwards, in an order the scheduler does not decide. A
// child process's device log streams to its parent's through the attempt
// codec (DeviceLog.StreamTo, Follow).
package observer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/testbroker"
)

// Observer is what a run waits on to know how much of its fleet is
// connected. Its methods are safe for concurrent use.
type Observer interface {
	Connected() int
	Attempted() int // attempts so far
	// Await waits until cond holds for the number of devices connected,
	// the real-time bound timeout passes, or ctx ends (ctx.Err()).
	Await(ctx context.Context, timeout time.Duration, cond func(connected int) bool) error
}

// Brokers watches the fleet from the in-process brokers' side: one
// broker's recorder, or each node's of a cluster (the node is its index).
// A device is connected when a broker has admitted its session and not
// seen it end. The zero Brokers watches nothing; it is safe for
// concurrent use, as the recorders are.
type Brokers []*testbroker.Recorder

func (o Brokers) Connected() int {
	n := 0
	for _, r := range o {
		n += r.Counts().Connected
	}
	return n
}

func (o Brokers) Attempted() int {
	n := 0
	for _, r := range o {
		n += r.Counts().Attempts
	}
	return n
}

// Await re-checks cond on the nodes' sum after every change at any node.
func (o Brokers) Await(ctx context.Context, timeout time.Duration, cond func(int) bool) error {
	if len(o) == 1 {
		return o[0].Await(ctx, timeout, func(k testbroker.Counts) bool { return cond(k.Connected) })
	}
	deadline := time.Now().Add(timeout)
	for {
		seen := make([]int, len(o))
		for k, r := range o {
			seen[k] = r.Counts().Connected
		}
		switch left := time.Until(deadline); {
		case cond(sum(seen)):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case left <= 0:
			return fmt.Errorf("observer: condition not met after %v; %d devices connected", timeout, sum(seen))
		default:
			o.awaitChange(ctx, left, seen)
		}
	}
}

// awaitChange waits until a node's count of sessions differs from seen,
// the bound passes, or ctx ends. Each recorder tells only of its own
// changes, so there is one waiter a node. The first to hear ends the
// others.
func (o Brokers) awaitChange(ctx context.Context, timeout time.Duration, seen []int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	heard := make(chan struct{}, len(o))
	for k, r := range o {
		go func() {
			_ = r.Await(ctx, timeout, func(c testbroker.Counts) bool { return c.Connected != seen[k] })
			heard <- struct{}{}
		}()
	}
	<-heard
	cancel()
	for range len(o) - 1 {
		<-heard
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// AddTo adds to b the attempts the brokers took at or after t, as the
// broker's side (each at its CONNECT, or its accept when none came), in
// attempt.Order.
func (o Brokers) AddTo(b *report.Builder, t time.Time) {
	type took struct {
		at   time.Time
		a    fault.Attempt
		node uint8
	}
	var out []took
	for k, r := range o {
		for _, a := range r.Attempts() {
			at := a.Connect
			if at.IsZero() {
				at = a.Accept
			}
			if !at.Before(t) {
				out = append(out, took{at, a, uint8(k)})
			}
		}
	}
	slices.SortStableFunc(out, func(x, y took) int { return attempt.Order(x.at, x.a.ClientID, y.at, y.a.ClientID) })
	for _, x := range out {
		b.Add(BrokerRecord(b, x.at, x.a.ClientID, x.a.Outcome, x.node))
	}
}

// BrokerRecord is an attempt a broker (or the proxy in front of it) took
// at at, as the report's record of the broker's side.
func BrokerRecord(b *report.Builder, at time.Time, clientID string, o fault.Outcome, node uint8) attempt.Record {
	dev, _ := attempt.DeviceIndex(clientID)
	return attempt.Record{T: b.Since(at), Lag: -1, Device: int32(dev), Outcome: o, Seen: attempt.Broker, Node: node}
}
