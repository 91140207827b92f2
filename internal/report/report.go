// Package report is what a storm run found, built the same way whichever
// engine made the attempts. A Builder takes every attempt.Record as it is
// made (the engines' attempt.Sink). It judges both views of them with
// stormstats and fills a Report. A Report prints as a summary and a table.
// It writes report.json, events.csv, arrivals.svg and report.html. Merge
// rebuilds one report from the events.csv of a fleet's shards.
package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/rendezvous"
	"github.com/herdguard/herdguard/internal/report/external"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Report is what a run found, in four parts; report.json holds their keys
// side by side (docs/simulator.md has each).
type Report struct {
	Setup
	Findings
	Measures
	Parts

	events         []attempt.Record // kept for WriteFiles, unless streamed or dropped
	eventsStreamed bool             // written to Plan.Events as the run went
	eventsDropped  bool
	recovered      int
	stranded       int
}

// Setup is what a report's run was.
type Setup struct {
	Scenario  plan.Scenario `json:"scenario"`
	Policy    string        `json:"policy"`
	Engine    plan.Engine   `json:"engine"`
	Transport string        `json:"transport"`
	Devices   int           `json:"devices"`
	Seed      uint64        `json:"seed"`
	TimeScale float64       `json:"time_scale"`
	// DisruptionUnixMS anchors the unscaled times, to merge shards.
	DisruptionUnixMS int64  `json:"disruption_unix_ms"`
	Shard            string `json:"shard,omitempty"`
	// Sync is how a shard (or a run timed by -disrupt-at) struck the
	// storm with the others; nil for a run on its own.
	Sync *Sync `json:"sync,omitempty"`
	// Incomplete says why the run stopped before its end ("interrupted"):
	// its figures are what it had seen by then.
	Incomplete string `json:"incomplete,omitempty"`
}

// Findings are how the fleet came back and what the broker saw of it.
type Findings struct {
	Recovery Recovery `json:"recovery"`
	Attempts Attempts `json:"attempts"`
	// Verdict is the fleet's: Fleet.Judgement.Verdict, or on a timeline its
	// recoveries' together (Disruptions).
	Verdict stormstats.Verdict `json:"verdict"`
	// Fleet is every attempt the devices made, refused dials included:
	// synchronisation is a property of the devices' schedule.
	Fleet Side `json:"fleet"`
	// Broker is what reached the broker, when the run can see it.
	Broker *Side `json:"broker,omitempty"`
	// Admitted is the sessions admitted: by the broker as it saw them, or
	// as the devices did when the run cannot see the broker's side.
	Admitted stormstats.Arrivals `json:"admitted"`
	Limit    *Limit              `json:"limit,omitempty"`
	// BrokerBackS is when the broker returned, in seconds after the
	// disruption (restart scenarios).
	BrokerBackS float64 `json:"broker_back_s,omitempty"`
	// WatchedS is how long after the disruption the run watched for
	// attempts: a cap past the last device's return, or where it gave up.
	WatchedS float64 `json:"watched_s"`
}

// Measures are what the run measured beside the attempts: its host, and,
// where it had them, the telemetry, the silent path, the fault proxy and
// TLS.
type Measures struct {
	Host Host `json:"host"`
	// Telemetry is what the devices' store-and-forward queues did over the
	// whole run, when it had telemetry.
	Telemetry *Telemetry `json:"telemetry,omitempty"`
	// Noticed is how long after the path went silent each device noticed
	// (blackhole: through its keepalive), unscaled.
	Noticed *Noticed `json:"noticed,omitempty"`
	// Proxy is what the fault proxy did with the connections it was asked
	// for since the disruption, when one stood in the path.
	Proxy *ProxyCounts `json:"proxy,omitempty"`
	// TLS is what the handshakes cost the broker, with -transport tls.
	TLS *TLSCost `json:"tls,omitempty"`
	// External is how someone else's fleet was told apart, stormed through
	// the proxy (devicesim proxy), and Inferred which reconnect policy it
	// runs.
	External *external.Devices `json:"external,omitempty"`
	Inferred *external.Policy  `json:"inferred_policy,omitempty"`
}

