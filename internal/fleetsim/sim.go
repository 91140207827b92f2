// Package fleetsim launches a fleet of real device agents against the
// in-process test broker, disrupts the broker, and measures from the
// broker's side whether the fleet came back spread out or in waves.
package fleetsim

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// Scenarios a run can name.
const (
	BootStorm        = "boot-storm"        // every device powers on at once
	BrokerRestart    = "broker-restart"    // the broker goes away for Outage, then comes back
	ThrottledRestart = "throttled-restart" // as broker-restart, then admits AdmitRate connects/s
	DropAll          = "drop-all"          // every session is dropped at once; the broker stays up
	Flapping         = "flapping"          // for Outage, every session is dropped Flap after its CONNACK
	ConfigOutage     = "config-outage"     // the config server answers 503, then 429, with Retry-After for Outage
	Observe          = "observe"           // an external broker the user disrupts; the run only records
)

// Scenarios lists the scenarios a run can name.
var Scenarios = []string{BootStorm, BrokerRestart, ThrottledRestart, DropAll, Flapping, Blackhole, Latency, FailoverScenario, ConfigOutage, Observe}

// PahoDefault names the baseline: paho's built-in reconnect, unjittered.
const PahoDefault = "paho-default"

// hostTimerPrecision is how finely a loaded host keeps thousands of agents'
// timers: no burst narrower than this (times the time scale, unscaled) can
// be told from the host starting attempts in batches.
const hostTimerPrecision = 2 * time.Millisecond

// HostAdmitLimit is roughly the connects per second this 2-core host served
// to real paho clients on the in-memory transport (make scale: 100,000 in
// 19.7 s); a scaled admission rate beyond it measures the host, not the fleet.
const HostAdmitLimit = 5000

// Transports a run can name.
const (
	Mem = "mem" // in-process pipes: no descriptors, 100,000 devices fit
	TCP = "tcp" // loopback TCP: two descriptors per device in one process
	TLS = "tls" // mutual TLS over loopback TCP, a client certificate a device
)

// Config is one run. Durations are real-world (unscaled) time.
type Config struct {
	// Engine is Agents (real agents, the default) or Virtual.
	Engine     string
	Devices    int
	Scenario   string
	Policy     string
	MaxBackoff time.Duration
	RetryCap   int // reconnect.RetryForever or a count
	// Outage is how long the disruption lasts: the broker's absence
	// (restarts), the flapping window, or the config server's fault window.
	Outage time.Duration
	// Flap is how long each session lasts while the broker flaps.
	Flap time.Duration
	// Latency and LatencyJitter are what the latency scenario adds to every
	// byte each way: Latency plus U[0, LatencyJitter).
	Latency, LatencyJitter time.Duration
	// KeepAlive and PingTimeout are the agents' (device.Config): how soon
	// they notice a silent path (0: 30 s and 10 s).
	KeepAlive, PingTimeout time.Duration
	// BootSpread is the window over which each device's first connect
	// falls at power-on (boot-storm): an operator who knows what the broker
	// admits spreads boots over at least devices / rate (0: the agents' own
	// 10 s).
	BootSpread time.Duration
	// RetryAfter is the hint the config server sends in config-outage; 0
	// sends the time left in the fault window, as a maintenance page does,
	// which names one instant to every device that asks.
	RetryAfter time.Duration
	// RetryAfterJitter is the devices' fetchers' bound on the jitter they
	// add to a hint (device.FetcherConfig.RetryAfterJitter: 0 the firmware's
	// default, negative none).
	RetryAfterJitter time.Duration
	// Transport is Mem or TCP for the in-process broker.
	Transport string
	// Broker, if set, is an external broker's URL (tcp://host:port). The
	// run puts the fault proxy in front of it for the disruptive scenarios
	// and measures what it let through; observe leaves the disruption to
	// the user, and boot-storm needs none.
	Broker string
	// TLSCA, TLSCert and TLSKey are PEM files for an external broker at
	// ssl://: the CA that signs it (empty: the system's roots) and one
	// client certificate every device presents (mutual TLS), if any.
	// TLSCAKey, instead of TLSCert, is the CA's key: each device gets a
	// certificate of its own, named by its client ID.
	TLSCA, TLSCert, TLSKey, TLSCAKey string
	// Duration bounds an observe run: how long to wait for a disruption.
	Duration time.Duration
	// Shard runs only the devices whose index i has i % Shard.Count ==
	// Shard.Index (every device when Count is 0).
	Shard Shard
	// Telemetry, if > 0, makes every device publish that many QoS 1
	// messages per (unscaled) second through a store-and-forward publisher.
	Telemetry float64
	// TimeScale runs every duration that many times faster; reports are in
	// unscaled seconds.
	TimeScale float64
	Seed      uint64
	// Admission, if AdmitRate > 0: the broker admits AdmitRate connects per
	// (unscaled) second with bursts of AdmitBurst, over the limit behaving as
	// AdmitMode. throttled-restart applies it when the broker returns (100/s
	// if unset); other scenarios from the disruption on.
	AdmitRate  float64
	AdmitBurst int
	AdmitMode  fault.AdmissionMode
	// Bound, if > 0, is how long (unscaled) after the disruption a run
	// waits for its fleet before ending unrecovered; 0 sets one from the
	// outage, the cap and the admission rate.
	Bound time.Duration
	// failFast, if set, ends a virtual run as soon as it fails a grid
	// cell's bounds for certain.
	failFast *failFast
	// Events, if set, receives events.csv as the run makes its attempts,
	// and the report keeps none (a million-device run makes tens of
	// millions); nil keeps them for Report.WriteFiles.
	Events io.Writer
	// Metrics, if set, is told of every agent's attempts and sessions as
	// they happen, and of the disruption (real agents in this process).
	Metrics LiveMetrics
	// Progress, if set, receives a line a second while the fleet recovers.
	Progress io.Writer
	// Warn, if set, receives warnings about the run's own validity.
	Warn io.Writer
	// Ready, if set, is called once the whole fleet is up, before the
	// disruption (observe: when the run starts waiting for one).
	Ready func()
	// Exe is the devicesim binary, for fleets that run in child processes
	// (TCP beyond one process's descriptors).
	Exe string
	// TCPPerProcess is how many TCP devices' agents this process holds,
	// beside the broker or the fault proxy, before they move to child
	// processes, TCPPerProcess (or 5,000) each; 0 means what 20,000
	// descriptors allow (9,500 beside the broker; beside the proxy 6,333,
	// or 4,750 with the in-process broker's side too).
	TCPPerProcess int
	// Hold, if set, makes this run a child of another: start the devices
	// against Broker, then read "t0 <unix ns>" from Hold (the parent sends
	// it once its fleet has recovered) and report from that instant.
	Hold io.Reader
	// Stream, with Hold, is told every device event as it happens, for a
	// parent whose fault proxy the devices go through (see follow).
	Stream io.Writer
}

