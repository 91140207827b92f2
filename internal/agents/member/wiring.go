package member

import (
	"cmp"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// HostAdmitLimit is roughly the connects per second this 2-core host served
// to real paho clients on the in-memory transport (make scale: 100,000 in
// 19.7 s); a scaled rate beyond it measures the host, not the fleet.
const HostAdmitLimit = 5000

// minKeepAlive is the shortest keepalive a run gives its agents: MQTT
// counts it in whole seconds, and the broker drops a session silent for
// 1.5 of them, which a loaded host reaches below two.
const minKeepAlive = 2 * time.Second

// Wiring is how a plan's members are wired: what they share, and what
// differs from device to device. It is a plain value; TimingOf's timings
// are read-only and shared by the fleet's agents.
type Wiring struct {
	// Config is what every member shares; its Broker, Dial, Log and Metrics
	// are the fleet's to set.
	Config Config
	// TimingOf is device i's reconnect timing: its group's in a mixed
	// fleet (nil for paho-default, which has paho's).
	TimingOf func(i int) *device.Timing
	// BootSpread is the window the devices' first connects fall in.
	BootSpread time.Duration
}

// Wire is the members' wiring for plan p, validated and at the time scale
// the run allows: every duration the agents use is scaled with the run (the
// keepalive down to a floor, in whole seconds), and their policies run as
// fast. warn hears of a pace this host cannot keep.
func Wire(p plan.Plan, warn func(format string, args ...any)) (Wiring, error) {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / p.TimeScale) }
	w := Wiring{Config: Config{Seed: p.Seed, ConnectTimeout: scale(plan.ConnectTimeout), Paho: Paho{MaxInterval: p.MaxBackoff},
		KeepAlive:   max(minKeepAlive, scale(cmp.Or(p.KeepAlive, 30*time.Second)).Round(time.Second)),
		PingTimeout: max(100*time.Millisecond, scale(cmp.Or(p.PingTimeout, 10*time.Second)))}}
	w.BootSpread = bootSpread(p, w.Config.KeepAlive, warn)
	w.Config.Paho.BootSpread = w.BootSpread
	if p.Scenario == plan.BootStorm && p.Policy == plan.PahoDefault {
		w.Config.Paho.BootSpread = 0 // paho has no boot spread: every device dials at power-on
	}
	if p.Policy == plan.PahoDefault {
		return w, nil
	}
	var err error
	if w.TimingOf, err = groupTimings(p, w.BootSpread); err != nil {
		return w, err
	}
	w.Config.Timing = w.TimingOf(0)
	if p.Telemetry > 0 { // each device's publisher retries on its group's policy, as its reconnects
		w.Config.Telemetry = Telemetry{Every: scale(time.Duration(float64(time.Second) / p.Telemetry)), Retry: w.Config.Timing.Policy,
			DrainRate: 50 * p.TimeScale, PublishTimeout: max(time.Second, scale(30*time.Second))}
	}
	return w, nil
}

// For is w's Config for device i: its group's timing.
func (w Wiring) For(i int) Config {
	c := w.Config
	if w.TimingOf != nil {
		c.Timing = w.TimingOf(i)
		if c.Telemetry.Retry != nil {
			c.Telemetry.Retry = c.Timing.Policy
		}
	}
	return c
}

// groupTimings is each device's timing, the agents' defaults scaled: one
// for the fleet, or in a mixed fleet its group's, which differs in its
// policy alone.
func groupTimings(p plan.Plan, bootSpread time.Duration) (func(i int) *device.Timing, error) {
	groups := p.GroupsOrWhole()
	timings := make([]*device.Timing, len(groups))
	first := make([]int, len(groups)) // each group's first device index
	lo := 0
	for k, g := range groups {
		shape, _ := plan.Shape(g.Policy, g.MaxBackoff)
		policy, err := reconnect.New(Scaled{Shape: shape, Scale: p.TimeScale}, reconnect.Limits{MaxRetries: p.RetryCap})
		if err != nil {
			return nil, err
		}
		t := device.DefaultTiming()
		t.Policy, t.BootSpread = policy, bootSpread
		t.StableAfter = time.Duration(float64(time.Minute) / p.TimeScale)
		t.CredentialsWait = time.Duration(float64(t.CredentialsWait) / p.TimeScale)
		t.Guard.Window = time.Duration(float64(t.Guard.Window) / p.TimeScale)
		timings[k], first[k] = &t, lo
		lo += g.Devices
	}
	return func(i int) *device.Timing {
		k := len(first) - 1
		for k > 0 && i < first[k] {
			k--
		}
		return timings[k]
	}, nil
}

// bootSpread is the window the agents' first connects fall in, scaled.
// Outside boot-storm the fleet's boot is setup, not measurement: it is
// paced at half of what this host serves, or paho's connect timeouts turn
// the setup itself into a storm.
func bootSpread(p plan.Plan, keepAlive time.Duration, warn func(format string, args ...any)) time.Duration {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / p.TimeScale) }
	spread := scale(p.BootWindow())
	hostPaced := time.Duration(float64(p.Devices) / (HostAdmitLimit / 2) * float64(time.Second)) // the whole fleet, shards included
	switch {
	case p.Storm.Has(plan.Blackhole):
		// Sessions that began at unrelated times ping at unrelated times:
		// spread them over a keepalive, or the fleet's pings (and the
		// moments it notices the silence) would be in step by construction.
		return max(hostPaced, keepAlive)
	case p.Scenario != plan.BootStorm:
		// A child's parent may ask for longer (a black hole's keepalive).
		return max(hostPaced, 100*time.Millisecond, scale(p.BootSpread))
	case spread < hostPaced && warn != nil:
		warn("%d devices booting within %v is beyond the ~%d connects/s this host serves: lower -time-scale",
			p.Shard.Size(p.Devices), spread, HostAdmitLimit)
	}
	return spread
}
