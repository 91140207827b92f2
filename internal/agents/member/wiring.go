package member

import (
	"cmp"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// minKeepAlive is the shortest keepalive a run gives its agents: MQTT
// counts it in whole seconds, and the broker drops a session silent for
// 1.5 of them, which a loaded host reaches below two.
const minKeepAlive = 2 * time.Second

// Wiring is how a plan's members are wired: what they share, and what
// differs from group to group of a mixed fleet (their timing, keepalive and
// telemetry). It is a plain value, read-only once made; its timings are
// shared by the fleet's agents.
type Wiring struct {
	// Config is what every member shares; its Broker, Dial, Log and Metrics
	// are the fleet's to set, and For sets the rest for each device.
	Config Config
	// BootSpread is the longest window any group's first connects fall in:
	// how long a fleet may take to be up. KeepAlive is the longest
	// keepalive: how long a fleet may take to notice a silent path.
	BootSpread, KeepAlive time.Duration
	groups                []groupWiring
}

// groupWiring is what a group's devices have of their own.
type groupWiring struct {
	first                  int            // the group's first device index
	timing                 *device.Timing // nil: paho-default's, paho's own
	protocol               device.Protocol
	keepAlive, pingTimeout time.Duration
	telemetry              Telemetry
}

// Wire is the members' wiring for plan p, validated and at the time scale
// the run allows. Every duration the agents use is scaled with the run:
// the keepalive down to a floor, in whole seconds. Their policies run as
// fast. warn hears of a pace this host cannot keep.
func Wire(p plan.Plan, warn func(format string, args ...any)) (Wiring, error) {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / p.TimeScale) }
	w := Wiring{Config: Config{Seed: p.Seed, ConnectTimeout: scale(plan.ConnectTimeout), Paho: Paho{MaxInterval: p.MaxBackoff}}}
	lo := 0
	for _, g := range p.GroupsOrWhole() {
		gw := groupWiring{first: lo, protocol: g.Protocol(), keepAlive: max(minKeepAlive, scale(cmp.Or(g.KeepAlive, 30*time.Second)).Round(time.Second)),
			pingTimeout: max(100*time.Millisecond, scale(cmp.Or(g.PingTimeout, 10*time.Second)))}
		spread := bootSpread(p, g, gw.keepAlive, warn)
		w.BootSpread, w.KeepAlive = max(w.BootSpread, spread), max(w.KeepAlive, gw.keepAlive)
		if g.Policy != plan.PahoDefault {
			var err error
			if gw.timing, err = timing(p, g, spread); err != nil {
				return w, err
			}
		}
		// each device's publisher retries on its group's policy, as its reconnects
		if rate := *g.Telemetry; rate > 0 {
			gw.telemetry = Telemetry{Every: scale(time.Duration(float64(time.Second) / rate)), Retry: gw.timing.Policy,
				DrainRate: 50 * p.TimeScale, PublishTimeout: max(time.Second, scale(30*time.Second))}
		}
		w.groups = append(w.groups, gw)
		lo += g.Devices
	}
	w.Config = w.For(0)
	w.Config.Paho.BootSpread = w.BootSpread
	if p.Scenario == plan.BootStorm && p.Policy == plan.PahoDefault {
		w.Config.Paho.BootSpread = 0 // paho has no boot spread: every device dials at power-on
	}
	return w, nil
}

// group is device i's group's wiring.
func (w Wiring) group(i int) *groupWiring {
	k := len(w.groups) - 1
	for k > 0 && i < w.groups[k].first {
		k--
	}
	return &w.groups[k]
}

// TimingOf is device i's reconnect timing: its group's (nil for
// paho-default, which has paho's).
func (w Wiring) TimingOf(i int) *device.Timing { return w.group(i).timing }

// For is w's Config for device i: its group's timing, keepalive and
// telemetry.
func (w Wiring) For(i int) Config {
	c, g := w.Config, w.group(i)
	c.Timing, c.Protocol, c.KeepAlive, c.PingTimeout, c.Telemetry = g.timing, g.protocol, g.keepAlive, g.pingTimeout, g.telemetry
	return c
}

// timing is a group's, the agents' defaults scaled: its policy with its
// retry cap, and its boot spread.
func timing(p plan.Plan, g plan.Group, bootSpread time.Duration) (*device.Timing, error) {
	shape, _ := plan.Shape(g.Policy, g.MaxBackoff)
	policy, err := reconnect.New(Scaled{Shape: shape, Scale: p.TimeScale}, reconnect.Limits{MaxRetries: *g.RetryCap})
	if err != nil {
		return nil, err
	}
	t := device.DefaultTiming()
	t.Policy, t.BootSpread, t.IgnoreServerSignals = policy, bootSpread, *g.IgnoreServerSignals
	if guard := plan.Guard(g.Policy); guard != nil {
		t.Guard = guard
	}
	t.StableAfter = time.Duration(float64(time.Minute) / p.TimeScale)
	t.CredentialsWait = time.Duration(float64(t.CredentialsWait) / p.TimeScale)
	t.Guard.Window = time.Duration(float64(t.Guard.Window) / p.TimeScale)
	return &t, nil
}

// bootSpread is the window a group's first connects fall in, scaled.
// Outside boot-storm the fleet's boot is setup, not measurement. It is
// paced at half of what the host serves (plan.Host.Connects). Otherwise
// paho's connect timeouts turn the setup itself into a storm.
func bootSpread(p plan.Plan, g plan.Group, keepAlive time.Duration, warn func(format string, args ...any)) time.Duration {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / p.TimeScale) }
	spread := scale(g.BootSpreadUsed())
	// the whole fleet, shards included
	hostPaced := time.Duration(float64(p.Devices) / (p.ServedConnects() / 2) * float64(time.Second))
	switch {
	case p.Storm.Has(plan.Blackhole):
		// Sessions that began at unrelated times ping at unrelated times.
		// The fleet's sessions are spread over a keepalive for that reason.
		// Otherwise the fleet's pings (and the moments it notices the silence)
		// would be in step by construction.
		return max(hostPaced, keepAlive)
	case p.Scenario != plan.BootStorm:
		// A child's parent may ask for longer (a black hole's keepalive).
		return max(hostPaced, 100*time.Millisecond, scale(g.BootSpread))
	case spread < hostPaced && warn != nil:
		warn("%d devices booting within %v is beyond the ~%.0f connects/s this host serves (-host-connects): lower -time-scale",
			p.Shard.Size(p.Devices), spread, p.ServedConnects())
	}
	return spread
}
