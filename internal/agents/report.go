package agents

import (
	"math"
	"time"

	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// hostTimerPrecision is how finely a loaded host keeps thousands of agents'
// timers. No burst narrower than this (times the time scale, unscaled) can
// be told from the host starting attempts in batches.
const hostTimerPrecision = 2 * time.Millisecond

// Report is rec's window as the report has it, as the virtual engine
// reports the same storm. It holds what the devices did and, where the
// run sees it, what reached the broker, from the window's first
// disruption on. Each node of a cluster is counted on its own, by its
// proxy where one stands in front of it. Each of the window's
// disruptions has its recovery judged on its own. Report then lets go of
// the window's records, so that a fleet that lives through storm after
// storm holds one storm's at most: a window is reported once. A fleet
// whose agents run in child processes hands them rec.T0 here
// (releaseChildren) and takes their reports: it reports one window. end
// is what the caller knows of the run as it ends (whether it finished,
// when it started, its Host and Telemetry); the rest of it (until when,
// the proxies' counts, TLS, the strike) is the fleet's own.
func (f *Fleet) Report(rec Watch, end report.End) (*report.Report, error) {
	defer f.forget()
	if err := f.releaseChildren(rec.T0); err != nil {
		return nil, err
	}
	p := f.p
	fleetAt, brokerAt, transport := f.vantage()
	b := report.NewBuilder(report.Run{Plan: p, Engine: p.Engine, Transport: transport, Devices: len(f.ids), Indexes: p.Devices,
		T0: rec.T0, Returned: rec.Returned, TimeScale: p.TimeScale, FleetAt: fleetAt, BrokerAt: brokerAt, Events: p.Events,
		Groups: p.GroupsOrWhole(), Disruptions: rec.At, Nodes: p.ClusterNodes(),
		// The proxy knows a connection reached the broker, not whether the
		// broker accepted it: recovery is the devices' word for it then.
		FleetAdmits: brokerAt == "proxy",
		MinWidth:    time.Duration(p.TimeScale * float64(hostTimerPrecision))})
	f.addFleetSide(b, rec)
	switch {
	case brokerAt == "proxy":
		// What reached the broker is what the proxy let through: a dial it
		// refused, held or cut off never did.
		f.nodes.AddPassed(b, rec.T0)
	case brokerAt != "":
		seen := observer.Brokers{}
		for _, n := range f.nodes.Brokers {
			seen = append(seen, n.Recorder())
		}
		if f.nodes.Standby != nil {
			// the survivor: where the fleet arrived
			seen = observer.Brokers{f.nodes.Standby.Recorder()}
		}
		seen.AddTo(b, rec.T0)
	}
	end.Until = rec.Until
	if st := f.struckAt; st != nil {
		end.Struck, end.ClockOffset = st.at, st.offset
	}
	if p.Transport == plan.TLS && len(f.nodes.Brokers) > 0 {
		end.Handshake = &f.nodes.HandshakeCPU
	}
	end.Proxy, end.ProxyByNode = f.nodes.ProxyCounts()
	return b.Report(end)
}

// releaseChildren hands a fleet's child processes t0, once, and takes
// their reports of the window from it.
func (f *Fleet) releaseChildren(t0 time.Time) error {
	if f.children == nil || f.childReports != nil {
		return nil
	}
	reports, err := f.children.Release(t0)
	f.childReports = reports
	return err
}

// forget lets go of the attempts recorded so far, keeping the messages
// the brokers received (telemetry counts the whole run).
func (f *Fleet) forget() {
	f.devlog.Forget()
	f.nodes.Forget()
}

// vantage is where the report's two sides are measured, and the transport
// it names: "external" when the broker is not the in-process one.
func (f *Fleet) vantage() (fleetAt, brokerAt, transport string) {
	transport = string(f.p.Transport)
	switch {
	case f.p.Scenario == plan.ConfigOutage:
		return "config-server", "", transport // every request reaches it
	case len(f.nodes.Brokers) == 0 && len(f.nodes.Proxies) > 0:
		return "devices", "proxy", "external"
	case len(f.nodes.Brokers) == 0:
		return "devices", "", "external"
	case f.nodes.Standby != nil:
		return "devices", "standby broker", transport
	}
	return "devices", "broker", transport
}

// addFleetSide adds what the devices did since the window's start. In
// config-outage that is the config server's requests. Where their agents
// ran beside nobody's proxy, it is the children's own records; else it is
// the devices' log here. It also adds how soon they noticed each
// disruption.
func (f *Fleet) addFleetSide(b *report.Builder, rec Watch) {
	t0 := rec.T0
	switch {
	case f.p.Scenario == plan.ConfigOutage:
		f.addConfigRequests(b, t0)
	case len(f.childReports) > 0 && len(f.nodes.Proxies) == 0: // reported from the same t0
		for _, cr := range f.childReports {
			for _, e := range cr.Events() {
				b.Add(e)
			}
		}
	default:
		f.devlog.AddTo(b, t0)
		// observe's t0 is the first loss noticed
		if f.p.Scenario != plan.BootStorm && f.p.Scenario != plan.Observe {
			f.addNotices(b, rec)
		}
	}
}

// addNotices adds how long the devices took to notice each disruption of
// the window that ended their sessions, from its own start. That is the
// host's lateness (Builder.Noticed). After a black hole, which the
// devices notice only through their keepalive, it is the fleet's own
// figure (Builder.NoticedSilence). A child's window is its parent's first
// disruption.
func (f *Fleet) addNotices(b *report.Builder, rec Watch) {
	events, at := rec.Disruptions, rec.At
	if len(at) == 0 {
		events, at = f.p.Timeline()[:1], []time.Duration{0}
	}
	starts := make([]time.Time, len(at))
	for k := range at {
		starts[k] = rec.T0.Add(f.scale(at[k]))
	}
	var host, silent []time.Duration
	longest := time.Duration(-1)
	for k, delays := range f.devlog.Noticed(starts) {
		if events[k].Scenario != plan.Blackhole {
			host = append(host, delays...)
			continue
		}
		outage := f.scale(events[k].Outage)
		longest = max(longest, outage)
		for _, d := range delays {
			if d >= outage { // noticed only when the path came back: past every black hole's end
				d = math.MaxInt64
			}
			silent = append(silent, d)
		}
	}
	b.Noticed(host)
	if longest >= 0 {
		b.NoticedSilence(silent, f.unscale(longest))
	}
}
