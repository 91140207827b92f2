// Package attempt is the one record every engine of the simulator emits:
// a connection attempt by one device, as one side saw it. The report is
// built from these records, and events.csv holds them. Merging shards
// reads them back. A child process running part of a fleet's agents
// streams its devices' records to its parent. All of these go through
// this package's codec:
//
//	plan -> engine -> attempt.Record -> Sink (the report's builder, events.csv)
//	     -> judgement -> report
package attempt

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
)

// Witness is who saw a Record: the device that made the attempt, or the
// broker that took it.
type Witness uint8

const (
	// Fleet is the attempt as the device made it: every dial, refused ones
	// included, which no broker sees.
	Fleet Witness = iota
	// Broker is the attempt as the broker (or the fault proxy in front of
	// it) took it: what the broker was asked for.
	Broker
)

func (s Witness) String() string {
	if s == Broker {
		return "broker"
	}
	return "fleet"
}

// Kind is what a Record tells. events.csv holds Attempts alone. A live
// stream of a device log (a child process's, to the parent that runs the
// storm) also carries the moments the parent must know as they happen.
// Those are an attempt begun, whose outcome is not known yet, and a
// session lost.
type Kind uint8

const (
	// Attempt is a connection attempt and its outcome: every row of
	// events.csv.
	Attempt Kind = iota
	// Begun is an attempt just started (Outcome Pending): the next Attempt
	// record of the same device is its outcome, at when the device heard it.
	Begun
	// Lost is the end of a device's session, at T, when the device noticed
	// it; Outcome, Code and Lag say nothing.
	Lost
)

var kindNames = [...]string{Attempt: "attempt", Begun: "begun", Lost: "lost"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// parseKind reads a Kind's name.
func parseKind(s string) (Kind, bool) {
	for k, name := range kindNames {
		if name == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// Record is one connection attempt (or, on a live stream, one of the other
// Kinds). Tens of millions make one large run, so it is small (32 bytes)
// and a plain value; its zero Kind is Attempt.
type Record struct {
	// T is unscaled time since the disruption; on a live stream, where the
	// disruption is not known yet, since the Unix epoch, and an Attempt's
	// is when its device heard the outcome (its Begun record has the start).
	T       time.Duration
	Lag     time.Duration // unscaled: how late the device left against its schedule; <0: unknown
	Device  int32         // the fleet's index (client ID dev-<Device>); -1: any other client ID
	Code    int32         // the CONNACK code, or the HTTP status of a config fetch
	Outcome fault.Outcome
	Seen    Witness
	Node    uint8 // which node of a cluster took it (Broker side); 0 with one broker
	Kind    Kind
}

// Sink takes an engine's records as they are made, in order of T. Add must
// not block for long: a virtual engine calls it millions of times a second.
type Sink interface {
	Add(Record)
}

// ClientID is the client ID of the fleet's device dev: dev-<dev>.
func ClientID(dev int) string { return string(AppendClientID(nil, int32(dev))) }

// AppendClientID appends dev's client ID to b, "?" for a device not of the
// fleet (dev < 0).
func AppendClientID(b []byte, dev int32) []byte {
	if dev < 0 {
		return append(b, '?')
	}
	return strconv.AppendInt(append(b, "dev-"...), int64(dev), 10)
}

// DeviceIndex is the fleet's index in a client ID of the form dev-<index>;
// -1 and false for any other.
func DeviceIndex(clientID string) (int, bool) {
	if len(clientID) < 5 || clientID[:4] != "dev-" {
		return -1, false
	}
	i, err := strconv.Atoi(clientID[4:])
	if err != nil || i < 0 || i > 1<<31-1 {
		return -1, false
	}
	return i, true
}

// Order orders two attempts seen at instants and client IDs: by time, then
// at one instant by device index, client IDs not of the fleet's form last,
// by name. In virtual time many attempts share an instant, and this rule,
// not the scheduler, orders them. A seed thus gives the same events.csv on
// every run.
func Order(at time.Time, id string, bt time.Time, bid string) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	da, oka := DeviceIndex(id)
	db, okb := DeviceIndex(bid)
	switch {
	case oka && okb:
		return cmp.Compare(da, db)
	case oka != okb:
		if oka {
			return -1
		}
		return 1
	}
	return strings.Compare(id, bid)
}
