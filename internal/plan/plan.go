// Package plan is what a storm run is asked to do, checked once before
// anything starts. It says which fleet reconnects how (Fleet) and what is
// done to its broker (Storm). It says which broker (Target), on what host
// and engine (Host), and where the run reports as it goes (Outputs). A Plan
// is plain data. Every engine takes one. A run whose agents live in child
// processes hands them the Plan itself.
package plan

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/reconnect"
)

// Engine is what runs a plan's fleet.
type Engine string

const (
	// Agents runs real device.Agents, paho clients and the in-process
	// broker, in (scaled) real time.
	Agents Engine = "agents"
	// Wire runs each device as the firmware's reconnect core on a real
	// connection that speaks MQTT itself (package wire), against the same
	// brokers, proxies and disruptions as Agents: a real session at the
	// cost of a socket, a few event loops for a process's devices.
	Wire Engine = "wire"
	// Virtual runs each device's reconnect core against a model of the
	// broker, in virtual time: millions of devices in one process.
	Virtual Engine = "virtual"
	// Proxy: someone else's fleet, stormed through the fault proxy
	// (devicesim proxy); the plan's fleet is not run.
	Proxy Engine = "proxy"
)

// Real reports whether e runs real devices in real time (the agents, the
// wire engine): what a host's timers, descriptors and time scale bind.
func (e Engine) Real() bool { return e == Agents || e == Wire }

// Transport is how the in-process broker's devices reach it.
type Transport string

const (
	Mem Transport = "mem" // in-process pipes: no descriptors, 100,000 devices fit
	TCP Transport = "tcp" // loopback TCP: two descriptors per device in one process
	TLS Transport = "tls" // mutual TLS over loopback TCP, a client certificate a device
)

// ConnectTimeout is how long a device waits for a CONNACK: the agents'
// (which a run scales) and the model's.
const ConnectTimeout = 10 * time.Second

// PahoDefault names the baseline policy: paho's built-in reconnect,
// unjittered, on paho's own timers.
const PahoDefault = "paho-default"

// Plan is one run. Its parts are embedded, so a field reads as p.Devices or
// p.Outage; durations are real-world (unscaled) time. A Plan is a value:
// copy it to vary it.
type Plan struct {
	Fleet
	Storm
	Target
	Host
	Outputs
}

// Fleet is who reconnects, and how.
type Fleet struct {
	Devices    int
	Policy     string // a name from PolicyNames
	MaxBackoff time.Duration
	RetryCap   int // reconnect.RetryForever or a count
	// KeepAlive and PingTimeout are the agents' (device.Config): how soon
	// they notice a silent path (0: 30 s and 10 s).
	KeepAlive, PingTimeout time.Duration
	// BootSpread is the window over which each device's first connect falls
	// at power-on (boot-storm). 0 means the agents' own 10 s. An operator
	// who knows what the broker admits spreads boots over at least
	// devices / rate.
	BootSpread time.Duration
	// RetryAfterJitter is the devices' fetchers' bound on the jitter they
	// add to a hint (remoteconfig.Config.RetryAfterJitter: 0 the firmware's
	// default, negative none).
	RetryAfterJitter time.Duration
	// Telemetry, if > 0, makes every device publish that many QoS 1
	// messages per (unscaled) second through a store-and-forward publisher.
	Telemetry float64
	// Transport is how they reach the in-process broker.
	Transport Transport
	// MQTT5 makes the devices speak MQTT 5 (device.MQTT5), whose reason
	// codes shape their waits and whose Server References they follow;
	// IgnoreServerSignals makes them deaf to both (device.Timing's
	// IgnoreServerSignals): a control group beside those that listen.
	MQTT5, IgnoreServerSignals bool
	// Shard runs only the devices whose index i has i % Shard.Count ==
	// Shard.Index (every device when Count is 0).
	Shard Shard
	Seed  uint64
	// Groups, if set, splits the fleet into groups of devices alike, such
	// as a firmware version still in the field. Their Devices add up to
	// Devices, in index order: the first group's devices come first. Empty
	// means one group, with the fleet's own settings.
	Groups []Group
}

