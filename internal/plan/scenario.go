package plan

import (
	"fmt"
	"slices"
	"strconv"
)

// Scenario is the disruption a run makes, and so what it needs: real
// agents or the model, the fault proxy, real time.
type Scenario string

const (
	// BootStorm: every device powers on at once.
	BootStorm Scenario = "boot-storm"
	// BrokerRestart: the broker goes away for Outage, then comes back.
	BrokerRestart Scenario = "broker-restart"
	// ThrottledRestart: as broker-restart, then admits AdmitRate
	// connects/s.
	ThrottledRestart Scenario = "throttled-restart"
	// DropAll: every session is dropped at once. The broker stays up.
	DropAll Scenario = "drop-all"
	// Flapping: for Outage, every session is dropped Flap after its
	// CONNACK.
	Flapping Scenario = "flapping"
	// Blackhole: for Outage the path goes silent without a reset, as with a
	// NAT or load balancer that forgets its connections. Devices notice
	// only through their keepalive. Connections opened meanwhile hang.
	Blackhole Scenario = "blackhole"
	// Latency: every session is dropped at once, and for Outage every byte
	// each way is Latency plus U[0, LatencyJitter) late: the fleet comes
	// back through a slow path.
	Latency Scenario = "latency"
	// Failover: the fleet runs on a primary broker with a standby as its
	// failover endpoint; the primary dies for good, and the fleet moves.
	Failover Scenario = "failover"
	// RollingRestart: a cluster of Target.Nodes brokers restarted one node
	// at a time, Storm.Gap apart. Each node is down for Outage. Every
	// device lists every node, its home first, and fails over to the next.
	RollingRestart Scenario = "rolling-restart"
	// ConfigOutage: the config server answers 503, then 429, with
	// Retry-After for Outage.
	ConfigOutage Scenario = "config-outage"
	// Observe: an external broker the user disrupts. The run only records.
	Observe Scenario = "observe"
	// RateLimited: every session is dropped. From then on the broker admits
	// AdmitRate connects a second (100 if unset) and refuses the rest at
	// once. It refuses an MQTT 5 device with AdmitCode (0x9F connection
	// rate exceeded) and a 3.1.1 device with CONNACK 3. It models AWS IoT's
	// and EMQX's connect-rate limits.
	RateLimited Scenario = "rate-limited"
	// RollingDrain: a cluster's nodes one at a time, Gap apart. Each ends
	// its sessions with an MQTT 5 DISCONNECT 0x9C naming the next node as
	// its Server Reference. Its 3.1.1 sessions are closed. It is then down
	// for Outage, as in a maintenance that hands its devices on.
	RollingDrain Scenario = "rolling-drain"
	// BusyNode: one node (Node, the first if unset) is over its capacity
	// for Outage. It ends its sessions with DISCONNECT BusyCode (0x89
	// server busy). It refuses every connect with that code (3.1.1: closed,
	// CONNACK 3). Its devices fail over to the others.
	BusyNode Scenario = "busy-node"
)

// Scenarios lists the scenarios a run can name.
var Scenarios = []Scenario{BootStorm, BrokerRestart, ThrottledRestart, DropAll, Flapping, Blackhole, Latency, Failover, RollingRestart,
	ConfigOutage, Observe, RateLimited, RollingDrain, BusyNode}

// ParseReasonCode reads an MQTT 5 refusal's reason code, written in hex
// (0x9F) or decimal: 0x80 or more.
func ParseReasonCode(s string) (byte, error) {
	n, err := strconv.ParseUint(s, 0, 8)
	if err != nil || n < 0x80 {
		return 0, fmt.Errorf("want an MQTT 5 refusal's reason code, 0x80 or more (0x89, 0x97, 0x9F), got %s", s)
	}
	return byte(n), nil
}

// ParseScenario reads a scenario's name.
func ParseScenario(s string) (Scenario, error) {
	if sc := Scenario(s); slices.Contains(Scenarios, sc) {
		return sc, nil
	}
	return "", fmt.Errorf("unknown scenario %q (one of %v)", s, Scenarios)
}

