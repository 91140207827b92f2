// Package attempt is the one record every engine of the simulator emits:
// a connection attempt by one device, as one side saw it. The report is
// built from these records, events.csv holds them, and merging shards reads
// them back, all through this package's codec:
//
//	plan -> engine -> attempt.Record -> Sink (the report's builder, events.csv) -> judgement -> report
package attempt

import (
	"strconv"
	"time"

	"github.com/herdguard/herdguard/fault"
)

// Side is whose view a Record is.
type Side uint8

const (
	// Fleet is the attempt as the device made it: every dial, refused ones
	// included, which no broker sees.
	Fleet Side = iota
	// Broker is the attempt as the broker (or the fault proxy in front of
	// it) took it: what the broker was asked for.
	Broker
)

func (s Side) String() string {
	if s == Broker {
		return "broker"
	}
	return "fleet"
}

// Record is one connection attempt. Tens of millions make one large run,
// so it is small (32 bytes) and a plain value.
type Record struct {
	T       time.Duration // unscaled, since the disruption
	Lag     time.Duration // unscaled: how late the device left against its schedule; negative: unknown
	Device  int32         // the fleet's index (client ID dev-<Device>); -1: a client ID not of that form
	Code    int32         // the CONNACK code, or the HTTP status of a config fetch
	Outcome fault.Outcome
	Side    Side
	Node    uint8 // which node of a cluster took it (Broker side); 0 with one broker
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