// Parts are the run's parts, each judged on its own: a timeline's
// disruptions, a cluster's nodes, a mixed fleet's groups, and a storm
// file's expectations.
type Parts struct {
	// Disruptions are a timeline's, each recovery judged on its own; the
	// run's Verdict is then theirs together (waves if any recovery came in
	// waves).
	Disruptions []DisruptionReport `json:"disruptions,omitempty"`
	// Nodes are a cluster's: what each node took, and its busiest second.
	Nodes []NodeReport `json:"nodes,omitempty"`
	// Groups are a mixed fleet's groups, each judged on its own.
	Groups []GroupReport `json:"groups,omitempty"`
	// Expectations are a storm file's, each checked against this report.
	Expectations []Expectation `json:"expectations,omitempty"`
}

// Recovered is how many devices came back within the run.
func (r *Report) Recovered() int { return r.recovered }

// Stranded is how many devices tried to come back and never did. Trying
// means making an attempt since the disruption. It is none when every
// device the run disrupted is back, whether or not it disrupted all of
// them. A disruption of one node of a cluster leaves the others' sessions
// be.
func (r *Report) Stranded() int { return r.stranded }

// Events returns the Fleet records the report kept for WriteFiles: none
// when the run streamed them (Plan.Events) or DropEvents dropped them.
func (r *Report) Events() []attempt.Record { return r.events }

// Side is one view of a run's attempts and the judgement of their timing.
type Side struct {
	// MeasuredAt says whose clock the arrivals are on: "devices" (each
	// attempt as its device started it), "broker" (the in-process broker's
	// accept) or "config-server" (each request, config-outage).
	MeasuredAt string               `json:"measured_at"`
	Arrivals   stormstats.Arrivals  `json:"arrivals"`
	Judgement  stormstats.Judgement `json:"judgement"`

	hist *stormstats.Histogram
}

type Recovery struct {
	P50S         float64 `json:"p50_s"`
	P95S         float64 `json:"p95_s"`
	P99S         float64 `json:"p99_s"`
	MaxS         float64 `json:"max_s"`
	AllRecovered bool    `json:"all_recovered"`
	// near99 is p98.5 and p99.5 (Near99); not in report.json.
	near99 [2]float64
}

// Near99 is the recovery at p98.5 and p99.5: the ranks about p99. Where
// devices come back in rounds (iotcore's, 32 s apart), ten devices in
// 2,000 back or not move p99 a whole round; a comparison of two runs
// reads these too. Zero in a report read from JSON.
func (r Recovery) Near99() (lo, hi float64) { return r.near99[0], r.near99[1] }

// recoveryOf is the percentiles of each device's recovery time in seconds.
// It sorts xs. AllRecovered is the caller's to set. It is zero when no
// device recovered (an interrupted run's, say). JSON can carry zero, and
// not NaN.
func recoveryOf(xs []float64) Recovery {
	if len(xs) == 0 {
		return Recovery{}
	}
	p := stormstats.Percentiles(xs, 50, 95, 98.5, 99, 99.5, 100)
	return Recovery{P50S: p[0], P95S: p[1], P99S: p[3], MaxS: p[5], near99: [2]float64{p[2], p[4]}}
}

// TLSCost is the broker's CPU spent on TLS handshakes. It is one
// handshake's CPU times the connections that reached the broker since the
// disruption. The handshake is measured on the broker's half alone
// (testbroker.HandshakeCPU, mutual TLS, ECDSA P-256, no session
// resumption).
type TLSCost struct {
	// HandshakeCPUMS is per connection. It is 0 where it cannot be
	// measured.
	HandshakeCPUMS float64 `json:"handshake_cpu_ms"`
	Handshakes     int64   `json:"handshakes"`
	CPUS           float64 `json:"cpu_s"`
}

func TLSCostOf(perHandshake time.Duration, broker *Side) *TLSCost {
	t := &TLSCost{HandshakeCPUMS: float64(perHandshake) / 1e6}
	if broker != nil {
		t.Handshakes = broker.Arrivals.Count
	}
	t.CPUS = float64(t.Handshakes) * perHandshake.Seconds()
	return t
}

