package agents

import (
	"time"

	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// hostTimerPrecision is how finely a loaded host keeps thousands of agents'
// timers: no burst narrower than this (times the time scale, unscaled) can
// be told from the host starting attempts in batches.
const hostTimerPrecision = 2 * time.Millisecond

// Report is rec's window as the report has it, as the virtual engine
// reports the same storm: what the devices did and, where the run sees it,
// what reached the broker (each node of a cluster counted on its own),
// from the window's first disruption on, each of its disruptions' recovery
// judged on its own. It then lets go of the window's records, so that a
// fleet that lives through storm after storm holds one storm's at most: a
// window is reported once. A fleet whose agents run in child processes
// hands them rec.T0 here and takes their reports: it reports one window.
// The report's Recovery.AllRecovered, Telemetry and Host are the caller's.
func (f *Fleet) Report(rec Recovery) (*report.Report, error) {
	defer f.forget()
	if f.children != nil && f.childReports == nil {
		reports, err := f.children.Release(rec.T0)
		if err != nil {
			return nil, err
		}
		f.childReports = reports
	}
	p := f.p
	rep := report.New(p, plan.Agents, string(p.Transport), len(f.ids), rec.T0)
	fleetAt, brokerAt := f.vantage(rep)
	b := report.NewBuilder(p.Devices, rec.T0, rec.Returned, p.TimeScale, fleetAt, brokerAt, p.Events)
	b.SplitGroups(p.GroupsOrWhole())
	b.SplitDisruptions(rec.At)
	b.SplitNodes(len(f.nodes))
	// The proxy knows a connection reached the broker, not whether the
	// broker accepted it: recovery is the devices' word for it then.
	b.FleetAdmits = brokerAt == "proxy"
	b.MinWidth = time.Duration(p.TimeScale * float64(hostTimerPrecision))
	b.WatchedUntil(rec.Until)
	f.addFleetSide(b, rep, rec.T0)
	switch {
	case brokerAt == "proxy":
		for _, a := range proxySaw(f.proxy, rec.T0) {
			b.Add(brokerRecord(b, a))
		}
	case brokerAt != "":
		seen := observer.Brokers{}
		for _, n := range f.nodes {
			seen = append(seen, n.Recorder())
		}
		if f.standby != nil {
			seen = observer.Brokers{f.standby.Recorder()} // the survivor: where the fleet arrived
		}
		for _, a := range seen.Since(rec.T0) {
			b.Add(brokerRecord(b, a))
		}
	}
	if err := b.Fill(rep); err != nil {
		return nil, err
	}
	rep.Limit, rep.BrokerBackS = report.LimitOf(p.AdmitRate, len(f.ids)), b.Back().Seconds()
	if p.Transport == plan.TLS && len(f.nodes) > 0 {
		rep.TLS = report.TLSCostOf(f.handshakeCPU, rep.Broker)
	}
	if f.proxy != nil {
		k := f.proxy.Recorder().Counts()
		rep.Proxy = &report.ProxyCounts{Admitted: k.Accepted, Answered: f.proxy.Recorder().Answered(), Refused: k.Refused, Throttled: k.Throttled, Dropped: k.Dropped,
			Unreachable: k.Unreachable, Overflowed: k.Overflowed}
	}
	return rep, nil
}

// forget lets go of the attempts recorded so far, keeping the messages
// the brokers received (telemetry counts the whole run).
func (f *Fleet) forget() {
	f.devlog.Forget()
	if f.proxy != nil {
		f.proxy.Recorder().Reset()
	}
	for _, b := range append(f.nodes, f.standby) {
		if b != nil {
			b.Recorder().ResetConnections()
		}
	}
}

// vantage is where the report's two sides are measured, and the transport
// it names when the broker is not the in-process one.
func (f *Fleet) vantage(rep *report.Report) (fleetAt, brokerAt string) {
	switch {
	case f.p.Scenario == plan.ConfigOutage:
		return "config-server", "" // every request reaches it
	case len(f.nodes) == 0 && f.proxy != nil:
		rep.Transport = "external"
		return "devices", "proxy"
	case len(f.nodes) == 0:
		rep.Transport = "external"
		return "devices", ""
	case f.standby != nil:
		return "devices", "standby broker"
	}
	return "devices", "broker"
}

// addFleetSide adds what the devices did since t0: the config server's
// requests in config-outage, the children's own records where their agents
// ran beside nobody's proxy, else the devices' log here.
func (f *Fleet) addFleetSide(b *report.Builder, rep *report.Report, t0 time.Time) {
	switch {
	case f.p.Scenario == plan.ConfigOutage:
		for _, a := range f.configAttempts(t0) {
			b.Add(fleetRecord(b, a))
		}
	case len(f.childReports) > 0 && f.proxy == nil: // reported from the same t0
		for _, cr := range f.childReports {
			for _, e := range cr.Events() {
				b.Add(e)
			}
		}
	default:
		for _, a := range f.devlog.Since(t0) {
			b.Add(fleetRecord(b, a))
		}
		switch {
		case f.p.Scenario == plan.BootStorm, f.p.Scenario == plan.Observe: // observe's t0 is the first loss noticed
		case f.p.Scenario == plan.Blackhole: // noticed through keepalive: the fleet's figure, not the host's lateness
			rep.Noticed = report.NoticedOf(f.devlog.Noticed(t0), f.p.TimeScale, f.p.Outage)
		default:
			b.Noticed(f.devlog.Noticed(t0))
		}
	}
}

// fleetRecord is a sighting in a device's log as the report's record: its
// time since the disruption and its lag, unscaled.
func fleetRecord(b *report.Builder, a observer.Sighting) attempt.Record {
	lag := time.Duration(-1)
	if a.Lag >= 0 {
		lag = time.Duration(float64(a.Lag) * b.TimeScale())
	}
	dev, _ := attempt.DeviceIndex(a.ClientID)
	return attempt.Record{T: b.Since(a.At), Lag: lag, Device: int32(dev), Code: int32(a.Code), Outcome: a.Outcome}
}

// brokerRecord is a sighting in a broker's (or the proxy's) recorder as the
// report's record.
func brokerRecord(b *report.Builder, a observer.Sighting) attempt.Record {
	dev, _ := attempt.DeviceIndex(a.ClientID)
	return attempt.Record{T: b.Since(a.At), Lag: -1, Device: int32(dev), Outcome: a.Outcome, Side: attempt.Broker, Node: a.Node}
}
