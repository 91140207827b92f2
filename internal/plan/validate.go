package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// Validate reports what makes p a run that cannot start, naming the
// setting: each part on its own, then what the parts ask of each other
// and of this host. Every engine checks it before anything starts.
func (p Plan) Validate() error {
	for _, check := range []func() error{p.validateEngine, p.Fleet.validate, p.Storm.validate, p.validateAdmission, p.validateCluster,
		p.validateTarget, p.validateHost} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateEngine: the virtual engine models an in-process broker and
// devices that do nothing but reconnect.
func (p Plan) validateEngine() error {
	switch p.Engine {
	case Agents, Virtual:
	case Wire:
		return p.validateWire()
	case Proxy:
		return fmt.Errorf("engine %q is devicesim proxy's, whose fleet is whoever connects to it: run agents, wire or virtual", p.Engine)
	default:
		return fmt.Errorf("unknown engine %q (agents, wire or virtual)", p.Engine)
	}
	if p.Engine != Virtual {
		return nil
	}
	if k := slices.IndexFunc(p.Then, func(e Event) bool { return !e.Scenario.Modelled() }); k >= 0 {
		return fmt.Errorf("timeline[%d]: %s breaks the network path, which the virtual engine does not model: the agents engine runs it (engine: agents)",
			k+1, p.Then[k].Scenario)
	}
	switch {
	case p.Policy == PahoDefault:
		return fmt.Errorf("paho-default runs real paho clients: use -engine agents")
	case p.Scenario == ConfigOutage || p.Scenario == Observe:
		return fmt.Errorf("scenario %s needs real devices: use -engine agents", p.Scenario)
	case p.Broker != "" || p.Shard.Count > 0 || p.HasTelemetry() || p.Transport != Mem:
		return fmt.Errorf("-broker, -shard, -telemetry and -transport tcp or tls need real devices: use -engine agents")
	case slices.ContainsFunc(p.Groups, func(g Group) bool { return g.Transport != "" && g.Transport != Mem }):
		return fmt.Errorf("a group on transport tcp or tls needs real devices: use -engine agents")
	case p.Scenario == Failover:
		return fmt.Errorf("failover needs real agents and two brokers (-engine agents)")
	case p.Proxied():
		return fmt.Errorf("the virtual engine models the broker; %s and external brokers need real devices (-engine agents)", p.Scenario)
	}
	return nil
}

// validateWire: the wire engine's devices are the firmware's reconnect
// core and its MQTT session, without the agent's config fetcher or paho.
func (p Plan) validateWire() error {
	switch {
	case slices.ContainsFunc(p.GroupsOrWhole(), func(g Group) bool { return g.Policy == PahoDefault }):
		return fmt.Errorf("paho-default is paho's own reconnect, which only paho clients have: use -engine agents")
	case p.Scenario == ConfigOutage || slices.ContainsFunc(p.Then, func(e Event) bool { return e.Scenario == ConfigOutage }):
		return fmt.Errorf("config-outage needs the agents' config fetchers: use -engine agents")
	}
	return nil
}

func (f Fleet) validate() error {
	switch {
	case f.Devices < 1:
		return fmt.Errorf("devices must be >= 1, got %d", f.Devices)
	case f.KeepAlive < 0 || (f.KeepAlive > 0 && f.KeepAlive < time.Second):
		return fmt.Errorf("keepalive must be at least 1s (MQTT counts it in seconds), got %v", f.KeepAlive)
	case f.PingTimeout < 0:
		return fmt.Errorf("ping timeout must be >= 0, got %v", f.PingTimeout)
	case f.Transport != Mem && f.Transport != TCP && f.Transport != TLS:
		return fmt.Errorf("unknown transport %q (mem, tcp or tls)", f.Transport)
	case f.BootSpread < 0:
		return fmt.Errorf("boot spread must be >= 0, got %v", f.BootSpread)
	case f.Telemetry < 0:
		return fmt.Errorf("telemetry rate must be >= 0, got %g", f.Telemetry)
	case f.MQTT5 && f.Policy == PahoDefault:
		return fmt.Errorf("paho-default is paho's 3.1.1 client: MQTT 5 is the agent's")
	case f.Telemetry > 0 && f.Policy == PahoDefault:
		return fmt.Errorf("telemetry goes through the agent's store-and-forward publisher; paho-default has none")
	case f.Telemetry > 1000:
		return fmt.Errorf("telemetry rate %g per device per second is beyond any device", f.Telemetry)
	case f.Shard.Count < 0 || (f.Shard.Count > 0 && (f.Shard.Index < 0 || f.Shard.Index >= f.Shard.Count)):
		return fmt.Errorf("shard %d/%d: want 0 <= i < n", f.Shard.Index, f.Shard.Count)
	case f.RetryCap < 0 && f.RetryCap != reconnect.RetryForever:
		return fmt.Errorf("retry cap must be >= 0 or forever, got %d", f.RetryCap)
	}
	if err := f.validateGroups(); err != nil {
		return err
	}
	if f.Policy == PahoDefault {
		if f.MaxBackoff < time.Second {
			return fmt.Errorf("max backoff %v is below paho's 1 s start", f.MaxBackoff)
		}
		return nil
	}
	_, err := Shape(f.Policy, f.MaxBackoff)
	return err
}

func (s Storm) validate() error {
	switch {
	case !slices.Contains(Scenarios, s.Scenario):
		return fmt.Errorf("unknown scenario %q (one of %v)", s.Scenario, Scenarios)
	case s.Scenario == Latency && (s.Latency < 0 || s.LatencyJitter < 0 || s.Latency+s.LatencyJitter == 0):
		return fmt.Errorf("latency scenario: -latency %v and -latency-jitter %v must be >= 0, not both 0", s.Latency, s.LatencyJitter)
	case s.AdmitRate < 0 || s.AdmitBurst < 0:
		return fmt.Errorf("admission rate and burst must be >= 0")
	case s.AdmitRate > 0 && s.Admission().Validate() != nil:
		return s.Admission().Validate()
	case s.Scenario.HasOutage() && s.Outage <= 0:
		return fmt.Errorf("outage must be > 0, got %v", s.Outage)
	case s.Scenario == Flapping && s.Flap <= 0:
		return fmt.Errorf("flap must be > 0, got %v", s.Flap)
	case s.Scenario == ConfigOutage && s.RetryAfter < 0:
		return fmt.Errorf("retry-after must be >= 0, got %v", s.RetryAfter)
	case s.Scenario == Observe && s.Duration <= 0:
		return fmt.Errorf("duration must be > 0, got %v", s.Duration)
	case s.Bound < 0:
		return fmt.Errorf("bound must be >= 0, got %v", s.Bound)
	case s.Scenario.Rolls() && s.Gap <= 0:
		return fmt.Errorf("%s: the gap between nodes must be > 0, got %v", s.Scenario, s.Gap)
	case s.BusyCode != 0 && s.BusyCode < 0x80:
		return fmt.Errorf("busy code: an MQTT 5 refusal's code is 0x80 or more (0x89, 0x97, 0x9F), got %#02x", s.BusyCode)
	}
	return s.validateThen()
}

// validateAdmission: the admission lets the fleet in within what a run
// watches (MaxSpan). Slower, the run's recovery bound, three times that,
// wraps round time.Duration.
func (p Plan) validateAdmission() error {
	if s := float64(p.Devices) / p.AdmitRate; p.AdmitRate > 0 && s > MaxSpan.Seconds() {
		return fmt.Errorf("admission rate %g a second lets %d devices in over %.3g h: at most %v", p.AdmitRate, p.Devices, s/3600, MaxSpan)
	}
	return nil
}

// followable reports whether a disruption can be one of a timeline's: it
// breaks the broker (a cluster's nodes, at once or one by one) or the
// path, and ends.
func followable(s Scenario) bool {
	return s.BreaksBroker() || s.BreaksPath() || s == RollingRestart || s.Speaks()
}

// maxTimeline is the most further disruptions a timeline holds.
const maxTimeline = 1000

// validateThen: a timeline's further disruptions come one after another,
// each one the model's broker can make.
func (s Storm) validateThen() error {
	if len(s.Then) == 0 {
		return nil
	}
	if !followable(s.Scenario) {
		return fmt.Errorf("a timeline of several disruptions starts with a disruption that ends (%s is not one): a restart, drop-all, flapping, blackhole, latency, rate limit, drain or busy node", s.Scenario)
	}
	if len(s.Then) > maxTimeline {
		return fmt.Errorf("a timeline of %d disruptions: at most %d", len(s.Then)+1, maxTimeline+1)
	}
	var last time.Duration
	for i, e := range s.Then {
		switch {
		case !followable(e.Scenario):
			return fmt.Errorf("timeline[%d]: %s cannot follow on a timeline; a restart, drop-all, flapping, blackhole, latency, rate limit, drain or busy node can", i+1, e.Scenario)
		case e.Scenario.Rolls() && e.Gap <= 0:
			return fmt.Errorf("timeline[%d]: %s: the gap between nodes must be > 0, got %v", i+1, e.Scenario, e.Gap)
		case e.Gap != 0 && !e.Scenario.Rolls():
			return fmt.Errorf("timeline[%d]: gap %v: a gap is a rolling restart's; %s takes none", i+1, e.Gap, e.Scenario)
		case e.At <= last:
			return fmt.Errorf("timeline[%d]: at %v, not after the disruption before it (%v)", i+1, e.At, last)
		case e.Scenario.HasOutage() && e.Outage <= 0:
			return fmt.Errorf("timeline[%d]: outage must be > 0, got %v", i+1, e.Outage)
		case e.Flap < 0:
			return fmt.Errorf("timeline[%d]: flap must be >= 0, got %v", i+1, e.Flap)
		case e.Scenario == Flapping && e.Flap == 0 && s.Flap <= 0:
			return fmt.Errorf("timeline[%d]: flapping needs a flap > 0 (its own, or the storm's)", i+1)
		case e.Latency < 0 || e.LatencyJitter < 0:
			return fmt.Errorf("timeline[%d]: latency %v and latency jitter %v must be >= 0", i+1, e.Latency, e.LatencyJitter)
		case e.Scenario == Latency && cmp.Or(e.Latency, s.Latency)+cmp.Or(e.LatencyJitter, s.LatencyJitter) <= 0:
			return fmt.Errorf("timeline[%d]: latency needs a latency or jitter > 0 (its own, or the storm's)", i+1)
		}
		last = e.At
	}
	return nil
}

// validateTarget: which scenarios apply to which broker, and what an
// external one needs.
func (p Plan) validateTarget() error {
	external := p.Broker != ""
	switch {
	case external && (p.Scenario == ConfigOutage || p.Scenario == Failover):
		return fmt.Errorf("%s runs on in-process servers: it takes no -broker", p.Scenario)
	case p.Scenario == ConfigOutage && p.Policy == PahoDefault:
		return fmt.Errorf("paho-default is paho's MQTT reconnect; config-outage measures the config fetch: pick a reconnect policy")
	case p.Scenario == Failover && p.Policy == PahoDefault:
		return fmt.Errorf("paho-default has no failover of ours: pick a reconnect policy")
	case p.Scenario == Failover && p.Transport == TLS:
		return fmt.Errorf("failover over TLS needs both brokers under one CA: not yet; use -transport mem or tcp")
	case external && slices.ContainsFunc(p.Timeline(), func(e Event) bool { return e.Scenario.Speaks() }):
		return fmt.Errorf("rate-limited, rolling-drain and busy-node answer in MQTT 5 reason codes, which only the in-process broker sends: " +
			"the fault proxy in front of another broker cannot")
	case external && !p.Proxied() && p.Scenario != Observe && p.Scenario != BootStorm:
		return fmt.Errorf("scenario %s does not apply to an external broker", p.Scenario)
	case p.TLSCert != "" && p.TLSCAKey != "":
		return fmt.Errorf("one client certificate for every device (-cert) or one a device from the CA's key (-ca-key), not both")
	case p.TLSCAKey != "" && p.TLSCA == "":
		return fmt.Errorf("-ca-key issues device certificates from the CA: -ca names its certificate")
	case external && p.Proxied() && slices.ContainsFunc(p.Brokers(), func(u string) bool { return !ProxiableBrokerURL(u) }):
		k := slices.IndexFunc(p.Brokers(), func(u string) bool { return !ProxiableBrokerURL(u) })
		return fmt.Errorf("broker %q: the fault proxy takes tcp://host:port or ssl://host:port (or mqtt://, mqtts://)", p.Brokers()[k])
	case len(p.Peers) > 0 && slices.ContainsFunc(p.Peers, func(u string) bool { return isTLSURL(u) != isTLSURL(p.Broker) }):
		return fmt.Errorf("an external cluster's nodes are all over TLS or all not: %v", p.Brokers())
	case !external && p.Scenario == Observe:
		return fmt.Errorf("observe records an external broker: set its URL (-broker tcp://host:port)")
	case external && p.AdmitRate > 0 && !p.Proxied():
		return fmt.Errorf("an external broker's admission is its own: -admit-rate applies through the fault proxy, in a disruptive scenario")
	case p.Proxied() && p.Policy == PahoDefault:
		return fmt.Errorf("paho-default has no keepalive or dial of ours to route through the fault proxy: pick a reconnect policy")
	case p.Shard.Count > 0 && !external:
		return fmt.Errorf("a shard runs part of a fleet against a shared external broker: set -broker")
	case !p.DisruptAt.IsZero() && (!p.Engine.Real() || p.Scenario == Observe || p.Scenario == BootStorm):
		return fmt.Errorf("-disrupt-at times a disruption the run makes with real agents; %s on the %s engine makes none at a wall-clock instant",
			p.Scenario, p.Engine)
	case p.Shard.Count > 1 && p.Proxied() && p.DisruptAt.IsZero():
		return fmt.Errorf("each of %d shards would strike %s when its own fleet is up, not together: "+
			"name the instant with -disrupt-at (+D after every shard is ready, or a time)", p.Shard.Count, p.Scenario)
	}
	return nil
}

// validateHost: what this host can hold and how fast it can go.
func (p Plan) validateHost() error {
	switch {
	case !(p.TimeScale >= 1 && p.TimeScale <= 1000):
		return fmt.Errorf("time scale must be in [1, 1000], got %g", p.TimeScale)
	case p.Scenario == Observe && p.TimeScale != 1 && p.Hold == nil:
		return fmt.Errorf("observe runs in real time (the disruption is yours): time scale must be 1, got %g", p.TimeScale)
	case p.TCPPerProcess < 0:
		return fmt.Errorf("tcp-per-process must be >= 0, got %d", p.TCPPerProcess)
	case p.Proxied() && p.NeedsChildren() && !p.RemoteAgentsReachProxy():
		return fmt.Errorf("%d devices through the fault proxy to an external TLS broker need %d descriptors in this process (%d each), "+
			"over the %d a run may use here: at most %d (their agents stay beside the proxy: they verify the broker by its own name)",
			p.SliceSize(), p.SliceSize()*p.ProxyDescriptors(), p.ProxyDescriptors(), p.DescriptorBudget(), p.AgentsBesideProxy())
	case p.Proxied() && p.NeedsChildren() && p.SliceSize()*p.ProxyHostDescriptors() > p.DescriptorBudget():
		return fmt.Errorf("%d devices through the fault proxy need %d descriptors in this process (%d each, their agents in "+
			"child processes), over the %d a run may use here: at most %d", p.SliceSize(), p.SliceSize()*p.ProxyHostDescriptors(),
			p.ProxyHostDescriptors(), p.DescriptorBudget(), p.DescriptorBudget()/p.ProxyHostDescriptors())
	case p.NeedsChildren() && p.Exe == "":
		return fmt.Errorf("%d TCP devices need more descriptors than this process may use (%d), "+
			"so their agents run in child processes: set Plan.Exe to the devicesim binary", p.SliceSize(), p.DescriptorBudget())
	}
	return nil
}

// validateGroups: a mixed fleet's groups add up to it, each on a policy a
// run can name.
func (f Fleet) validateGroups() error {
	if len(f.Groups) == 0 {
		return nil
	}
	total := 0
	for i, g := range f.GroupsOrWhole() {
		if err := g.validate(f); err != nil {
			return fmt.Errorf("group %d (%s): %w", i, g.Name, err)
		}
		total += g.Devices
	}
	if total != f.Devices {
		return fmt.Errorf("the groups' devices add up to %d, not the fleet's %d", total, f.Devices)
	}
	return nil
}

// validate checks a resolved group of fleet f: what the fleet's own
// settings must be, and one transport for every group, since the
// in-process broker listens on one.
func (g Group) validate(f Fleet) error {
	switch {
	case g.Devices < 1:
		return fmt.Errorf("devices must be >= 1, got %d", g.Devices)
	case g.Policy == PahoDefault || f.Policy == PahoDefault:
		return fmt.Errorf("paho-default is not a policy a mixed fleet's agents run")
	case *g.RetryCap < 0 && *g.RetryCap != reconnect.RetryForever:
		return fmt.Errorf("retry cap must be >= 0 or forever, got %d", *g.RetryCap)
	case g.KeepAlive < 0 || (g.KeepAlive > 0 && g.KeepAlive < time.Second):
		return fmt.Errorf("keepalive must be at least 1s (MQTT counts it in seconds), got %v", g.KeepAlive)
	case g.PingTimeout < 0 || g.BootSpread < 0:
		return fmt.Errorf("ping timeout and boot spread must be >= 0, got %v and %v", g.PingTimeout, g.BootSpread)
	case *g.Telemetry < 0 || *g.Telemetry > 1000:
		return fmt.Errorf("telemetry rate must be 0 to 1000 per device per second, got %g", *g.Telemetry)
	case g.Transport != f.Transport:
		return fmt.Errorf("transport %s beside the fleet's %s: the in-process broker listens on one transport; give every group the same", g.Transport, f.Transport)
	}
	_, err := Shape(g.Policy, g.MaxBackoff)
	return err
}