// LiveMetrics follows a run as it goes (livemetrics.Fleet serves it to
// Prometheus).
type LiveMetrics interface {
	Start(devices int)
	Device(i int) device.Metrics
	Disrupted(t time.Time)
}

// Shard is a slice of a fleet: index Index of Count.
type Shard struct{ Index, Count int }

// ParseShard reads "i/n".
func ParseShard(s string) (Shard, error) {
	var sh Shard
	if _, err := fmt.Sscanf(s, "%d/%d", &sh.Index, &sh.Count); err != nil || sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count {
		return Shard{}, fmt.Errorf("shard %q: want i/n with 0 <= i < n", s)
	}
	return sh, nil
}

func (s Shard) String() string {
	if s.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// ids lists the device indexes this shard runs.
func (s Shard) ids(devices int) []int {
	var ids []int
	for i := 0; i < devices; i++ {
		if s.Count == 0 || i%s.Count == s.Index {
			ids = append(ids, i)
		}
	}
	return ids
}

// Default is the embedded default run: 2,000 devices on the in-memory
// transport, a 30 s broker restart, the IoTCore policy, 4x time scale: what
// this 2-core host serves with another CPU-bound job beside it, within the
// half-second line, and still in under 30 s. At 10x a 2,000-device restart
// is noticed about 0.5 s late on a quiet machine; at 5x, beside a busy core,
// the formula's rounds (2,000 attempts in 0.2 s of real time) left up to
// 0.53 s late in one run of ten.
func Default() Config {
	return Config{Engine: Agents, Devices: 2000, Scenario: BrokerRestart, Policy: "iotcore", MaxBackoff: 32 * time.Second,
		RetryCap: reconnect.RetryForever, Outage: 30 * time.Second, Flap: 2 * time.Second,
		Latency: 300 * time.Millisecond, LatencyJitter: 200 * time.Millisecond, KeepAlive: 30 * time.Second, PingTimeout: 10 * time.Second,
		Transport: Mem, Duration: 10 * time.Minute, TimeScale: 4, Seed: 1}
}

// maxTCPDevices is how many TCP devices one process holds with both ends
// (two descriptors each) under this machine's 20,000-descriptor limit.
const maxTCPDevices = 9500

// Validate reports what makes c a run that cannot start, naming the
// setting; Run checks it first.
func (c Config) Validate() error {
	external := c.Broker != ""
	if c.Engine != Agents && c.Engine != Virtual {
		return fmt.Errorf("unknown engine %q (agents or virtual)", c.Engine)
	}
	if c.Engine == Virtual {
		if err := c.validateVirtual(); err != nil {
			return err
		}
	}
	switch {
	case c.Devices < 1:
		return fmt.Errorf("devices must be >= 1, got %d", c.Devices)
	case !slices.Contains(Scenarios, c.Scenario):
		return fmt.Errorf("unknown scenario %q (one of %v)", c.Scenario, Scenarios)
	case external && (c.Scenario == ConfigOutage || c.Scenario == FailoverScenario):
		return fmt.Errorf("%s runs on in-process servers: it takes no -broker", c.Scenario)
	case c.Scenario == FailoverScenario && c.Engine == Virtual:
		return fmt.Errorf("failover needs real agents and two brokers (-engine agents)")
	case c.Scenario == FailoverScenario && c.Policy == PahoDefault:
		return fmt.Errorf("paho-default has no failover of ours: pick a reconnect policy")
	case external && !c.proxied() && c.Scenario != Observe && c.Scenario != BootStorm:
		return fmt.Errorf("scenario %s does not apply to an external broker", c.Scenario)
	case c.TLSCert != "" && c.TLSCAKey != "":
		return fmt.Errorf("one client certificate for every device (-cert) or one a device from the CA's key (-ca-key), not both")
	case c.TLSCAKey != "" && c.TLSCA == "":
		return fmt.Errorf("-ca-key issues device certificates from the CA: -ca names its certificate")
	case external && c.proxied() && !proxiableBrokerURL(c.Broker):
		return fmt.Errorf("broker %q: the fault proxy takes tcp://host:port or ssl://host:port (or mqtt://, mqtts://)", c.Broker)
	case !external && c.Scenario == Observe:
		return fmt.Errorf("observe records an external broker: set its URL (-broker tcp://host:port)")
	case external && c.AdmitRate > 0 && !c.proxied():
		return fmt.Errorf("an external broker's admission is its own: -admit-rate applies through the fault proxy, in a disruptive scenario")
	case c.proxied() && c.Engine == Virtual:
		return fmt.Errorf("the virtual engine models the broker; %s and external brokers need real devices (-engine agents)", c.Scenario)
	case c.proxied() && c.Policy == PahoDefault:
		return fmt.Errorf("paho-default has no keepalive or dial of ours to route through the fault proxy: pick a reconnect policy")
	case c.Scenario == Latency && (c.Latency < 0 || c.LatencyJitter < 0 || c.Latency+c.LatencyJitter == 0):
		return fmt.Errorf("latency scenario: -latency %v and -latency-jitter %v must be >= 0, not both 0", c.Latency, c.LatencyJitter)
	case c.KeepAlive < 0 || (c.KeepAlive > 0 && c.KeepAlive < time.Second):
		return fmt.Errorf("keepalive must be at least 1s (MQTT counts it in seconds), got %v", c.KeepAlive)
	case c.PingTimeout < 0:
		return fmt.Errorf("ping timeout must be >= 0, got %v", c.PingTimeout)
	case c.Scenario == Observe && c.TimeScale != 1 && c.Hold == nil:
		return fmt.Errorf("observe runs in real time (the disruption is yours): time scale must be 1, got %g", c.TimeScale)
	case c.Transport != Mem && c.Transport != TCP && c.Transport != TLS:
		return fmt.Errorf("unknown transport %q (mem, tcp or tls)", c.Transport)
	case c.Transport == TLS && c.Scenario == FailoverScenario:
		return fmt.Errorf("failover over TLS needs both brokers under one CA: not yet; use -transport mem or tcp")
	case c.proxied() && c.needsChildren() && !c.remoteAgentsReachProxy():
		return fmt.Errorf("%d devices through the fault proxy to an external TLS broker need %d descriptors in this process (%d each), "+
			"over the %d a run may use here: at most %d (their agents stay beside the proxy: they verify the broker by its own name)",
			c.Devices, c.Devices*c.proxyDescriptors(), c.proxyDescriptors(), descriptorBudget, c.agentsBesideProxy())
	case c.proxied() && c.needsChildren() && c.Devices*c.proxyHostDescriptors() > descriptorBudget:
		return fmt.Errorf("%d devices through the fault proxy need %d descriptors in this process (%d each, their agents in "+
			"child processes), over the %d a run may use here: at most %d", c.Devices, c.Devices*c.proxyHostDescriptors(),
			c.proxyHostDescriptors(), descriptorBudget, descriptorBudget/c.proxyHostDescriptors())
	case c.needsChildren() && c.Exe == "":
		return fmt.Errorf("%d TCP devices need more descriptors than this process may use (limit ~20,000), "+
			"so their agents run in child processes: set Config.Exe to the devicesim binary", c.Devices)
	case c.AdmitRate < 0 || c.AdmitBurst < 0:
		return fmt.Errorf("admission rate and burst must be >= 0")
	case !(c.TimeScale >= 1 && c.TimeScale <= 1000):
		return fmt.Errorf("time scale must be in [1, 1000], got %g", c.TimeScale)
	case c.Scenario != BootStorm && c.Scenario != DropAll && c.Scenario != Observe && c.Outage <= 0:
		return fmt.Errorf("outage must be > 0, got %v", c.Outage)
	case c.Scenario == Flapping && c.Flap <= 0:
		return fmt.Errorf("flap must be > 0, got %v", c.Flap)
	case c.Scenario == ConfigOutage && c.RetryAfter < 0:
		return fmt.Errorf("retry-after must be >= 0, got %v", c.RetryAfter)
	case c.Scenario == Observe && c.Duration <= 0:
		return fmt.Errorf("duration must be > 0, got %v", c.Duration)
	case c.BootSpread < 0:
		return fmt.Errorf("boot spread must be >= 0, got %v", c.BootSpread)
	case c.Bound < 0:
		return fmt.Errorf("bound must be >= 0, got %v", c.Bound)
	case c.TCPPerProcess < 0:
		return fmt.Errorf("tcp-per-process must be >= 0, got %d", c.TCPPerProcess)
	case c.Telemetry < 0:
		return fmt.Errorf("telemetry rate must be >= 0, got %g", c.Telemetry)
	case c.Telemetry > 0 && c.Policy == PahoDefault:
		return fmt.Errorf("telemetry goes through the agent's store-and-forward publisher; paho-default has none")
	case c.Telemetry > 1000:
		return fmt.Errorf("telemetry rate %g per device per second is beyond any device", c.Telemetry)
	case c.Shard.Count < 0 || (c.Shard.Count > 0 && (c.Shard.Index < 0 || c.Shard.Index >= c.Shard.Count)):
		return fmt.Errorf("shard %d/%d: want 0 <= i < n", c.Shard.Index, c.Shard.Count)
	case c.Shard.Count > 0 && !external:
		return fmt.Errorf("a shard runs part of a fleet against a shared external broker: set -broker")
	case c.RetryCap < 0 && c.RetryCap != reconnect.RetryForever:
		return fmt.Errorf("retry cap must be >= 0 or forever, got %d", c.RetryCap)
	}
	if c.Policy == PahoDefault {
		if c.MaxBackoff < time.Second {
			return fmt.Errorf("max backoff %v is below paho's 1 s start", c.MaxBackoff)
		}
		return nil
	}
	_, err := Shape(c.Policy, c.MaxBackoff)
	return err
}

// run is one run's moving parts.
type run struct {
	c         Config
	timing    device.Timing
	broker    *testbroker.Broker // nil against an external broker
	configs   *configserver.Server
	obs       observer
	devlog    *deviceLog // every attempt the devices made here (or, through the proxy, in children)
	ids       []int
	members   []member
	fetchers  []*device.Fetcher
	admission fault.Admission
	// a TCP fleet too large for one process runs its agents in children
	children     []*child
	childDir     string
	childReports []*Report
	virtual      *virtualFleet                    // the virtual engine's fleet, for its report
	proxy        *faultproxy.Proxy                // in the devices' path, when the scenario breaks the path or the broker is external
	standby      *testbroker.Broker               // failover: where the fleet goes when the primary (broker) dies
	handshakeCPU time.Duration                    // TLS: the broker's CPU for one handshake, measured at setup
	externalTLS  func(i int) (*tls.Config, error) // an external broker at ssl://: what device i presents and trusts
	cleanups     []func()
}

func (r *run) scale(d time.Duration) time.Duration { return time.Duration(float64(d) / r.c.TimeScale) }
func (r *run) unscale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * r.c.TimeScale)
}

