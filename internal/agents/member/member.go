// Package member is one device of a fleet of real agents. A member is a
// device.Agent with its store-and-forward publisher, or a bare paho client
// (the paho-default baseline). It is wired to the fleet's broker
// endpoints, dialer, timing and the log it tells every attempt and
// session to. A fleet builds one member a device from the Config its
// members share; the member does the rest on its own goroutines.
package member

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
)

// Member is one simulated device. Start and Stop are each called once,
// from the goroutine that runs the fleet; the device itself runs on
// goroutines of its own between them.
type Member interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Telemetered is a member whose devices send telemetry: its counts so far
// (publisher.Stats, summed over its devices), and the end of its readings.
// Both are called from the fleet's goroutine while the devices run.
type Telemetered interface {
	Stats() publisher.Stats
	StopTelemetry()
}

// Log is told every attempt a member makes and every session it loses, as
// the device sees them: one attempt in flight a device at a time, settled
// by End. Its methods are called from the members' goroutines at once and
// must not block (observer.DeviceLog is one).
type Log interface {
	// lag: after the device's own schedule; negative: unknown
	Begin(at time.Time, device int, lag time.Duration)
	// at: when the device heard the outcome (its CONNACK, or the
	// failure); node: the cluster's node it went to (0 with one broker)
	End(at time.Time, device int, o fault.Outcome, code, node int)
	Lost(at time.Time, device int)
}

// Config is what a fleet's members share. A fleet whose devices differ
// (their endpoints in a cluster, their timing in a mixed fleet) sets
// those fields before building each member, since New copies it. Every
// duration is already scaled to the run. The zero Config is not usable:
// Broker is required (a nil Log hears nothing).
type Config struct {
	// Broker is the device's endpoint, and Failover the ones it moves on to
	// in turn (device.Config's).
	Broker   string
	Failover []string
	// NodeOf, if set, is which node of a cluster an endpoint's URL reaches,
	// for the Log (nil: node 0).
	NodeOf func(endpoint string) int
	// Dial, if set, is device i's dialer (nil: the agent's own TCP or TLS);
	// TLS, if set, what device i presents and trusts when Dial is nil.
	Dial func(i int) device.DialFunc
	TLS  func(i int) (*tls.Config, error)
	// PlainTCP says Dial is LoopbackDialer's, plain TCP from a loopback
	// source address: an engine with sockets of its own may dial the URL
	// itself.
	PlainTCP bool
	Metrics  func(i int) device.Metrics // nil: none
	// Timing is the agents' reconnect timing (a mixed fleet's devices point
	// at their group's).
	Timing                                 *device.Timing
	Protocol                               device.Protocol
	KeepAlive, PingTimeout, ConnectTimeout time.Duration
	Seed                                   uint64
	Log                                    Log
	Paho                                   Paho
	Telemetry                              Telemetry
}

// Paho is what the paho-default baseline's clients take: paho's own
// reconnect, capped at MaxInterval, and the window each client's first
// connect falls in (0: every client at power-on).
type Paho struct {
	MaxInterval, BootSpread time.Duration
}

// Telemetry, when Every > 0, makes each agent publish a small reading that
// often through a store-and-forward publisher with these settings.
type Telemetry struct {
	Every          time.Duration
	Retry          *reconnect.Policy
	DrainRate      float64
	PublishTimeout time.Duration
}