// Group is a part of a mixed fleet, which may differ from the others in
// everything the agent's configuration has. What it leaves unset is the
// fleet's: Policy and Transport empty, MaxBackoff, BootSpread, KeepAlive
// and PingTimeout 0, RetryCap, Telemetry, MQTT5 and IgnoreServerSignals nil.
type Group struct {
	Name                       string
	Devices                    int
	Policy                     string
	MaxBackoff                 time.Duration
	RetryCap                   *int // reconnect.RetryForever or a count
	BootSpread                 time.Duration
	KeepAlive, PingTimeout     time.Duration
	Telemetry                  *float64 // QoS 1 messages a second, per device
	Transport                  Transport
	MQTT5, IgnoreServerSignals *bool
	Labels                     map[string]string
}

// GroupsOrWhole is the fleet as groups, in device index order. Each group
// has every setting resolved, the fleet's where it names none. When the
// plan has no groups, it is the whole fleet as one group.
func (f Fleet) GroupsOrWhole() []Group {
	if len(f.Groups) == 0 {
		return []Group{f.resolve(Group{Name: "fleet", Devices: f.Devices})}
	}
	out := make([]Group, len(f.Groups))
	for i, g := range f.Groups {
		out[i] = f.resolve(g)
	}
	return out
}

// resolve is g with the fleet's settings where g leaves them unset.
func (f Fleet) resolve(g Group) Group {
	g.Policy, g.MaxBackoff, g.Transport = cmp.Or(g.Policy, f.Policy), cmp.Or(g.MaxBackoff, f.MaxBackoff), cmp.Or(g.Transport, f.Transport)
	g.BootSpread, g.KeepAlive, g.PingTimeout = cmp.Or(g.BootSpread, f.BootSpread), cmp.Or(g.KeepAlive, f.KeepAlive), cmp.Or(g.PingTimeout, f.PingTimeout)
	if g.RetryCap == nil {
		g.RetryCap = &f.RetryCap
	}
	if g.Telemetry == nil {
		g.Telemetry = &f.Telemetry
	}
	if g.MQTT5 == nil {
		g.MQTT5 = &f.MQTT5
	}
	if g.IgnoreServerSignals == nil {
		g.IgnoreServerSignals = &f.IgnoreServerSignals
	}
	return g
}

// Protocol is the MQTT version the group's devices speak.
func (g Group) Protocol() device.Protocol {
	if *g.MQTT5 {
		return device.MQTT5
	}
	return device.MQTT311
}

// HasTelemetry reports whether any device of the fleet publishes
// telemetry.
func (f Fleet) HasTelemetry() bool {
	return slices.ContainsFunc(f.GroupsOrWhole(), func(g Group) bool { return *g.Telemetry > 0 })
}

// TelemetryRate is the fleet's mean telemetry rate a device.
func (f Fleet) TelemetryRate() float64 {
	sum := 0.0
	for _, g := range f.GroupsOrWhole() {
		sum += *g.Telemetry * float64(g.Devices)
	}
	return sum / float64(max(f.Devices, 1))
}

// BootSpreadUsed is the group's boot spread, the agents' own 10 s unless set.
func (g Group) BootSpreadUsed() time.Duration {
	if g.BootSpread > 0 {
		return g.BootSpread
	}
	return device.DefaultTiming().BootSpread
}