func (r *run) warn(format string, args ...any) {
	if r.c.Warn != nil {
		fmt.Fprintf(r.c.Warn, "warning: "+format+"\n", args...)
	}
}

// Run executes one run.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Engine == Virtual {
		return runVirtual(ctx, c)
	}
	if c.Scenario == ConfigOutage && c.Policy == PahoDefault {
		return nil, fmt.Errorf("paho-default is paho's MQTT reconnect; config-outage measures the config fetch: pick a reconnect policy")
	}
	r := &run{c: c, ids: c.Shard.ids(c.Devices)}
	if c.Policy == PahoDefault && c.TimeScale != 1 {
		r.warn("paho-default runs on paho's own timers (a constant 1 s start), which cannot be scaled: running it at time scale 1")
		r.c.TimeScale = 1
	}
	if c.Scenario == ConfigOutage && c.TimeScale != 1 {
		r.warn("Retry-After travels in whole seconds, which a time scale cannot shrink: running config-outage at time scale 1")
		r.c.TimeScale = 1
	}
	if c.Scenario == ThrottledRestart && c.AdmitRate == 0 {
		r.c.AdmitRate = 100
	}
	start := time.Now()
	defer r.close()
	defer r.killChildren() // before close: children started by a setup that then failed too
	if err := r.setup(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := memInUse()
	bootStart := time.Now()
	for _, m := range r.members {
		if err := m.start(runCtx); err != nil {
			return nil, err
		}
	}
	defer r.stopMembers(cancel)
	if r.c.Hold != nil {
		return r.held(ctx, start, before)
	}
	n := len(r.ids)
	var memPerDevice float64
	t0 := bootStart
	if r.c.Scenario != BootStorm {
		if err := r.obs.await(ctx, r.timing.BootSpread+time.Minute, func(k int) bool { return k == n }); err != nil {
			return nil, fmt.Errorf("fleet did not finish booting: %w", err)
		}
		memPerDevice = float64(memInUse()-before) / float64(n) / 1024
		t0 = time.Now() // observe watches from here, Ready is its disruption
		if r.c.Ready != nil {
			r.c.Ready()
		}
		if r.c.Scenario != Observe {
			t0 = time.Now()
		}
	}
	if r.c.Metrics != nil {
		r.c.Metrics.Disrupted(t0)
	}
	d, err := r.disrupt(ctx, t0)
	if err != nil {
		return nil, err
	}
	stopProgress := progress(r.c.Progress, r.obs, n, r.c.TimeScale, d.t0)
	var recoverErr error
	if r.c.Scenario == ConfigOutage {
		recoverErr = d.wait()
	} else {
		recoverErr = r.obs.await(ctx, r.recoverBound(), func(k int) bool { return k == n })
	}
	stopProgress()
	r.devlog.awaitSettled(ctx, r.scale(connectTimeout)+time.Second)
	d.watched(recoverErr == nil, r.c.MaxBackoff, r.c.TimeScale)
	var drainErr error
	if r.c.Telemetry > 0 {
		drainErr = r.drainTelemetry(ctx)
	}
	if len(r.children) > 0 {
		if r.childReports, err = r.releaseChildren(d.t0); err != nil {
			return nil, err
		}
	}
	rep, err := r.report(d)
	if err != nil {
		return nil, err
	}
	if r.c.Telemetry > 0 {
		rep.Telemetry = r.telemetry()
	}
	if memPerDevice == 0 {
		memPerDevice = float64(memInUse()-before) / float64(n) / 1024
	}
	for _, cr := range r.childReports { // the agents' side, in their processes
		memPerDevice += cr.Host.MemoryPerDeviceKB * float64(cr.Devices) / float64(n)
	}
	rep.Host.WallS, rep.Host.MemoryPerDeviceKB = time.Since(start).Seconds(), memPerDevice
	rep.Host.AgentProcesses = len(r.childReports)
	recovered := rep.recovered
	rep.RecoveryJSON.AllRecovered = recoverErr == nil && recovered == n
	if ctx.Err() != nil {
		return rep, fmt.Errorf("interrupted with %d of %d devices back: %w", recovered, n, ctx.Err())
	}
	if !rep.RecoveryJSON.AllRecovered {
		return rep, fmt.Errorf("%w: %d of %d within %v", ErrNotRecovered, recovered, n, r.recoverBound())
	}
	if drainErr != nil {
		return rep, drainErr
	}
	if t := rep.Telemetry; t != nil && t.Lost != 0 {
		return rep, fmt.Errorf("%w: %d telemetry messages", ErrLost, t.Lost)
	}
	return rep, nil
}