// ProxyCounts is the fault proxy's connections by outcome: admitted ones
// reached the broker (a count the broker's own log can confirm).
type ProxyCounts struct {
	Admitted int `json:"admitted"`
	// Answered is how many of those the broker answered. The broker may
	// never take one from its backlog before the device gives up. That one
	// is admitted but not answered, and not in the broker's log.
	Answered    int `json:"answered"`
	Refused     int `json:"refused"`
	Throttled   int `json:"throttled"`
	Dropped     int `json:"dropped"`
	Unreachable int `json:"unreachable"`
	// Overflowed counts connections cut off for sending more than
	// faultproxy.MaxHeldBytes while held.
	Overflowed int `json:"overflowed"`
}

// Add adds o's counts to c's: several proxies' together.
func (c *ProxyCounts) Add(o ProxyCounts) {
	c.Admitted += o.Admitted
	c.Answered += o.Answered
	c.Refused += o.Refused
	c.Throttled += o.Throttled
	c.Dropped += o.Dropped
	c.Unreachable += o.Unreachable
	c.Overflowed += o.Overflowed
}

// Noticed is when the devices noticed a silent path.
type Noticed struct {
	// Devices noticed through their keepalive while the path was silent;
	// the percentiles are theirs.
	Devices int     `json:"devices"`
	P50S    float64 `json:"p50_s"`
	P99S    float64 `json:"p99_s"`
	MaxS    float64 `json:"max_s"`
	// AtEnd noticed only when the path came back and reset them: their
	// keepalive and ping timeout outlasted the silence.
	AtEnd int `json:"at_end"`
}

// noticedOf summarises real-time notice delays in unscaled seconds, those
// before the end of a silence of length silent apart from the rest.
func noticedOf(delays []time.Duration, timeScale float64, silent time.Duration) *Noticed {
	var xs []float64
	n := &Noticed{}
	for _, d := range delays {
		if s := d.Seconds() * timeScale; s < silent.Seconds() {
			xs = append(xs, s)
		} else {
			n.AtEnd++
		}
	}
	n.Devices = len(xs)
	if len(xs) > 0 {
		p := stormstats.Percentiles(xs, 50, 99, 100)
		n.P50S, n.P99S, n.MaxS = p[0], p[1], p[2]
	}
	return n
}

// Attempts counts connect attempts from the disruption to full recovery.
type Attempts struct {
	Total         int64   `json:"total"` // made by the devices, including refused dials
	PerDeviceMean float64 `json:"per_device_mean"`
	PerDeviceMax  int64   `json:"per_device_max"`
	// Refused: attempts that did not end in a session (dial refused during
	// the outage, CONNACK refusals, timeouts).
	Refused int64 `json:"refused"`
	// AfterReturnPerDeviceMean counts only the attempts the devices made
	// once the broker was back.
	AfterReturnPerDeviceMean float64 `json:"after_return_per_device_mean"`
}

// Limit is the broker's admission limit and the recovery it allows at best.
type Limit struct {
	AdmitRate      float64 `json:"admit_rate"`
	IdealRecoveryS float64 `json:"ideal_recovery_s"` // devices / admit_rate
}