// Storm is what is done to the fleet's broker, or to the path to it.
type Storm struct {
	Scenario Scenario
	// Outage is how long the disruption lasts: the broker's absence
	// (restarts), the flapping window, the black hole, the slow path, or
	// the config server's fault window.
	Outage time.Duration
	// Flap is how long each session lasts while the broker flaps.
	Flap time.Duration
	// Latency and LatencyJitter are what the latency scenario adds to every
	// byte each way: Latency plus U[0, LatencyJitter).
	Latency, LatencyJitter time.Duration
	// RetryAfter is the hint the config server sends in config-outage. 0
	// sends the time left in the fault window, as a maintenance page does.
	// That names one instant to every device that asks.
	RetryAfter time.Duration
	// Admission, if AdmitRate > 0: the broker admits AdmitRate connects per
	// (unscaled) second with bursts of AdmitBurst, over the limit behaving as
	// AdmitMode. throttled-restart applies it when the broker returns (100/s
	// if unset); other scenarios from the disruption on.
	AdmitRate  float64
	AdmitBurst int
	AdmitMode  fault.AdmissionMode
	// AdmitCode is the reason code an MQTT 5 device over the limit is
	// refused with (refuse mode; 0: 0x9F connection rate exceeded); a 3.1.1
	// device reads CONNACK 3. BusyCode is what a busy-node answers an MQTT 5
	// device with (0: 0x89 server busy).
	AdmitCode, BusyCode byte
	// Bound, if > 0, is how long (unscaled) after the disruption a run
	// waits for its fleet before ending unrecovered. 0 sets one from the
	// outage, the cap and the admission rate.
	Bound time.Duration
	// Duration bounds an observe run: how long to wait for a disruption.
	Duration time.Duration
	// Gap is a rolling restart's time from one node's restart to the next.
	Gap time.Duration
	// Node, if set, is the one node of a cluster the first disruption
	// strikes; nil strikes every node (see Event.Node).
	Node *int
	// Then is the rest of the timeline: further disruptions after the
	// first, each At after it. Empty: the one disruption.
	Then []Event
	// DisruptAt, if set, is when the first disruption strikes on the wall
	// clock: every shard's at one instant.
	DisruptAt DisruptAt
	// ReadyDir is where shards meet: a directory on a volume every shard
	// mounts, where each writes that its fleet is up (internal/rendezvous).
	// DisruptAt's After counts from the last of them.
	ReadyDir string
	// ReadyWait is how long a shard waits there for the others (0:
	// DefaultReadyWait).
	ReadyWait time.Duration
}

// Event is a disruption on a storm's timeline, At after the first, lasting
// Outage. It is a broker restart, a throttled restart, a drop of every
// session, a flapping window or a cluster's rolling restart. With real
// agents only, it can also be a black hole or a slow path. Flap, Latency
// and LatencyJitter of 0 are the storm's.
type Event struct {
	At                     time.Duration
	Scenario               Scenario
	Outage                 time.Duration
	Flap                   time.Duration
	Latency, LatencyJitter time.Duration
	// Gap is a rolling restart's time from one node's restart to the next.
	Gap time.Duration
	// Node, if set, is the one node of a cluster this disruption strikes.
	// That node alone restarts, drops its sessions, flaps, or sits behind a
	// black hole or a slow path. Its devices fail over to the others. Nil
	// strikes every node at once. A rolling restart strikes them one a gap.
	Node *int
}

// Timeline is the storm's disruptions in order: the first at 0, then the
// rest, each with the storm's flap and latency where it names none.
func (s Storm) Timeline() []Event {
	out := []Event{{Scenario: s.Scenario, Outage: s.Outage, Flap: s.Flap, Latency: s.Latency, LatencyJitter: s.LatencyJitter,
		Gap: s.Gap, Node: s.Node}}
	for _, e := range s.Then {
		e.Flap, e.Latency, e.LatencyJitter = cmp.Or(e.Flap, s.Flap), cmp.Or(e.Latency, s.Latency), cmp.Or(e.LatencyJitter, s.LatencyJitter)
		out = append(out, e)
	}
	return out
}

