// Package agents is the engine of real devices, and the live fleet it
// runs on. A Fleet is device.Agents: paho clients, their store-and-forward
// publishers and config fetchers. They run against the in-process test
// broker, a cluster of its nodes, or any broker (or cluster of brokers)
// through a fault proxy a node. They run in scaled real time or, in
// tests, in a synctest bubble. The fleet stays up across disruptions:
//
//	Start ─▶ AwaitUp ─▶ Disrupt, Disrupt, ... ─▶ AwaitRecovery ─▶ Report
//	      ─▶ Disrupt ... ─▶ Stop
//
// Run, the engine, is one client of it. It runs the plan's timeline of
// disruptions (a rolling restart among them, node by node), then makes
// one report, each disruption judged on its own. The soak (package
// experiment) is another: storm after storm on one fleet. The fleet
// connects to the brokers package cluster makes. It watches its devices
// through package observer and builds them with package member. It runs
// a fleet too large for one process's descriptors in child processes
// (package children).
package agents

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/agents/children"
	"github.com/herdguard/herdguard/internal/agents/cluster"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/agents/timedfault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/wire"
	"github.com/herdguard/herdguard/remoteconfig"
)

// Fleet is a fleet of real agents kept up across disruptions. It holds
// its broker, its members, and what watches them. The broker is the
// in-process one, a cluster of its nodes, or external ones, each behind a
// fault proxy of its own. Between Start and Stop the fleet is disrupted
// and awaited as often as its user likes. Each recovery is a window of
// its own (see Disrupt). Its methods are called from one goroutine, one
// at a time; its agents run on their own. The zero Fleet is not usable:
// use Start.
type Fleet struct {
	p      plan.Plan // with its defaults, at the time scale the run allows
	ids    []int     // the devices this process runs (a shard's)
	wiring member.Wiring

	nodes    *cluster.Cluster // the brokers, what is in front of them, and how devices reach them
	configs  *configserver.Server
	fetchers []*remoteconfig.Fetcher

	devlog       *observer.DeviceLog // every attempt made here (or, through the proxy, in children)
	obs          observer.Observer   // what the fleet waits on: the brokers' side or the devices'
	members      []member.Member
	children     *children.Children
	childReports []*report.Report // once released

	admission fault.Admission    // the plan's, scaled: what a throttled restart applies
	received  *observer.Received // every message the broker took, by the envelope's rule
	before    processState       // before the members started
	upAt      time.Time          // when the fleet was last all up
	struckAt  *strike            // when the storm's first disruption was due, once known

	stopMembers context.CancelFunc
	faults      []timedfault.Faults // by node: its disruptions in force, each until its timer ends
	w           *window             // the recovery under way, if a disruption opened one
	cleanups    []func()
}

func (f *Fleet) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / f.p.TimeScale)
}
func (f *Fleet) unscale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * f.p.TimeScale)
}

func (f *Fleet) warn(format string, args ...any) {
	if f.p.Warn != nil {
		fmt.Fprintf(f.p.Warn, "warning: "+format+"\n", args...)
	}
}

// Start builds the fleet of plan p, which the caller has validated, and
// starts it. It builds its broker (or nodes, or the fault proxy in front
// of an external one), the config server if the storm needs one, and a
// member a device. It returns once they are started, not connected
// (AwaitUp). A boot-storm's boot is its disruption: the fleet's first
// window opens as the members start. An error stops what had started.
func Start(ctx context.Context, p plan.Plan) (*Fleet, error) {
	f := newFleet(p)
	if err := f.setup(); err != nil {
		f.Stop()
		return nil, err
	}
	f.before = processNow()
	if f.p.Scenario == plan.BootStorm {
		f.open(time.Now(), false)
	}
	ctx, f.stopMembers = context.WithCancel(ctx)
	for _, m := range f.members {
		if err := m.Start(ctx); err != nil {
			f.Stop()
			return nil, err
		}
	}
	return f, nil
}

// newFleet is the fleet of p, at the time scale its policy and scenario
// allow.
func newFleet(p plan.Plan) *Fleet {
	p = p.WithDefaults()
	f := &Fleet{p: p, ids: p.Shard.IDs(p.Devices), received: observer.NewReceived(), faults: make([]timedfault.Faults, p.ClusterNodes())}
	if p.Policy == plan.PahoDefault && p.TimeScale != 1 {
		f.warn("paho-default runs on paho's own timers (a constant 1 s start), which cannot be scaled: running it at time scale 1")
		f.p.TimeScale = 1
	}
	if p.Scenario == plan.ConfigOutage && p.TimeScale != 1 {
		f.warn("Retry-After travels in whole seconds, which a time scale cannot shrink: running config-outage at time scale 1")
		f.p.TimeScale = 1
	}
	return f
}

