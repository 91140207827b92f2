// Package observer is where a run of real agents watches its fleet from.
// It watches either the devices' own log of every attempt and session
// (DeviceLog) or the recorders of the in-process brokers (Brokers). The
// run waits on these to know when its fleet is up. It reads them
// afterwards as Sightings, in an order the scheduler does not decide. A
// child process's device log streams to its parent's through the attempt
// codec (DeviceLog.StreamTo, Follow).
package observer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
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

// Sighting is one connection attempt where it was seen (a device log, a
// broker's recorder, the proxy's, the config server's). It is stamped
// with wall-clock time and client ID. The report turns it into an
// attempt.Record. The zero Sighting is no attempt.
type Sighting struct {
	At       time.Time
	ClientID string
	Outcome  fault.Outcome
	Code     int // CONNACK return code, or HTTP status for config requests
	// Lag is how late the device started it against its own schedule (the
	// end of its wait): what the host adds. Negative: not known.
	Lag  time.Duration
	Node uint8 // the cluster node that took it (a broker's sighting)
	// Heard is when the device heard the outcome: its CONNACK, or the
	// failure (a device's sighting); zero while pending or unknown.
	Heard time.Time
}

// InOrder sorts sightings by time and, at one instant, by device index.
// Client IDs not of the fleet's form come last, by name. One device's
// sightings keep the order they were recorded in. In virtual time many
// attempts share an instant, and this rule, not the scheduler, orders
// them. A seed thus gives the same events.csv on every run.
func InOrder(as []Sighting) []Sighting {
	if !slices.IsSortedFunc(as, attemptOrder) { // a wall-clock run's usually is: one pass, no sort
		slices.SortStableFunc(as, attemptOrder)
	}
	return as
}

// attemptOrder is InOrder's rule.
func attemptOrder(a, b Sighting) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	da, oka := attempt.DeviceIndex(a.ClientID)
	db, okb := attempt.DeviceIndex(b.ClientID)
	switch {
	case oka && okb:
		return cmp.Compare(da, db)
	case oka != okb:
		if oka {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ClientID, b.ClientID)
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

// Since returns the attempts the brokers took at or after t (each at its
// CONNECT, or its accept when none came), in InOrder's order.
func (o Brokers) Since(t time.Time) []Sighting {
	var out []Sighting
	for k, r := range o {
		for _, a := range r.Attempts() {
			at := a.Connect
			if at.IsZero() {
				at = a.Accept
			}
			if !at.Before(t) {
				out = append(out, Sighting{At: at, ClientID: a.ClientID, Outcome: a.Outcome, Code: int(a.Code), Node: uint8(k)})
			}
		}
	}
	return InOrder(out)
}