// Target is the broker the fleet connects to: the in-process one (Broker
// empty), or an external one the fault proxy stands in front of.
type Target struct {
	// Broker, if set, is an external broker's URL (tcp://host:port). The
	// run puts the fault proxy in front of it for the disruptive scenarios
	// and measures what it let through. observe leaves the disruption to
	// the user. boot-storm needs none.
	Broker string
	// TLSCA, TLSCert and TLSKey are PEM files for an external broker at
	// ssl://. TLSCA is the CA that signs the broker (empty: the system's
	// roots). TLSCert and TLSKey are one client certificate every device
	// presents (mutual TLS), if any. TLSCAKey, instead of TLSCert, is the
	// CA's key: each device gets a certificate of its own, named by its
	// client ID.
	TLSCA, TLSCert, TLSKey, TLSCAKey string
	// Nodes is how many in-process broker nodes make the cluster (0 or 1:
	// one broker). Each device's home node is its index modulo Nodes, and
	// it lists every node, home first, failing over to the next after a
	// failed attempt or a lost session. Each node applies the admission
	// limit on its own.
	Nodes int
	// Peers, with Broker, make an external cluster: the URLs of its nodes
	// after the first (Broker is node 0). Each node stands behind a fault
	// proxy of its own, and the devices list them all as an in-process
	// cluster's (see Nodes); the TLS files are every node's.
	Peers []string
}

// ClusterNodes is how many broker nodes the fleet connects to: an
// external cluster's, the in-process cluster's, or 1.
func (t Target) ClusterNodes() int {
	if t.Broker != "" {
		return 1 + len(t.Peers)
	}
	return max(t.Nodes, 1)
}

// Brokers is every external broker's URL, node 0 first; none for the
// in-process broker.
func (t Target) Brokers() []string {
	if t.Broker == "" {
		return nil
	}
	return append([]string{t.Broker}, t.Peers...)
}

// Host is where and how fast the run goes.
type Host struct {
	// Engine is Agents (real agents, the default), Wire or Virtual.
	Engine Engine
	// TimeScale runs every duration that many times faster; reports are in
	// unscaled seconds. The virtual engine needs none.
	TimeScale float64
	// Descriptors is how many file descriptors this process may hold (0:
	// DefaultDescriptors); devicesim reads it from RLIMIT_NOFILE.
	Descriptors int
	// Connects is how many connects a second this host serves real agents
	// on the in-memory transport (0: DefaultConnects): a scaled admission
	// rate or boot beyond it measures the host, not the fleet. make scale
	// measures it (testbroker's TestScale).
	Connects float64
	// AutoScale leaves the time scale to the host, TimeScale at most. A run
	// starts at the scale the host's measured share serves
	// (internal/hostload). It runs again slower while the host binds it.
	AutoScale bool
	// Exe is the devicesim binary, for fleets that run in child processes
	// (TCP beyond one process's descriptors).
	Exe string
	// TCPPerProcess is how many TCP devices' agents this process holds,
	// beside the broker or the fault proxy, before they move to child
	// processes. Each child holds TCPPerProcess (or 5,000). 0 means what
	// 20,000 descriptors allow. That is 9,500 beside the broker, and 6,333
	// beside the proxy, or 4,750 with the in-process broker's side too.
	TCPPerProcess int
}

// Outputs is where the run reports as it goes. None of it is part of a
// plan handed to a child process.
type Outputs struct {
	// Events, if set, receives events.csv as the run makes its attempts,
	// and the report keeps none (a million-device run makes tens of
	// millions); nil keeps them for Report.WriteFiles.
	Events io.Writer `json:"-"`
	// Metrics, if set, is told of every agent's attempts and sessions as
	// they happen, and of the disruption (real agents in this process).
	Metrics LiveMetrics `json:"-"`
	// Progress, if set, receives a line a second while the fleet recovers.
	Progress io.Writer `json:"-"`
	// Warn, if set, receives warnings about the run's own validity.
	Warn io.Writer `json:"-"`
	// Ready, if set, is called once the whole fleet is up, before the
	// disruption (observe: when the run starts waiting for one).
	Ready func() `json:"-"`
	// Hold, if set, makes this run a child of another. The child starts the
	// devices against Broker, then reads "t0 <unix ns>" from Hold. The
	// parent sends it once its fleet has recovered. The child reports from
	// that instant.
	Hold io.Reader `json:"-"`
	// Stream, for a child run, is told every device event as it happens,
	// for a parent whose fault proxy the devices go through.
	Stream io.Writer `json:"-"`
}