// Devices is how many devices the fleet runs (a shard's, where it runs one).
func (f *Fleet) Devices() int { return len(f.ids) }

// AwaitUp waits until the whole fleet is connected, for at most the boot
// spread and a minute.
func (f *Fleet) AwaitUp(ctx context.Context) error {
	n := len(f.ids)
	all := func(k int) bool { return k == n }
	if err := f.obs.Await(ctx, f.wiring.BootSpread+time.Minute, all); err != nil {
		return fmt.Errorf("fleet did not finish booting: %w", err)
	}
	// and the devices here know it: a broker counts a session as it sends
	// the CONNACK, a moment before its device reads it (a child's devices
	// tell of their sessions as the run ends)
	if f.children == nil {
		if err := f.devlog.Await(ctx, time.Minute, all); err != nil {
			return fmt.Errorf("fleet did not finish booting: the brokers hold every session, the devices do not know it: %w", err)
		}
	}
	f.upAt = time.Now()
	return nil
}

// AwaitConnected waits until at least n devices are connected, for at most
// the plan's recovery bound.
func (f *Fleet) AwaitConnected(ctx context.Context, n int) error {
	return f.obs.Await(ctx, f.recoverBound(), func(k int) bool { return k >= n })
}

// Stop stops the members, the children, the disruptions still under way
// and the servers, and waits for them.
func (f *Fleet) Stop() {
	if f.stopMembers != nil {
		f.stopMembers()
	}
	stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Go(func() { _ = m.Stop(stopCtx) })
	}
	wg.Wait()
	if f.children != nil {
		f.children.Kill()
	}
	for k := range f.faults {
		f.faults[k].Stop()
	}
	if f.w != nil && f.w.stopProgress != nil {
		f.w.stopProgress()
	}
	for _, c := range f.cleanups {
		c()
	}
	if f.configs != nil {
		f.configs.Close()
	}
	if f.nodes != nil {
		f.nodes.Close()
	}
}

// SetAdmission limits the connects the broker admits from now on to a, in
// unscaled connects a second. The broker here is each node of a cluster,
// or the fault proxy in front of each external broker. The zero Admission
// lifts the limit.
func (f *Fleet) SetAdmission(a fault.Admission) error {
	if a != (fault.Admission{}) {
		a = fault.Admission{Rate: a.Rate * f.p.TimeScale, Burst: max(a.Burst, 1), Mode: a.Mode, Code: a.Code}
	}
	return f.admit(a)
}

// admit applies the scaled admission a at every node, each on its own.
func (f *Fleet) admit(a fault.Admission) error { return f.nodes.Admit(a) }

// recoverBound is how long a fleet is waited for to come back.
func (f *Fleet) recoverBound() time.Duration {
	if f.p.Bound > 0 {
		return f.scale(f.p.Bound)
	}
	// the plan's minute of slack is the host's: not scaled
	return f.scale(f.p.RecoveryBound(len(f.ids))-time.Minute) + time.Minute
}

// setup makes the broker (or the nodes, or the observer of an external
// one), what the storm breaks beyond it, and the members.
func (f *Fleet) setup() error {
	mc, err := f.memberConfig()
	if err != nil {
		return err
	}
	if f.nodes, err = cluster.Start(f.p, f.scale(plan.ConnectTimeout), &mc); err != nil {
		return err
	}
	f.obs = f.observer()
	if f.p.Scenario == plan.BootStorm && f.p.AdmitRate > 0 {
		if err := f.admit(f.admission); err != nil {
			return err
		}
	}
	if err := f.setupFaults(&mc); err != nil {
		return err
	}
	if f.p.NeedsChildren() {
		return f.spawnChildren(mc.Broker)
	}
	return f.makeMembers(mc)
}

// makeMembers builds a member a device: a paho client, or an agent on its
// group's timing, with its own endpoints in a cluster.
func (f *Fleet) makeMembers(mc member.Config) error {
	f.wiring.Config = mc
	if f.p.Engine == plan.Wire {
		w, err := wire.New(f.ids, f.configFor)
		if err != nil {
			return err
		}
		f.members = append(f.members, w)
		return nil
	}
	for _, i := range f.ids {
		if f.p.Policy == plan.PahoDefault {
			f.members = append(f.members, member.NewPaho(i, mc))
			continue
		}
		m, err := member.NewAgent(i, f.configFor(i))
		if err != nil {
			return err
		}
		f.members = append(f.members, m)
	}
	return nil
}