// BreaksPath reports whether the scenario breaks the network path rather
// than the broker: the fault proxy stands in the devices' path even in
// front of the in-process broker.
func (s Scenario) BreaksPath() bool { return s == Blackhole || s == Latency }

// Has reports whether sc is the storm's disruption, or one of the later
// ones on its timeline.
func (s Storm) Has(sc Scenario) bool {
	return s.Scenario == sc || slices.ContainsFunc(s.Then, func(e Event) bool { return e.Scenario == sc })
}

// BreaksPath reports whether a disruption of the storm's timeline breaks
// the network path: the fault proxy stands in the devices' path from the
// start.
func (s Storm) BreaksPath() bool {
	return s.Scenario.BreaksPath() || slices.ContainsFunc(s.Then, func(e Event) bool { return e.Scenario.BreaksPath() })
}

// BreaksABroker reports whether a disruption of the storm's timeline
// breaks a broker (a cluster's nodes one by one included): against an
// external broker, the fault proxy makes it.
func (s Storm) BreaksABroker() bool {
	breaks := func(sc Scenario) bool { return sc.BreaksBroker() || sc == RollingRestart }
	return breaks(s.Scenario) || slices.ContainsFunc(s.Then, func(e Event) bool { return breaks(e.Scenario) })
}

// BreaksBroker reports whether the scenario is one the fault proxy can
// make of any broker: it drops sessions or refuses connections.
func (s Scenario) BreaksBroker() bool {
	return s == DropAll || s == BrokerRestart || s == ThrottledRestart || s == Flapping
}

// Modelled reports whether the virtual engine's broker model can run it;
// the rest need real devices. Real agents run every scenario.
func (s Scenario) Modelled() bool {
	return s == BootStorm || s == RollingRestart || s.BreaksBroker() || s.Speaks()
}

// Speaks reports whether the scenario's broker answers in MQTT's own
// words (reason codes, Server References), which only the in-process
// broker can: the fault proxy in front of another cannot.
func (s Scenario) Speaks() bool { return s == RateLimited || s == RollingDrain || s == BusyNode }

// Rolls reports whether the scenario strikes a cluster's nodes one at a
// time, Gap apart: a rolling restart or a rolling drain.
func (s Scenario) Rolls() bool { return s == RollingRestart || s == RollingDrain }

// HasOutage reports whether the scenario lasts for Storm.Outage.
func (s Scenario) HasOutage() bool {
	return s != BootStorm && s != DropAll && s != Observe && s != RateLimited
}

// Boots reports whether the scenario measures the fleet's power-on, so
// that the boot itself is the disruption.
func (s Scenario) Boots() bool { return s == BootStorm }

// MarshalText and UnmarshalText make a Scenario a flag (flag.TextVar) and
// a JSON string that only takes the names a run knows.
func (s Scenario) MarshalText() ([]byte, error) { return []byte(s), nil }

func (s *Scenario) UnmarshalText(b []byte) error {
	sc, err := ParseScenario(string(b))
	if err == nil {
		*s = sc
	}
	return err
}

// MarshalText and UnmarshalText: as Scenario's.
func (e Engine) MarshalText() ([]byte, error) { return []byte(e), nil }

func (e *Engine) UnmarshalText(b []byte) error {
	switch v := Engine(b); v {
	case Agents, Wire, Virtual, Proxy: // proxy: a report of devicesim proxy's, read back
		*e = v
		return nil
	}
	return fmt.Errorf("unknown engine %q (agents, wire or virtual)", b)
}

// MarshalText and UnmarshalText: as Scenario's.
func (t Transport) MarshalText() ([]byte, error) { return []byte(t), nil }

func (t *Transport) UnmarshalText(b []byte) error {
	switch v := Transport(b); v {
	case Mem, TCP, TLS:
		*t = v
		return nil
	}
	return fmt.Errorf("unknown transport %q (mem, tcp or tls)", b)
}