// bootSpread is the run's boot spread, the agents' own 10 s unless set.
func (c Config) bootSpread() time.Duration {
	if c.BootSpread > 0 {
		return c.BootSpread
	}
	return device.DefaultTiming().BootSpread
}

// minKeepAlive is the shortest keepalive a run gives its agents: MQTT
// counts it in whole seconds, and the broker drops a session silent for
// 1.5 of them, which a loaded host reaches below two.
const minKeepAlive = 2 * time.Second

// keepAlive is the agents' keepalive: Config.KeepAlive (30 s) scaled, in
// whole seconds, at least minKeepAlive (so above 15x the default is longer
// than 30 s unscaled; the blackhole scenario warns).
func (r *run) keepAlive() time.Duration {
	return max(minKeepAlive, r.scale(cmp.Or(r.c.KeepAlive, 30*time.Second)).Round(time.Second))
}

// pingTimeout is the agents' ping timeout, Config.PingTimeout (10 s)
// scaled.
func (r *run) pingTimeout() time.Duration {
	return max(100*time.Millisecond, r.scale(cmp.Or(r.c.PingTimeout, 10*time.Second)))
}

// recoverBound is how long a run waits for its fleet to come back.
func (r *run) recoverBound() time.Duration {
	if r.c.Bound > 0 {
		return r.scale(r.c.Bound)
	}
	bound := r.scale(r.c.Outage+20*r.c.MaxBackoff) + time.Minute
	if r.c.AdmitRate > 0 {
		bound += time.Duration(3 * float64(len(r.ids)) / r.admission.Rate * float64(time.Second))
	}
	return bound
}