// LiveMetrics follows a run as it goes (livemetrics.Fleet serves it to
// Prometheus). Its methods are called from many goroutines and must not
// block.
type LiveMetrics interface {
	Start(devices int)
	Device(i int) device.Metrics
	Disrupted(t time.Time)
}

// Shard is a slice of a fleet: index Index of Count. The zero Shard is the
// whole fleet.
type Shard struct{ Index, Count int }

// Settle is p with the rules that follow from what was asked: a
// comma-separated Broker is a cluster's nodes (Broker and Peers); a time
// scale named (scaleNamed) is the one the run keeps; an observed
// disruption is someone else's, in real time; shards and a timed strike
// run at the plan's scale, one for all; and shards that wait for each other
// before a timed strike meet in a ready directory beside their reports
// (out is this run's report directory).
func (p Plan) Settle(scaleNamed bool, out string) Plan {
	if urls := strings.Split(p.Broker, ","); len(urls) > 1 {
		p.Broker, p.Peers = urls[0], urls[1:]
	}
	if scaleNamed {
		p.AutoScale = false
	}
	if p.Scenario == Observe && !scaleNamed {
		p.TimeScale, p.AutoScale = 1, false
	}
	if p.Shard.Count > 0 || !p.DisruptAt.IsZero() {
		p.AutoScale = false
	}
	if p.Shard.Count > 1 && p.DisruptAt.After > 0 && p.ReadyDir == "" {
		p.ReadyDir = filepath.Join(filepath.Dir(out), "ready")
	}
	return p
}

// Dir is where the shard writes its report under parent: parent/shard-i,
// where every shard of a run and its merge look for it.
func (s Shard) Dir(parent string) string {
	return filepath.Join(parent, "shard-"+strconv.Itoa(s.Index))
}

// Dirs is where each of the count shards of a run write their reports
// under parent.
func Dirs(parent string, count int) []string {
	dirs := make([]string, count)
	for i := range dirs {
		dirs[i] = Shard{Index: i, Count: count}.Dir(parent)
	}
	return dirs
}

// MergeWait is how long shard 0's merge waits for the other shards'
// reports after its own. They struck the same storm, so each has ended by
// its timeline's last disruption and its recovery bound after the strike.
// Five minutes more is for writing its files to a shared volume.
func (p Plan) MergeWait() time.Duration {
	strikes := p.Strikes()
	bound := cmp.Or(p.Bound, p.RecoveryBound(p.SliceSize()))
	return time.Duration(float64(strikes[len(strikes)-1].At+bound)/p.TimeScale) + 5*time.Minute
}

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

// IDs lists the device indexes this shard runs of a fleet of devices.
func (s Shard) IDs(devices int) []int {
	var ids []int
	for i := 0; i < devices; i++ {
		if s.Count == 0 || i%s.Count == s.Index {
			ids = append(ids, i)
		}
	}
	return ids
}

// Split is part i of k of s: a child process's share of a shard (or, for
// the zero Shard, of the whole fleet). Device d is in it when d % (n*k) is
// s.Index + n*i: in s, then in part i of s's devices in order.
func (s Shard) Split(i, k int) Shard {
	if s.Count == 0 {
		return Shard{Index: i, Count: k}
	}
	return Shard{Index: s.Index + s.Count*i, Count: s.Count * k}
}

