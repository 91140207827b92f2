// Package agents is the engine of real devices: a fleet of device.Agents
// (paho clients, their store-and-forward publishers and config fetchers)
// against the in-process test broker, or any broker through the fault
// proxy, in scaled real time or, in tests, a synctest bubble. It disrupts
// the broker or the path, follows every attempt in the devices' log and the
// broker's recorder, and hands them to the report as attempt.Records. A
// fleet too large for one process's descriptors runs in child processes,
// each given its part of the plan.
package agents

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// hostTimerPrecision is how finely a loaded host keeps thousands of agents'
// timers: no burst narrower than this (times the time scale, unscaled) can
// be told from the host starting attempts in batches.
const hostTimerPrecision = 2 * time.Millisecond

// HostAdmitLimit is roughly the connects per second this 2-core host served
// to real paho clients on the in-memory transport (make scale: 100,000 in
// 19.7 s); a scaled admission rate beyond it measures the host, not the fleet.
const HostAdmitLimit = 5000

// run is one run's moving parts.
type run struct {
	c         plan.Plan
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
	childReports []*report.Report
	proxy        *faultproxy.Proxy                // in the devices' path, when the scenario breaks the path or the broker is external
	standby      *testbroker.Broker               // failover: where the fleet goes when the primary (broker) dies
	handshakeCPU time.Duration                    // TLS: the broker's CPU for one handshake, measured at setup
	externalTLS  func(i int) (*tls.Config, error) // an external broker at ssl://: what device i presents and trusts
	timingOf     func(i int) *device.Timing       // device i's timing: its group's policy in a mixed fleet
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

// Run runs plan c, which the caller has validated, on real agents. A run
// that ends with devices still offline returns its report and an error
// wrapping report.ErrNotRecovered; an interrupted one (ctx ended) its report
// so far and ctx's error.
func Run(ctx context.Context, c plan.Plan) (*report.Report, error) {
	r := newRun(c)
	start := time.Now()
	defer r.close()
	defer r.killChildren() // before close: children started by a setup that then failed too
	if err := r.setup(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := report.HeapInUse()
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
	t0, memPerDevice, err := r.boot(ctx, bootStart, before)
	if err != nil {
		return nil, err
	}
	d, err := r.disrupt(ctx, t0)
	if err != nil {
		return nil, err
	}
	recoverErr, drainErr := r.recover(ctx, &d)
	if len(r.children) > 0 {
		if r.childReports, err = r.releaseChildren(d.t0); err != nil {
			return nil, err
		}
	}
	rep, err := r.report(d)
	if err != nil {
		return nil, err
	}
	r.fillHost(rep, start, before, memPerDevice)
	return rep, r.outcome(ctx, rep, recoverErr, drainErr)
}

// newRun starts a run of c, at the time scale its policy and scenario
// allow.
func newRun(c plan.Plan) *run {
	c = c.WithDefaults()
	r := &run{c: c, ids: c.Shard.IDs(c.Devices)}
	if c.Policy == plan.PahoDefault && c.TimeScale != 1 {
		r.warn("paho-default runs on paho's own timers (a constant 1 s start), which cannot be scaled: running it at time scale 1")
		r.c.TimeScale = 1
	}
	if c.Scenario == plan.ConfigOutage && c.TimeScale != 1 {
		r.warn("Retry-After travels in whole seconds, which a time scale cannot shrink: running config-outage at time scale 1")
		r.c.TimeScale = 1
	}
	return r
}

// boot waits for the whole fleet to come up (boot-storm measures the boot
// itself) and returns the disruption's instant and what a device holds.
func (r *run) boot(ctx context.Context, bootStart time.Time, before uint64) (t0 time.Time, memPerDevice float64, err error) {
	n := len(r.ids)
	t0 = bootStart
	if r.c.Scenario != plan.BootStorm {
		if err := r.obs.await(ctx, r.timing.BootSpread+time.Minute, func(k int) bool { return k == n }); err != nil {
			return t0, 0, fmt.Errorf("fleet did not finish booting: %w", err)
		}
		memPerDevice = float64(report.HeapInUse()-before) / float64(n) / 1024
		t0 = time.Now() // observe watches from here, Ready is its disruption
		if r.c.Ready != nil {
			r.c.Ready()
		}
		if r.c.Scenario != plan.Observe {
			t0 = time.Now()
		}
	}
	if r.c.Metrics != nil {
		r.c.Metrics.Disrupted(t0)
	}
	return t0, memPerDevice, nil
}

// recover waits for the fleet to come back after d (and marks in d how long
// it watched), for every attempt to have its outcome, then drains the
// telemetry queues.
func (r *run) recover(ctx context.Context, d *disruption) (recoverErr, drainErr error) {
	n := len(r.ids)
	stopProgress := progress(r.c.Progress, r.obs, n, r.c.TimeScale, d.t0)
	if r.c.Scenario == plan.ConfigOutage {
		recoverErr = d.wait()
	} else {
		recoverErr = r.obs.await(ctx, r.recoverBound(), func(k int) bool { return k == n })
	}
	stopProgress()
	r.devlog.awaitSettled(ctx, r.scale(plan.ConnectTimeout)+time.Second)
	if r.proxy != nil {
		// The proxy's last connections settle too (a dial to the broker
		// still under way when the devices were done), so that its counts
		// are what reached the broker.
		_ = r.proxy.Recorder().Await(ctx, r.scale(plan.ConnectTimeout)+time.Second, func(k fault.Counts) bool { return k.Pending == 0 })
	}
	d.watched(recoverErr == nil, r.c.MaxBackoff, r.c.TimeScale)
	if r.c.Telemetry > 0 {
		drainErr = r.drainTelemetry(ctx)
	}
	return recoverErr, drainErr
}

// fillHost adds what the run cost this host, and its children, to rep.
func (r *run) fillHost(rep *report.Report, start time.Time, before uint64, memPerDevice float64) {
	n := len(r.ids)
	if r.c.Telemetry > 0 {
		rep.Telemetry = r.telemetry()
	}
	if memPerDevice == 0 {
		memPerDevice = float64(report.HeapInUse()-before) / float64(n) / 1024
	}
	for _, cr := range r.childReports { // the agents' side, in their processes
		memPerDevice += cr.Host.MemoryPerDeviceKB * float64(cr.Devices) / float64(n)
	}
	rep.Host.WallS, rep.Host.MemoryPerDeviceKB = time.Since(start).Seconds(), memPerDevice
	rep.Host.AgentProcesses = len(r.childReports)
}

// outcome is the run's error: interrupted, not recovered, a drain that
// failed, or telemetry lost, in that order; nil for a run that saw
// everyone back and lost nothing.
func (r *run) outcome(ctx context.Context, rep *report.Report, recoverErr, drainErr error) error {
	n, recovered := len(r.ids), rep.Recovered()
	rep.Recovery.AllRecovered = recoverErr == nil && recovered == n
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted with %d of %d devices back: %w", recovered, n, ctx.Err())
	case !rep.Recovery.AllRecovered:
		return fmt.Errorf("%w: %d of %d within %v", ErrNotRecovered, recovered, n, r.recoverBound())
	case drainErr != nil:
		return drainErr
	case rep.Telemetry != nil && rep.Telemetry.Lost != 0:
		return fmt.Errorf("%w: %d telemetry messages", ErrLost, rep.Telemetry.Lost)
	}
	return nil
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
	// the plan's minute of slack is the host's: not scaled
	return r.scale(r.c.RecoveryBound(len(r.ids))-time.Minute) + time.Minute
}

// setup makes the broker (or the observer of an external one), the config
// server if the scenario needs it, and the members.
func (r *run) setup() error {
	mc, err := r.memberConfig()
	if err != nil {
		return err
	}
	if r.timingOf, err = r.groupTimings(); err != nil {
		return err
	}
	if r.c.Broker != "" {
		err = r.setupExternal(&mc)
	} else {
		err = r.setupBroker(&mc)
	}
	if err != nil {
		return err
	}
	if err := r.setupFaults(&mc); err != nil {
		return err
	}
	if r.c.NeedsChildren() {
		return r.spawnChildren(mc.broker)
	}
	for _, i := range r.ids {
		if r.c.Policy == plan.PahoDefault {
			r.members = append(r.members, newPahoMember(i, mc))
			continue
		}
		mc.timing = r.timingOf(i)
		if mc.pubRetry != nil {
			mc.pubRetry = mc.timing.Policy // its group's, as its reconnects
		}
		m, err := newAgentMember(i, mc)
		if err != nil {
			return err
		}
		r.members = append(r.members, m)
	}
	return nil
}

// groupTimings is each device's timing: the run's, or in a mixed fleet its
// group's, which differs in its policy alone.
func (r *run) groupTimings() (func(i int) *device.Timing, error) {
	groups := r.c.GroupsOrWhole()
	if len(groups) < 2 {
		return func(int) *device.Timing { return &r.timing }, nil
	}
	timings := make([]*device.Timing, len(groups))
	first := make([]int, len(groups)) // each group's first device index
	lo := 0
	for k, g := range groups {
		shape, _ := plan.Shape(g.Policy, g.MaxBackoff)
		policy, err := reconnect.New(scaled{shape, r.c.TimeScale}, reconnect.Limits{MaxRetries: r.c.RetryCap})
		if err != nil {
			return nil, err
		}
		t := r.timing
		t.Policy = policy
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

// memberConfig is what every member shares: the agents' timing, scaled
// with the run, their boot spread, telemetry, the run's admission limit,
// and the device log they report to.
func (r *run) memberConfig() (memberConfig, error) {
	c := r.c
	mc := memberConfig{seed: c.Seed, keepAlive: r.keepAlive(), pingTimeout: r.pingTimeout(), connectTimeout: r.scale(plan.ConnectTimeout),
		pahoMaxInterval: c.MaxBackoff}
	if c.Policy != plan.PahoDefault {
		shape, _ := plan.Shape(c.Policy, c.MaxBackoff)
		policy, err := reconnect.New(scaled{shape, c.TimeScale}, reconnect.Limits{MaxRetries: c.RetryCap})
		if err != nil {
			return mc, err
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
	r.timing.BootSpread = r.scale(c.BootWindow())
	// Outside boot-storm the fleet's boot is setup, not measurement: pace it
	// at half of what this host serves, or paho's connect timeouts turn the
	// setup itself into a storm.
	hostPaced := time.Duration(float64(c.Devices) / (HostAdmitLimit / 2) * float64(time.Second)) // the whole fleet, shards included
	switch {
	case c.Scenario == plan.Blackhole:
		// Sessions that began at unrelated times ping at unrelated times:
		// spread them over a keepalive, or the fleet's pings (and the
		// moments it notices the silence) would be in step by construction.
		r.timing.BootSpread = max(hostPaced, r.keepAlive())
	case c.Scenario != plan.BootStorm:
		// A child's parent may ask for longer (a black hole's keepalive).
		r.timing.BootSpread = max(hostPaced, 100*time.Millisecond, r.scale(c.BootSpread))
	case r.timing.BootSpread < hostPaced:
		r.warn("%d devices booting within %v is beyond the ~%d connects/s this host serves: lower -time-scale",
			len(r.ids), r.timing.BootSpread, HostAdmitLimit)
	}
	mc.pahoBootSpread = r.timing.BootSpread
	if c.Scenario == plan.BootStorm && c.Policy == plan.PahoDefault {
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
		r.devlog.stream = attempt.NewStreamWriter(st)
		r.cleanups = append(r.cleanups, st.close)
	}
	mc.log = r.devlog
	if c.Metrics != nil {
		c.Metrics.Start(c.Devices)
		mc.metrics = c.Metrics.Device
	}
	return mc, nil
}

// setupExternal points the members at an external broker, observed
// through the devices' own log.
func (r *run) setupExternal(mc *memberConfig) error {
	c := r.c
	r.obs, mc.broker = deviceObserver{r.devlog}, c.Broker
	tlsCfg, err := externalTLS(c)
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
	return nil
}

// setupBroker starts the in-process broker on the run's transport.
func (r *run) setupBroker(mc *memberConfig) error {
	c := r.c
	bc := testbroker.Config{Transport: testbroker.Memory}
	switch c.Transport {
	case plan.TCP:
		bc.Transport = testbroker.TCP
	case plan.TLS:
		bc.Transport, bc.MutualTLS = testbroker.TLS, true
	}
	b, err := testbroker.New(bc)
	if err != nil {
		return err
	}
	r.broker, r.obs, mc.broker = b, brokerObserver{b.Recorder()}, b.URL()
	switch c.Transport {
	case plan.Mem:
		mc.dial = func(int) device.DialFunc { return b.DialContext }
	case plan.TCP:
		mc.dial = loopbackDialer
	case plan.TLS:
		if r.handshakeCPU, err = b.HandshakeCPU(200); err != nil && !errors.Is(err, testbroker.ErrNoThreadCPU) {
			return err
		}
		mc.dial = func(i int) device.DialFunc { return loopbackTLSDialer(i, b) }
	}
	if c.Scenario == plan.BootStorm && c.AdmitRate > 0 {
		if err := b.SetAdmission(r.admission); err != nil {
			return err
		}
	}
	return nil
}

// setupFaults sets up what the scenario breaks beyond the broker: a standby
// to fail over to, the fault proxy in the path, the config server.
func (r *run) setupFaults(mc *memberConfig) error {
	c := r.c
	if c.Scenario == plan.Failover {
		if err := r.setupStandby(mc); err != nil {
			return err
		}
	}
	if c.Proxied() {
		if err := r.setupProxy(mc); err != nil {
			return err
		}
		if unscaled := r.unscale(r.keepAlive()); c.Scenario == plan.Blackhole && unscaled != cmp.Or(c.KeepAlive, 30*time.Second) {
			r.warn("MQTT counts keepalive in whole seconds: at this time scale the agents' keepalive is %v unscaled", unscaled)
		}
	}
	if c.Scenario == plan.ConfigOutage {
		if err := r.setupConfigs(); err != nil {
			return err
		}
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
	if r.c.Scenario != plan.BootStorm { // a boot storm's attempts are the boot's
		r.devlog.markDisruption()
	}
	if r.proxy != nil {
		r.proxy.Recorder().Reset()
	}
	if r.broker != nil && r.c.Scenario != plan.BootStorm {
		r.broker.Recorder().ResetConnections() // telemetry counts the whole run
	}
	if (r.broker != nil || r.proxy != nil) && r.c.Scenario != plan.BootStorm && r.c.AdmitRate > 0 && r.c.Scenario != plan.ThrottledRestart {
		if err := r.setAdmission(); err != nil {
			return d, err
		}
	}
	br := r.breaker()
	switch r.c.Scenario {
	case plan.BrokerRestart, plan.ThrottledRestart:
		br.BeginOutage()
		if err := reconnect.Sleep(ctx, nil, r.scale(r.c.Outage)); err != nil {
			return d, err
		}
		if r.c.Scenario == plan.ThrottledRestart {
			if err := r.setAdmission(); err != nil {
				return d, err
			}
		}
		if err := br.EndOutage(); err != nil {
			return d, err
		}
		d.returned = time.Now()
	case plan.DropAll:
		br.DropAll()
	case plan.Failover:
		r.standby.Recorder().ResetConnections()
		br.BeginOutage() // for good: the fleet's survivor is the standby
	case plan.Flapping:
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
	case plan.Blackhole, plan.Latency:
		if err := r.breakPath(ctx); err != nil {
			return d, err
		}
		if r.c.Scenario == plan.Blackhole {
			d.returned = time.Now()
		}
	case plan.ConfigOutage:
		return r.configOutage(ctx, t0)
	case plan.Observe:
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
func (r *run) report(d disruption) (*report.Report, error) {
	c := r.c
	rep := report.New(c, plan.Agents, string(c.Transport), len(r.ids), d.t0)
	fleetAt, brokerAt := "devices", "broker"
	switch {
	case c.Scenario == plan.ConfigOutage:
		fleetAt, brokerAt = "config-server", "" // every request reaches it
	case r.broker == nil && r.proxy != nil:
		rep.Transport, brokerAt = "external", "proxy"
	case r.broker == nil:
		rep.Transport, brokerAt = "external", ""
	case r.standby != nil:
		brokerAt = "standby broker"
	}
	b := report.NewBuilder(c.Devices, d.t0, d.returned, c.TimeScale, fleetAt, brokerAt, c.Events)
	b.SplitGroups(c.GroupsOrWhole())
	// The proxy knows a connection reached the broker, not whether the
	// broker accepted it: recovery is the devices' word for it then.
	b.FleetAdmits = brokerAt == "proxy"
	b.MinWidth = time.Duration(c.TimeScale * float64(hostTimerPrecision))
	b.WatchedUntil(d.until)
	switch {
	case c.Scenario == plan.ConfigOutage:
		for _, a := range r.configAttempts(d.t0) {
			b.Add(fleetRecord(b, a))
		}
	case len(r.childReports) > 0 && r.proxy == nil: // the agents ran in child processes, reporting from the same t0
		for _, cr := range r.childReports {
			for _, e := range cr.Events() {
				b.Add(e)
			}
		}
	default:
		for _, a := range r.devlog.since(d.t0) {
			b.Add(fleetRecord(b, a))
		}
		switch c.Scenario {
		case plan.BootStorm, plan.Observe: // observe's t0 is the first loss noticed
		case plan.Blackhole: // noticed through keepalive: the fleet's figure, not the host's lateness
			rep.Noticed = report.NoticedOf(r.devlog.noticed(d.t0), c.TimeScale, c.Outage)
		default:
			b.Noticed(r.devlog.noticed(d.t0))
		}
	}
	switch {
	case brokerAt == "proxy":
		for _, a := range proxySaw(r.proxy, d.t0) {
			b.Add(brokerRecord(b, a))
		}
	case brokerAt != "":
		seen := r.broker
		if r.standby != nil {
			seen = r.standby // the survivor: where the fleet arrived
		}
		for _, a := range (brokerObserver{seen.Recorder()}).since(d.t0) {
			b.Add(brokerRecord(b, a))
		}
	}
	if err := b.Fill(rep); err != nil {
		return nil, err
	}
	rep.Limit, rep.BrokerBackS = report.LimitOf(c.AdmitRate, len(r.ids)), b.Back().Seconds()
	if c.Transport == plan.TLS && r.broker != nil {
		rep.TLS = report.TLSCostOf(r.handshakeCPU, rep.Broker)
	}
	if r.proxy != nil {
		k := r.proxy.Recorder().Counts()
		rep.Proxy = &report.ProxyCounts{Admitted: k.Accepted, Refused: k.Refused, Throttled: k.Throttled, Dropped: k.Dropped,
			Unreachable: k.Unreachable, Overflowed: k.Overflowed}
	}
	return rep, nil
}

// ErrLost is wrapped when telemetry went missing.
var ErrLost = errors.New("fleetsim: telemetry lost")

// ErrNotRecovered is wrapped when a run ends with devices still offline,
// whichever engine ran it.
var ErrNotRecovered = report.ErrNotRecovered

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