// setup makes the broker (or the observer of an external one), the config
// server if the scenario needs it, and the members.
func (r *run) setup() error {
	c := r.c
	mc := memberConfig{seed: c.Seed, keepAlive: r.keepAlive(), pingTimeout: r.pingTimeout(), connectTimeout: r.scale(connectTimeout),
		pahoMaxInterval: c.MaxBackoff}
	if c.Policy != PahoDefault {
		shape, _ := Shape(c.Policy, c.MaxBackoff)
		policy, err := reconnect.New(scaled{shape, c.TimeScale}, reconnect.Limits{MaxRetries: c.RetryCap})
		if err != nil {
			return err
		}
		// Every duration the agents use is scaled with the run (the
		// keepalive down to a floor: see keepAlive).
		r.timing = device.DefaultTiming()
		r.timing.Policy = policy
		r.timing.StableAfter = r.scale(time.Minute)
		r.timing.CredentialsWait = r.scale(r.timing.CredentialsWait)
		r.timing.Guard.Window = r.scale(r.timing.Guard.Window)
		mc.timing = &r.timing
		if c.Telemetry > 0 {
			mc.telemetry = r.scale(time.Duration(float64(time.Second) / c.Telemetry))
			mc.pubRetry, mc.drainRate, mc.pubTimeout = policy, 50*c.TimeScale, max(time.Second, r.scale(30*time.Second))
		}
	}
	r.timing.BootSpread = r.scale(c.bootSpread())
	// Outside boot-storm the fleet's boot is setup, not measurement: pace it
	// at half of what this host serves, or paho's connect timeouts turn the
	// setup itself into a storm.
	hostPaced := time.Duration(float64(c.Devices) / (HostAdmitLimit / 2) * float64(time.Second)) // the whole fleet, shards included
	switch {
	case c.Scenario == Blackhole:
		// Sessions that began at unrelated times ping at unrelated times:
		// spread them over a keepalive, or the fleet's pings (and the
		// moments it notices the silence) would be in step by construction.
		r.timing.BootSpread = max(hostPaced, r.keepAlive())
	case c.Scenario != BootStorm:
		// A child's parent may ask for longer (a black hole's keepalive).
		r.timing.BootSpread = max(hostPaced, 100*time.Millisecond, r.scale(c.BootSpread))
	case r.timing.BootSpread < hostPaced:
		r.warn("%d devices booting within %v is beyond the ~%d connects/s this host serves: lower -time-scale",
			len(r.ids), r.timing.BootSpread, HostAdmitLimit)
	}
	mc.pahoBootSpread = r.timing.BootSpread
	if c.Scenario == BootStorm && c.Policy == PahoDefault {
		mc.pahoBootSpread = 0 // paho has no boot spread: every device dials at power-on
	}
	if c.AdmitRate > 0 {
		r.admission = fault.Admission{Rate: c.AdmitRate * c.TimeScale, Burst: max(c.AdmitBurst, 1), Mode: c.AdmitMode}
		if r.admission.Rate > HostAdmitLimit {
			r.warn("the scaled admission rate %.0f/s is beyond the ~%d/s this host serves: lower -time-scale",
				r.admission.Rate, HostAdmitLimit)
		}
	}
	r.devlog = newDeviceLog(c.Devices)
	if c.Stream != nil {
		st := newEventStream(c.Stream)
		r.devlog.stream = st
		r.cleanups = append(r.cleanups, st.close)
	}
	mc.log = r.devlog
	if c.Metrics != nil {
		c.Metrics.Start(c.Devices)
		mc.metrics = c.Metrics.Device
	}
	if c.Broker != "" {
		r.obs, mc.broker = deviceObserver{r.devlog}, c.Broker
		tlsCfg, err := c.externalTLS()
		if err != nil {
			return err
		}
		r.externalTLS = tlsCfg
		if u, err := url.Parse(c.Broker); err == nil && u.Hostname() == "127.0.0.1" {
			mc.dial = loopbackDialer
			if tlsCfg != nil {
				mc.dial = func(i int) device.DialFunc { return tlsDialerFor(i, tlsCfg) }
			}
		} else {
			mc.tls = tlsCfg
		}
	} else {
		bc := testbroker.Config{Transport: testbroker.Memory}
		switch c.Transport {
		case TCP:
			bc.Transport = testbroker.TCP
		case TLS:
			bc.Transport, bc.MutualTLS = testbroker.TLS, true
		}
		b, err := testbroker.New(bc)
		if err != nil {
			return err
		}
		r.broker, r.obs, mc.broker = b, brokerObserver{b.Recorder()}, b.URL()
		switch c.Transport {
		case Mem:
			mc.dial = func(int) device.DialFunc { return b.DialContext }
		case TCP:
			mc.dial = loopbackDialer
		case TLS:
			if r.handshakeCPU, err = b.HandshakeCPU(200); err != nil && !errors.Is(err, testbroker.ErrNoThreadCPU) {
				return err
			}
			mc.dial = func(i int) device.DialFunc { return loopbackTLSDialer(i, b) }
		}
		if c.Scenario == BootStorm && c.AdmitRate > 0 {
			if err := b.SetAdmission(r.admission); err != nil {
				return err
			}
		}
	}
	if c.Scenario == FailoverScenario {
		if err := r.setupStandby(&mc); err != nil {
			return err
		}
	}
	if c.proxied() {
		if err := r.setupProxy(&mc); err != nil {
			return err
		}
		if unscaled := r.unscale(r.keepAlive()); c.Scenario == Blackhole && unscaled != cmp.Or(c.KeepAlive, 30*time.Second) {
			r.warn("MQTT counts keepalive in whole seconds: at this time scale the agents' keepalive is %v unscaled", unscaled)
		}
	}
	if c.Scenario == ConfigOutage {
		if err := r.setupConfigs(); err != nil {
			return err
		}
	}
	if c.needsChildren() {
		return r.spawnChildren(mc.broker)
	}
	for _, i := range r.ids {
		if c.Policy == PahoDefault {
			r.members = append(r.members, newPahoMember(i, mc))
			continue
		}
		m, err := newAgentMember(i, mc)
		if err != nil {
			return err
		}
		r.members = append(r.members, m)
	}
	return nil
}