// Host records what the run cost on this machine.
type Host struct {
	WallS             float64 `json:"wall_s"`
	MemoryPerDeviceKB float64 `json:"memory_per_device_kib"` // heap + stack, agent and broker side
	// ResidentPerDeviceKB: the peak resident memory the processes that ran
	// the devices added from their start, per device (a child's, where the
	// devices ran in children; beside the broker and proxy otherwise).
	// CPUPerDeviceMS: the CPU those processes had from then to the end of
	// the run, before its report is judged, per device. KernelTCPKB: the kernel's TCP buffers, machine-wide, at
	// the report (/proc/net/sockstat).
	ResidentPerDeviceKB float64 `json:"resident_per_device_kib,omitempty"`
	CPUPerDeviceMS      float64 `json:"cpu_per_device_ms,omitempty"`
	KernelTCPKB         float64 `json:"kernel_tcp_kib,omitempty"`
	// AgentProcesses: child processes the agents ran in (0: this one).
	AgentProcesses int `json:"agent_processes,omitempty"`
	// LagP50S and LagP99S: how late (unscaled) real agents started their
	// attempts against their own schedules, what the host added.
	LagP50S float64 `json:"lag_p50_s,omitempty"`
	LagP99S float64 `json:"lag_p99_s,omitempty"`
	// NoticeP99S: how long (unscaled) after the disruption the devices
	// noticed their sessions had ended; each schedule starts there.
	NoticeP99S float64 `json:"notice_p99_s,omitempty"`
	// Bound: the host, not the fleet, set the timing: attempts left or
	// losses were noticed more than HostBoundLate late at the 99th
	// percentile. Lower the time scale or the fleet.
	Bound bool `json:"host_bound"`
}

// LateP99S is how late (unscaled, p99) the host ran the fleet: the later
// of its attempts' start and its losses' notice. Beyond HostBoundLate the
// host bound the run.
func (h Host) LateP99S() float64 { return max(h.LagP99S, h.NoticeP99S) }

// HostBoundLate is the lateness (unscaled, p99) beyond which a run's
// figures are the host's. Half a second moves every recovery time by up to
// half of the 1 s the two engines are held to agree within. It also blurs
// bursts narrower than a second, the jitter of the mission's formula.
const HostBoundLate = 500 * time.Millisecond