// Size counts the devices this shard runs of a fleet of devices, without
// listing them.
func (s Shard) Size(devices int) int {
	if s.Count == 0 {
		return devices
	}
	n := devices / s.Count
	if s.Index < devices%s.Count {
		n++
	}
	return n
}

// Default is the embedded default run: 2,000 devices on the in-memory
// transport, a 30 s broker restart, the IoTCore policy, at up to 4x. The
// run measures what its host serves (AutoScale). docs/measurements.md has
// the figures.
func Default() Plan {
	return Plan{
		Fleet: Fleet{Devices: 2000, Policy: "iotcore", MaxBackoff: 32 * time.Second, RetryCap: reconnect.RetryForever,
			KeepAlive: 30 * time.Second, PingTimeout: 10 * time.Second, Transport: Mem, Seed: 1},
		Storm: Storm{Scenario: BrokerRestart, Outage: 30 * time.Second, Flap: 2 * time.Second,
			Latency: 300 * time.Millisecond, LatencyJitter: 200 * time.Millisecond, Duration: 10 * time.Minute},
		Host: Host{Engine: Agents, TimeScale: 4, AutoScale: true},
	}
}

// BootSpreadUsed is the fleet's boot spread, the agents' own 10 s unless set.
func (f Fleet) BootSpreadUsed() time.Duration {
	if f.BootSpread > 0 {
		return f.BootSpread
	}
	return device.DefaultTiming().BootSpread
}

// Admission is the storm's admission limit, unscaled; the zero Admission
// when it has none.
func (s Storm) Admission() fault.Admission {
	if s.AdmitRate <= 0 {
		return fault.Admission{}
	}
	return fault.Admission{Rate: s.AdmitRate, Burst: s.AdmitBurst, Mode: s.AdmitMode, Code: s.AdmitCode}
}

// Busy is the reason code a busy-node refuses an MQTT 5 device with, and
// ends its sessions with.
func (s Storm) Busy() byte { return cmp.Or(s.BusyCode, fault.CodeServerBusy) }

// DefaultThrottle is the admission a throttled restart applies when the
// plan names none, in connects per (unscaled) second.
const DefaultThrottle = 100

// WithDefaults fills in what a plan may leave to the run: a throttled
// restart's admission rate. Every engine starts from it.
func (p Plan) WithDefaults() Plan {
	throttled := p.Scenario == ThrottledRestart || p.Scenario == RateLimited
	for _, e := range p.Then {
		throttled = throttled || e.Scenario == ThrottledRestart || e.Scenario == RateLimited
	}
	if throttled && p.AdmitRate == 0 {
		p.AdmitRate = DefaultThrottle
	}
	return p
}

// RecoveryBound is how long, unscaled, after the (last) disruption a run
// of devices waits for them before it ends unrecovered: Bound if set, else
// the longest outage, twenty waits at the largest cap, a minute's slack,
// and three times what the admission limit takes to let them all in.
func (p Plan) RecoveryBound(devices int) time.Duration {
	if p.Bound > 0 {
		return p.Bound
	}
	outage, maxBackoff := p.Outage, p.MaxBackoff
	for _, e := range p.Then {
		outage = max(outage, e.Outage)
	}
	for _, g := range p.GroupsOrWhole() {
		maxBackoff = max(maxBackoff, g.MaxBackoff)
	}
	bound := outage + 20*maxBackoff + time.Minute
	if p.AdmitRate > 0 {
		bound += time.Duration(3 * float64(devices) / p.AdmitRate * float64(time.Second))
	}
	return bound
}

// DefaultConnects is Host.Connects when unset: about what make scale
// measures a 2-core machine to serve in memory (docs/measurements.md).
const DefaultConnects = 5000

// ServedConnects is how many connects a second the host serves real
// agents: Connects, or DefaultConnects.
func (h Host) ServedConnects() float64 { return cmp.Or(h.Connects, DefaultConnects) }