func (r *run) stopMembers(cancel context.CancelFunc) {
	stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	cancel()
	var wg sync.WaitGroup
	for _, m := range r.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = m.stop(stopCtx)
		}()
	}
	wg.Wait()
}

func (r *run) close() {
	for _, f := range r.cleanups {
		f()
	}
	if r.proxy != nil {
		_ = r.proxy.Close()
	}
	if r.configs != nil {
		r.configs.Close()
	}
	if r.broker != nil {
		r.broker.Close()
	}
	if r.standby != nil {
		r.standby.Close()
	}
}

// disruption is what a scenario did: when it began, when the broker was
// back (if it went away), and for config-outage how to wait for the end.
type disruption struct {
	t0, returned time.Time
	wait         func() error
	// until is when the run stopped watching for attempts: when every
	// device was back, plus a cap of quiet (none was left to retry), or
	// when the wait for them ended.
	until time.Time
}

// watched sets until from now: recovered, no device retries for at least a
// cap (unscaled) after the last one came back.
func (d *disruption) watched(recovered bool, maxBackoff time.Duration, timeScale float64) {
	d.until = time.Now()
	if recovered {
		d.until = d.until.Add(time.Duration(float64(maxBackoff) / timeScale))
	}
}

func (r *run) disrupt(ctx context.Context, t0 time.Time) (disruption, error) {
	d := disruption{t0: t0, returned: t0}
	if r.c.Scenario != BootStorm { // a boot storm's attempts are the boot's
		r.devlog.markDisruption()
	}
	if r.proxy != nil {
		r.proxy.Recorder().Reset()
	}
	if r.broker != nil && r.c.Scenario != BootStorm {
		r.broker.Recorder().ResetConnections() // telemetry counts the whole run
	}
	if (r.broker != nil || r.proxy != nil) && r.c.Scenario != BootStorm && r.c.AdmitRate > 0 && r.c.Scenario != ThrottledRestart {
		if err := r.setAdmission(); err != nil {
			return d, err
		}
	}
	br := r.breaker()
	switch r.c.Scenario {
	case BrokerRestart, ThrottledRestart:
		br.BeginOutage()
		if err := reconnect.Sleep(ctx, nil, r.scale(r.c.Outage)); err != nil {
			return d, err
		}
		if r.c.Scenario == ThrottledRestart {
			if err := r.setAdmission(); err != nil {
				return d, err
			}
		}
		if err := br.EndOutage(); err != nil {
			return d, err
		}
		d.returned = time.Now()
	case DropAll:
		br.DropAll()
	case FailoverScenario:
		r.standby.Recorder().ResetConnections()
		br.BeginOutage() // for good: the fleet's survivor is the standby
	case Flapping:
		if err := br.SetFlapping(r.scale(r.c.Flap)); err != nil {
			return d, err
		}
		br.DropAll()
		if err := reconnect.Sleep(ctx, nil, r.scale(r.c.Outage)); err != nil {
			return d, err
		}
		if err := br.SetFlapping(0); err != nil {
			return d, err
		}
		d.returned = time.Now()
		// Sessions admitted just before the end are still dropped on
		// schedule: recovery is measured once those drops are done.
		if err := reconnect.Sleep(ctx, nil, r.scale(r.c.Flap)+10*time.Millisecond); err != nil {
			return d, err
		}
	case Blackhole, Latency:
		if err := r.breakPath(ctx); err != nil {
			return d, err
		}
		if r.c.Scenario == Blackhole {
			d.returned = time.Now()
		}
	case ConfigOutage:
		return r.configOutage(ctx, t0)
	case Observe:
		lost, err := r.obs.awaitLoss(ctx, t0, r.c.Duration)
		if err != nil {
			return d, fmt.Errorf("no disruption within %v: %w", r.c.Duration, err)
		}
		d.t0, d.returned = lost, lost
	}
	if r.proxy != nil || r.standby != nil {
		// The proxy has cut every session, or the primary has died; the
		// devices hear of it a moment later (their keepalive, in a black
		// hole, which its end cuts short). Recovery is counted from the
		// devices' side, which still says "connected" until then: wait for
		// all, or the wait for recovery would end before it began.
		return d, r.devlog.awaitNoticed(ctx, t0, len(r.ids), r.scale(cmp.Or(r.c.KeepAlive, 30*time.Second))+time.Minute)
	}
	return d, nil
}