// JSON encodes the report as report.json holds it.
func (r *Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// Summary writes the human-readable summary.
func (r *Report) Summary(w io.Writer) {
	r.writeRecovery(w)
	r.External.Write(w)
	r.Inferred.Write(w)
	r.writeParts(w)
	r.writePaths(w)
	r.writeVerdicts(w)
	r.writeHost(w)
}

// writeRecovery writes what was run and how the fleet came back: recovery
// times, attempts, and the admission limit's ideal.
func (r *Report) writeRecovery(w io.Writer) {
	if r.Incomplete != "" {
		fmt.Fprintf(w, "INCOMPLETE (%s): what the run had seen when it stopped\n", r.Incomplete)
	}
	fmt.Fprintf(w, "%s, %d devices, policy %s, %s transport, time scale %gx (times below are unscaled)\n",
		r.Scenario, r.Devices, r.Policy, r.Transport, r.TimeScale)
	// A timeline leads with each disruption's own recovery: the whole
	// run's spans every outage, and is read after them.
	for _, d := range r.Disruptions {
		fmt.Fprintf(w, "disruption at %.0f s: recovery p99 %.1f s after it, all back: %v; verdict %s\n",
			d.AtS, d.Recovery.P99S, d.Recovery.AllRecovered, d.Verdict)
	}
	what := "recovery"
	if len(r.Disruptions) > 0 {
		what = "the whole run, from the first disruption"
	}
	rc := r.Recovery
	if rc == (Recovery{}) {
		fmt.Fprintln(w, what+": no device recovered")
	} else {
		fmt.Fprintf(w, "%s: p50 %.1f s, p95 %.1f s, p99 %.1f s, max %.1f s; all recovered: %v\n",
			what, rc.P50S, rc.P95S, rc.P99S, rc.MaxS, rc.AllRecovered)
	}
	a := r.Attempts
	fmt.Fprintf(w, "attempts: %d (%.1f per device, max %d), %d refused; %.2f per device once the disruption ended\n",
		a.Total, a.PerDeviceMean, a.PerDeviceMax, a.Refused, a.AfterReturnPerDeviceMean)
	if r.Limit != nil {
		fmt.Fprintf(w, "admission limit %.0f/s: ideal recovery %.1f s after the return; p99 took %.1f s from the disruption\n",
			r.Limit.AdmitRate, r.Limit.IdealRecoveryS, rc.P99S)
	}
}

// writePaths writes what the run measured on the way to the broker and
// back, where it did: TLS, the fault proxy, a silent path noticed, the
// telemetry.
func (r *Report) writePaths(w io.Writer) {
	if t := r.TLS; t != nil {
		fmt.Fprintf(w, "TLS (mutual, ECDSA P-256, no resumption): %.2f ms of broker CPU a handshake, %d handshakes since the disruption: %.1f s of broker CPU\n",
			t.HandshakeCPUMS, t.Handshakes, t.CPUS)
	}
	if p := r.Proxy; p != nil {
		fmt.Fprintf(w, "fault proxy: %d connections let through to the broker (%d answered), %d refused, %d throttled, %d dropped unsent, %d found the broker unreachable\n",
			p.Admitted, p.Answered, p.Refused, p.Throttled, p.Dropped, p.Unreachable)
		if p.Overflowed > 0 {
			fmt.Fprintf(w, "fault proxy: %d connections cut off for sending more than %d bytes while held\n", p.Overflowed, faultproxy.MaxHeldBytes)
		}
	}
	if n := r.Noticed; n != nil {
		fmt.Fprintf(w, "the silent path was noticed through keepalive by %d devices", n.Devices)
		if n.Devices > 0 {
			fmt.Fprintf(w, ": p50 %.1f s, p99 %.1f s, max %.1f s after it went silent", n.P50S, n.P99S, n.MaxS)
		}
		if n.AtEnd > 0 {
			fmt.Fprintf(w, "; %d only when it came back and reset them (keepalive + ping timeout outlasted it)", n.AtEnd)
		}
		fmt.Fprintln(w)
	}
	if t := r.Telemetry; t != nil {
		fmt.Fprintf(w, "telemetry (%g/s per device, whole run): %d enqueued, %d acknowledged, %d received once, %d duplicates, %d publish failures retried, %d dropped by full queues, %d lost\n",
			t.RatePerDevice, t.Enqueued, t.Acknowledged, t.ReceivedUnique, t.Duplicates, t.Retried, t.DroppedOldest, t.Lost)
	}
}

// writeVerdicts writes the judgement of the fleet's attempts and of what
// reached the broker, the largest burst against the admission limit, and
// the run's verdict.
func (r *Report) writeVerdicts(w io.Writer) {
	at := stormstats.Clock{Base: time.UnixMilli(r.DisruptionUnixMS)}
	fmt.Fprintf(w, "the fleet (every attempt the devices made%s):\n", r.Fleet.about())
	stormstats.WriteSummary(w, "  ", r.Fleet.Arrivals, r.Fleet.Judgement, at)
	if b := r.Broker; b != nil {
		what := "what reached it"
		if b.MeasuredAt == "proxy" {
			what = "what the fault proxy let through to it: the connections it saw"
		}
		fmt.Fprintf(w, "the broker (%s):\n", what)
		stormstats.WriteSummary(w, "  ", b.Arrivals, b.Judgement, at)
	}
	if l := r.Limit; l != nil && len(r.Fleet.Judgement.Bursts) > 0 {
		big := slices.MaxFunc(r.Fleet.Judgement.Bursts, func(a, b stormstats.Burst) int { return cmp.Compare(a.Count, b.Count) })
		fmt.Fprintf(w, "the largest burst asked for %.0fx the admission rate: %d attempts within %.3f s against %.0f/s\n",
			big.PeakPerS/l.AdmitRate, big.Count, big.WidthS, l.AdmitRate)
	}
	fmt.Fprintf(w, "verdict: %s\n", r.Verdict)
}

// writeHost writes what the host cost and how late it was, and says so
// when it, not the fleet, set the times.
func (r *Report) writeHost(w io.Writer) {
	if r.Engine == plan.Proxy {
		r.writeProxyHost(w)
		return
	}
	fmt.Fprintf(w, "host: %.1f s wall, %.1f KiB per device", r.Host.WallS, r.Host.MemoryPerDeviceKB)
	if h := r.Host; h.ResidentPerDeviceKB > 0 {
		fmt.Fprintf(w, " (%.1f KiB resident, %.2f ms CPU)", h.ResidentPerDeviceKB, h.CPUPerDeviceMS)
	}
	if r.Host.AgentProcesses > 0 {
		fmt.Fprintf(w, ", devices in %d child process%s", r.Host.AgentProcesses, map[bool]string{true: "es"}[r.Host.AgentProcesses > 1])
	}
	if h := r.Host; h.LagP99S > 0 || h.NoticeP99S > 0 {
		fmt.Fprintf(w, "; attempts left p50 %.0f ms, p99 %.0f ms late against their schedules, losses noticed within %.0f ms (p99, unscaled)",
			1000*h.LagP50S, 1000*h.LagP99S, 1000*h.NoticeP99S)
		if !h.Bound {
			fmt.Fprintf(w, ": %.0f %% of the %v line", 100*h.LateP99S()/HostBoundLate.Seconds(), HostBoundLate)
		}
	}
	fmt.Fprintln(w)
	if r.Host.Bound {
		fmt.Fprintf(w, "HOST-BOUND: the host, not the fleet, set these times (more than %v late at the 99th percentile): lower -time-scale or -devices\n", HostBoundLate)
	}
}

// writeProxyHost writes how well the proxy's host kept its clock: the
// proxies stamp what they see no finer than its timers ran.
func (r *Report) writeProxyHost(w io.Writer) {
	h := r.Host
	fmt.Fprintf(w, "host: %.1f s wall; the proxy's timers ran p50 %.0f ms, p99 %.0f ms late: its stamps are that fine\n",
		h.WallS, 1000*h.LagP50S, 1000*h.LagP99S)
	if h.Bound {
		fmt.Fprintf(w, "HOST-BOUND: the proxy's host, not the fleet, set these times (more than %v late at the 99th percentile): "+
			"give the proxy a quieter host\n", HostBoundLate)
	}
}

// writeParts writes a line for each of the run's parts judged on its own.
// The parts are each disruption of a timeline, each node of a cluster (with
// its proxy's counts), and each group of a mixed fleet.
func (r *Report) writeParts(w io.Writer) {
	for _, n := range r.Nodes {
		fmt.Fprintf(w, "node %d: %d connects taken, busiest second %.0f/s", n.Node, n.Arrivals.Count, n.Arrivals.PeakPerS1s)
		if p := n.Proxy; p != nil {
			fmt.Fprintf(w, "; its proxy let %d through (%d answered), refused %d", p.Admitted, p.Answered, p.Refused)
		}
		fmt.Fprintln(w)
	}
	if len(r.Disruptions) > 0 {
		fmt.Fprintf(w, "the run's verdict is its %d recoveries' together (%s); the series below are the whole run's, disruptions and all\n",
			len(r.Disruptions), r.Verdict)
	}
	for _, g := range r.Groups {
		fmt.Fprintf(w, "group %s (%s, %d devices): recovery p99 %.1f s, all back: %v; %.1f attempts per device; verdict %s\n",
			g.Name, g.Policy, g.Devices, g.Recovery.P99S, g.Recovery.AllRecovered, g.Attempts.PerDeviceMean, g.Verdict)
	}
}

// about says where a side was measured, when that is not the devices.
func (s Side) about() string {
	if s.MeasuredAt == "devices" {
		return ", refused dials included"
	}
	return ", as the " + s.MeasuredAt + " saw them"
}

// CompareTable writes one row per report: recovery, attempts, the fleet's
// busiest second, synchrony and verdict, and the broker's.
func CompareTable(w io.Writer, reports []*Report) {
	name := 22 // the widest policy spec's, at least
	for _, r := range reports {
		name = max(name, len(r.Policy))
	}
	fmt.Fprintf(w, "%-*s %14s %16s %13s %10s %-8s %15s %s\n", name, "policy", "recovery p99", "attempts/device",
		"peak/s (1 s)", "synchrony", "verdict", "broker peak/s", "broker verdict")
	for _, r := range reports {
		p99 := fmt.Sprintf("%.1f s", r.Recovery.P99S)
		if !r.Recovery.AllRecovered {
			p99 = "> " + p99 // p99 of those that came back; some did not
		}
		bPeak, bVerdict := "-", "-"
		if b := r.Broker; b != nil {
			bPeak, bVerdict = fmt.Sprintf("%.0f", b.Arrivals.PeakPerS1s), string(b.Judgement.Verdict)
		}
		fmt.Fprintf(w, "%-*s %14s %16.1f %13.0f %10.2f %-8s %15s %s\n", name, r.Policy, p99, r.Attempts.PerDeviceMean,
			r.Fleet.Arrivals.PeakPerS1s, r.Fleet.Judgement.Synchrony, r.Verdict, bPeak, bVerdict)
	}
}

// WriteFiles writes events.csv (unless the run streamed its events to
// Config.Events), arrivals.svg, report.html and, last and whole,
// report.json into dir: a reader that sees report.json sees the rest
// (awaitReports). dir may be shared with others: each file is written
// whole through dir's handle and then replaces what was there, so a link
// or FIFO planted in its place is never followed or opened, and another
// user's file is never emptied (datadir.WriteShared). dir is refused if it
// is a link, or if others may write to it without the sticky bit.
func (r *Report) WriteFiles(dir string) error {
	if r.eventsDropped {
		return fmt.Errorf("report: the report's events were dropped; write its files before DropEvents")
	}
	d, err := datadir.MkdirShared(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	b, err := r.JSON()
	if err != nil {
		return err
	}
	if !r.eventsStreamed {
		if err := writeEvents(d, r.events, time.UnixMilli(r.DisruptionUnixMS), r.TimeScale); err != nil {
			return err
		}
	}
	if err := writeCharts(d, []*Report{r}); err != nil {
		return err
	}
	return datadir.WriteShared(d, "report.json", 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// awaitReports waits up to wait (or until ctx ends) for a report.json in
// each of dirs, as WriteFiles writes it last, and names the directories
// still without one. Other processes write them, on a volume that may be
// a file server's: it looks once a second.
func awaitReports(ctx context.Context, dirs []string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	missing := dirs
	for {
		var still []string // a report, once written whole, stays
		for _, d := range missing {
			if _, err := os.Stat(filepath.Join(d, "report.json")); err != nil {
				still = append(still, d)
			}
		}
		missing = still
		switch {
		case len(missing) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("no report in %s after %v", strings.Join(missing, ", "), wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// WriteCharts writes arrivals.svg and report.html for reports (one run, or a
// compare run's) into dir, which must exist, as WriteFiles writes them.
func WriteCharts(dir string, reports []*Report) error {
	d, err := datadir.OpenSharedDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return writeCharts(d, reports)
}

func writeCharts(dir *os.File, reports []*Report) error {
	svg, err := ChartSVG(reports)
	if err != nil {
		return err
	}
	if err := datadir.WriteShared(dir, "arrivals.svg", 0o644, func(w io.Writer) error {
		_, err := w.Write(svg)
		return err
	}); err != nil {
		return err
	}
	return datadir.WriteShared(dir, "report.html", 0o644, func(w io.Writer) error { return WriteHTML(w, reports) })
}

// Telemetry counts a run's messages over the whole run (boot, disruption,
// recovery, drain).
type Telemetry struct {
	RatePerDevice float64 `json:"rate_per_device_per_s"` // unscaled
	Enqueued      uint64  `json:"enqueued"`
	Acknowledged  uint64  `json:"acknowledged"` // PUBACKed and removed from the queues
	Retried       uint64  `json:"publish_failures_retried"`
	DroppedOldest uint64  `json:"dropped_oldest"` // queue overflow
	QueuedAtEnd   int     `json:"queued_at_end"`
	// ReceivedUnique and Duplicates are counted by the in-process broker
	// (per device and sequence number); -1 against an external broker.
	ReceivedUnique int `json:"received_unique"`
	Duplicates     int `json:"duplicates"`
	// Lost: enqueued, never dropped by the queue, not queued, and not
	// received (acknowledged, against an external broker). 0 is the point.
	Lost int64 `json:"lost"`
}

// ErrNotRecovered is wrapped when a run ends with devices still offline,
// whichever engine ran it.
var ErrNotRecovered = errors.New("not every device recovered")

// limitOf is the admission limit a run applies and the recovery it allows
// devices at best, or nil without one.
func limitOf(admitRate float64, devices int) *Limit {
	if admitRate <= 0 {
		return nil
	}
	return &Limit{AdmitRate: admitRate, IdealRecoveryS: float64(devices) / admitRate}
}

// HeapInUse is the heap and stacks in use after a collection: what a
// run's devices hold, measured before and after they start.
func HeapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// Sync is what a shard's merge must agree on with the others': the plan
// every shard was asked to run, and when and by what clock it struck.
type Sync struct {
	// PlanHash is rendezvous.Hash of Plan, the plan's shared settings
	// (plan.Plan.Shared).
	PlanHash string   `json:"plan_hash"`
	Plan     []string `json:"plan"`
	// DisruptAt is the strike as asked (-disrupt-at), StrikeUnixMS the
	// instant it named, on this host's clock.
	DisruptAt    string `json:"disrupt_at,omitempty"`
	StrikeUnixMS int64  `json:"strike_unix_ms,omitempty"`
	// ClockOffsetMS is this host's clock less the shared volume's, from the
	// shards' rendezvous; nil without one.
	ClockOffsetMS *float64 `json:"clock_offset_ms,omitempty"`
}

// New starts the report of a run of plan p on engine over transport,
// devices strong, disrupted at t0.
func New(p plan.Plan, engine plan.Engine, transport string, devices int, t0 time.Time) *Report {
	r := &Report{Setup: Setup{Scenario: p.Scenario, Policy: p.Policy, Engine: engine, Transport: transport, Devices: devices,
		Seed: p.Seed, TimeScale: p.TimeScale, DisruptionUnixMS: t0.UnixMilli(), Shard: p.Shard.String()}}
	if p.Shard.Count > 0 || !p.DisruptAt.IsZero() {
		shared := p.Shared()
		r.Sync = &Sync{PlanHash: rendezvous.Hash(shared), Plan: shared, DisruptAt: p.DisruptAt.String()}
	}
	return r
}

// Expectation is one thing a storm file asked of the run, and whether the
// run showed it.
type Expectation struct {
	What string `json:"what"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

// GroupReport is one group of a mixed fleet: its recovery, attempts and
// verdict, as if it were a fleet of its own on the same broker.
type GroupReport struct {
	Name     string             `json:"name"`
	Policy   string             `json:"policy"`
	Devices  int                `json:"devices"`
	Labels   map[string]string  `json:"labels,omitempty"`
	Recovery Recovery           `json:"recovery"`
	Attempts Attempts           `json:"attempts"`
	Verdict  stormstats.Verdict `json:"verdict"`
	Fleet    Side               `json:"fleet"`
	Broker   *Side              `json:"broker,omitempty"`
	// Disruptions and Nodes are the group's own, on a timeline or a
	// cluster.
	Disruptions []DisruptionReport `json:"disruptions,omitempty"`
	Nodes       []NodeReport       `json:"nodes,omitempty"`
}

// DisruptionReport is the recovery from one disruption of a timeline: each
// device's admission after it that stayed (its last before the next), and
// the arrivals until the next.
type DisruptionReport struct {
	AtS      float64            `json:"at_s"` // since the first disruption
	Recovery Recovery           `json:"recovery"`
	Verdict  stormstats.Verdict `json:"verdict"`
	Fleet    Side               `json:"fleet"`
	Broker   *Side              `json:"broker,omitempty"`
}

// NodeReport is what one node of a cluster took.
type NodeReport struct {
	Node     int                 `json:"node"`
	Arrivals stormstats.Arrivals `json:"arrivals"`
	// Proxy is what the node's own fault proxy counted, when each node of
	// the cluster stands behind one.
	Proxy *ProxyCounts `json:"proxy,omitempty"`
	hist  *stormstats.Histogram
}