// configFor is device i's member config: its group's, with its own
// endpoints in a cluster.
func (f *Fleet) configFor(i int) member.Config {
	c := f.wiring.For(i)
	if f.nodes.Nodes() > 1 {
		c.Broker, c.Failover = f.nodes.Endpoints(i)
	}
	return c
}

// memberConfig is what every member shares (member.Wire), the device log
// they report to, and the live metrics; and the plan's admission limit,
// scaled.
func (f *Fleet) memberConfig() (member.Config, error) {
	p := f.p
	var err error
	if f.wiring, err = member.Wire(p, f.warn); err != nil {
		return member.Config{}, err
	}
	mc := f.wiring.Config
	if p.AdmitRate > 0 {
		f.admission = fault.Admission{Rate: p.AdmitRate * p.TimeScale, Burst: max(p.AdmitBurst, 1), Mode: p.AdmitMode, Code: p.AdmitCode}
		if served := p.ServedConnects(); f.admission.Rate > served {
			f.warn("the scaled admission rate %.0f/s is beyond the ~%.0f/s this host serves (-host-connects): lower -time-scale",
				f.admission.Rate, served)
		}
	}
	f.devlog = observer.NewDeviceLog(p.Devices)
	if p.Stream != nil {
		f.cleanups = append(f.cleanups, f.devlog.StreamTo(p.Stream))
	}
	mc.Log = f.devlog
	if p.Metrics != nil {
		p.Metrics.Start(p.Devices)
		mc.Metrics = p.Metrics.Device
	}
	return mc, nil
}

// observer is what the fleet waits on. It is the in-process brokers'
// recorders (a session a node holds). It is instead the devices' own word
// where no broker alone knows it (failover's two brokers, external ones).
// The devices' word is also used where a broker behind a silent path still
// counts its sessions until its own keepalive gives up.
func (f *Fleet) observer() observer.Observer {
	n := f.nodes
	if len(n.Brokers) == 0 || n.Standby != nil || len(n.Proxies) > 0 {
		return f.devlog
	}
	var recorders observer.Brokers
	for _, b := range n.Brokers {
		recorders = append(recorders, b.Recorder())
	}
	return recorders
}

// setupFaults sets up what the storm breaks beyond the brokers: the
// config server; and says what a black hole's keepalive is at this time
// scale.
func (f *Fleet) setupFaults(mc *member.Config) error {
	p := f.p
	if unscaled := f.unscale(mc.KeepAlive); p.Storm.Has(plan.Blackhole) && unscaled != cmp.Or(p.KeepAlive, 30*time.Second) {
		f.warn("MQTT counts keepalive in whole seconds: at this time scale the agents' keepalive is %v unscaled", unscaled)
	}
	if p.Scenario == plan.ConfigOutage {
		return f.setupConfigs()
	}
	return nil
}

// spawnChildren starts the processes that run the agents of a TCP fleet
// too large for this one. They run against url: the in-process broker, or
// the fault proxy in front of a broker.
func (f *Fleet) spawnChildren(url string) error {
	p := children.Config{Plan: f.p, URL: url, Warn: f.warn}
	// the children issue their devices' certificates from the broker's CA
	if f.p.Transport == plan.TLS && len(f.nodes.Brokers) == 1 {
		b := f.nodes.Brokers[0]
		p.CA = func(dir string) (plan.Target, error) {
			files, err := b.WriteCAFiles(dir)
			return plan.Target{TLSCA: files.CA, TLSCAKey: files.Key}, err
		}
	}
	// their devices' records come back as they happen, as do their sessions
	// spread over a keepalive
	if len(f.nodes.Proxies) > 0 {
		p.BootSpread = f.unscale(f.wiring.BootSpread)
		var metrics func(int) device.Metrics
		if f.p.Metrics != nil {
			metrics = f.p.Metrics.Device
		}
		p.Follow = func(_ int, rd io.Reader) error { return f.devlog.Follow(rd, metrics) }
	}
	var err error
	f.children, err = children.Spawn(p)
	return err
}

// deviceID is device i's client ID.
func deviceID(i int) string { return attempt.ClientID(i) }