// report builds the report from what the devices did and, with the
// in-process broker, what it saw, from the disruption on.
func (r *run) report(d disruption) (*Report, error) {
	c := r.c
	rep := &Report{Scenario: c.Scenario, Policy: c.Policy, Engine: Agents, Transport: c.Transport, Devices: len(r.ids),
		Seed: c.Seed, TimeScale: c.TimeScale, DisruptionUnixMS: d.t0.UnixMilli(), Shard: c.Shard.String()}
	fleetAt, brokerAt := "devices", "broker"
	switch {
	case c.Scenario == ConfigOutage:
		fleetAt, brokerAt = "config-server", "" // every request reaches it
	case r.broker == nil && r.proxy != nil:
		rep.Transport, brokerAt = "external", "proxy"
	case r.broker == nil:
		rep.Transport, brokerAt = "external", ""
	case r.standby != nil:
		brokerAt = "standby broker"
	}
	b := newBuilder(c.Devices, d.t0, d.returned, c.TimeScale, fleetAt, brokerAt, c.Events)
	// The proxy knows a connection reached the broker, not whether the
	// broker accepted it: recovery is the devices' word for it then.
	b.fleetAdmits = brokerAt == "proxy"
	b.minWidth = time.Duration(c.TimeScale * float64(hostTimerPrecision))
	b.watchedUntil(d.until)
	switch {
	case c.Scenario == ConfigOutage:
		for _, a := range r.configAttempts(d.t0) {
			b.device(a)
		}
	case len(r.childReports) > 0 && r.proxy == nil: // the agents ran in child processes, reporting from the same t0
		for _, cr := range r.childReports {
			for _, e := range cr.events {
				b.Add(e)
			}
		}
	default:
		for _, a := range r.devlog.since(d.t0) {
			b.device(a)
		}
		switch c.Scenario {
		case BootStorm, Observe: // observe's t0 is the first loss noticed
		case Blackhole: // noticed through keepalive: the fleet's figure, not the host's lateness
			rep.Noticed = noticedOf(r.devlog.noticed(d.t0), c.TimeScale, c.Outage)
		default:
			b.noticed(r.devlog.noticed(d.t0))
		}
	}
	switch {
	case brokerAt == "proxy":
		for _, a := range proxySaw(r.proxy, d.t0) {
			b.brokerSaw(a)
		}
	case brokerAt != "":
		seen := r.broker
		if r.standby != nil {
			seen = r.standby // the survivor: where the fleet arrived
		}
		for _, a := range (brokerObserver{seen.Recorder()}).since(d.t0) {
			b.brokerSaw(a)
		}
	}
	if err := b.fill(rep); err != nil {
		return nil, err
	}
	rep.Limit, rep.BrokerBackS = c.limit(len(r.ids)), b.back.Seconds()
	if c.Transport == TLS && r.broker != nil {
		rep.TLS = tlsCost(r.handshakeCPU, rep.Broker)
	}
	if r.proxy != nil {
		k := r.proxy.Recorder().Counts()
		rep.Proxy = &ProxyCounts{Admitted: k.Accepted, Refused: k.Refused, Throttled: k.Throttled, Dropped: k.Dropped,
			Unreachable: k.Unreachable, Overflowed: k.Overflowed}
	}
	return rep, nil
}

// limit is the admission limit a run applies and the recovery it allows
// devices at best, or nil.
func (c Config) limit(devices int) *Limit {
	if c.AdmitRate <= 0 {
		return nil
	}
	return &Limit{AdmitRate: c.AdmitRate, IdealRecoveryS: float64(devices) / c.AdmitRate}
}

// ErrLost is wrapped when telemetry went missing.
var ErrLost = errors.New("fleetsim: telemetry lost")

// ErrNotRecovered is wrapped when a run ends with devices still offline.
var ErrNotRecovered = errors.New("fleetsim: not every device recovered")

func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// progress prints connected/total and attempts per second once a second.
func progress(w io.Writer, obs observer, total int, scale float64, t0 time.Time) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := obs.attempted()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				n := obs.attempted()
				fmt.Fprintf(w, "t=%5.0fs  connected %d/%d  attempts/s %d\n",
					time.Since(t0).Seconds()*scale, obs.connected(), total, int(float64(n-last)/scale))
				last = n
			}
		}
	}()
	return func() { close(done); <-finished }
}
