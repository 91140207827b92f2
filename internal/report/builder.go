package report

import (
	"io"
	"math"
	"time"
	"unsafe"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/hugepage"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/prefetch"
	"github.com/herdguard/herdguard/internal/report/external"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Builder turns a run's attempts into a report, whichever engine made them:
// the engines feed it one attempt.Record at a time (it is their
// attempt.Sink). It takes two views of them:
// every attempt the devices made (refused dials included, which no broker
// sees) and, when the run can see it, what reached the broker. Statistics
// stream into histograms and per-device counters; each attempt's event goes
// to the run's events.csv, or is kept for WriteFiles.
type Builder struct {
	run  Run
	back time.Duration // unscaled: when the broker returned

	fleet, broker stormstats.Histogram
	admissions    stormstats.Histogram // sessions admitted, in the view recovery uses
	events        *eventLog
	until         time.Duration // unscaled: how long after the disruption the run watched

	// Per device index: attempts made, and the last admitted session (the
	// one that stayed). Both are from the broker's view when there is one:
	// it admits, and a device hears of it a moment later. Negative: not
	// admitted.
	tried       counts
	recovered   []time.Duration
	accepted    int64
	afterReturn int64     // attempts the devices made once the broker was back
	strangers   int64     // attempts by a client ID that is not one of the fleet's
	lags        []float64 // unscaled seconds each attempt started late, where known
	notices     []float64 // unscaled seconds each device took to notice the disruption, where known
	noticed     *Noticed  // how soon the devices noticed a silent path, after a black hole
	// groups, for a mixed fleet: each group's records also go to a builder
	// of its own, so that each is judged on its own.
	groups []subBuilder
	// segments, for a timeline of several disruptions: each one's
	// recovery, judged on its own.
	segments []segment
	// nodes, for a cluster: what each node took, its busiest second
	// shows where the fleet piled up.
	nodes []stormstats.Histogram
}

// Run is what a report is made of before its first attempt: the plan, how
// the engine ran it, and what the run can see. A report is made from one
// Run (NewBuilder), the attempts (Add) and when the watching ended
// (Report); no engine sets a builder's or a report's field of its own.
type Run struct {
	Plan      plan.Plan // the setup the report names, and its admission limit
	Engine    plan.Engine
	Transport string
	Devices   int // the devices reported on
	// Indexes are the fleet's device indexes, 0 to Indexes-1 (0: Devices):
	// a shard reports on Devices of them.
	Indexes   int
	T0        time.Time // the (first) disruption
	Returned  time.Time // when the broker returned
	TimeScale float64   // the run's: times are reported unscaled
	// FleetAt and BrokerAt say where each side is measured
	// (Side.MeasuredAt); BrokerAt is "" when the run cannot see the
	// broker's side (an external broker).
	FleetAt, BrokerAt string
	// Events take events.csv as it is written; nil keeps the events for
	// WriteFiles.
	Events io.Writer
	// Groups, a mixed fleet's in device index order
	// (plan.Fleet.GroupsOrWhole), are each reported on their own as well
	// as the fleet as a whole; Disruptions, a timeline's (since T0), have
	// each recovery judged on its own; Nodes, a cluster's, have what each
	// node took counted on its own. One of each splits nothing.
	Groups      []plan.Group
	Disruptions []time.Duration
	Nodes       int
	// MinWidth is the finest timing the run can vouch for (the host's timer
	// precision for real agents); measured lags can only widen it.
	MinWidth time.Duration
	// FleetAdmits: recovery is when the devices heard CONNACK 0 (Heard),
	// although the broker's side is seen (a proxy sees connections, not
	// CONNACKs).
	FleetAdmits bool
	// FleetVerdictOnly leaves the broker's side unjudged (Report.Broker
	// nil) for a study that reads only the verdict, which is the fleet's:
	// judging a side costs as much as the other.
	FleetVerdictOnly bool
}

// segment is one disruption's recovery: the arrivals from it to the next,
// and each device's admission in that time that stayed.
type segment struct {
	at            time.Duration // since the first disruption
	fleet, broker stormstats.Histogram
	// recovered, by device: its last admission from at to the next
	// disruption. That is the session still up when the next came or the
	// run ended (a flapping window drops the first ones). Negative: none.
	recovered []time.Duration
	tried     []bool // by device: made an attempt in this segment (lost its session, or had none)
}

// subBuilder is one group's builder, over device indexes [lo, lo+devices).
type subBuilder struct {
	plan.Group
	lo int
	b  *Builder
}

// NewBuilder starts the report of r.
func NewBuilder(r Run) *Builder { return newBuilder(r, r.Events) }

func newBuilder(r Run, w io.Writer) *Builder {
	if r.Indexes == 0 {
		r.Indexes = r.Devices
	}
	b := &Builder{run: r, tried: newCounts(r.Indexes), recovered: hugepage.Make[time.Duration](r.Indexes),
		events: newEventLog(w, r.T0, r.TimeScale)}
	b.back = b.Since(r.Returned)
	for i := range b.recovered {
		b.recovered[i] = -1
	}
	// watched from the disruption on: a first burst shows against the quiet
	// before it
	b.fleet.Cover(0)
	b.broker.Cover(0)
	if len(r.Groups) > 1 {
		lo := 0
		for _, g := range r.Groups {
			sub := r
			sub.Devices, sub.Indexes, sub.Groups = g.Devices, g.Devices, nil
			b.groups = append(b.groups, subBuilder{Group: g, lo: lo, b: newBuilder(sub, io.Discard)})
			lo += g.Devices
		}
	}
	if len(r.Disruptions) > 1 {
		for _, t := range r.Disruptions {
			sg := segment{at: t, recovered: make([]time.Duration, len(b.recovered)), tried: make([]bool, len(b.recovered))}
			for i := range sg.recovered {
				sg.recovered[i] = -1
			}
			sg.fleet.Cover(t)
			sg.broker.Cover(t)
			b.segments = append(b.segments, sg)
		}
	}
	if r.Nodes > 1 {
		b.nodes = make([]stormstats.Histogram, r.Nodes)
		for k := range b.nodes {
			b.nodes[k].Cover(0)
		}
	}
	return b
}

// segment is the disruption t falls after, or nil without a timeline.
func (b *Builder) segment(t time.Duration) *segment {
	k := len(b.segments) - 1
	for k > 0 && t < b.segments[k].at {
		k--
	}
	if k < 0 {
		return nil
	}
	return &b.segments[k]
}

// group is device dev's group's builder, with dev's index in it; nil for
// a device in none.
func (b *Builder) group(dev int32) (*Builder, int32) {
	for _, g := range b.groups {
		if int(dev) >= g.lo && int(dev) < g.lo+g.Devices {
			return g.b, dev - int32(g.lo)
		}
	}
	return nil, 0
}

// watchedUntil records that the run watched for attempts until t, so that
// the quiet after the last one is known (a drop-all's one burst stands out
// against it). A zero t is the last attempt.
func (b *Builder) watchedUntil(t time.Time) {
	if !t.IsZero() {
		b.until = b.Since(t)
		b.fleet.Cover(b.until)
		b.broker.Cover(b.until)
	}
	for _, g := range b.groups {
		g.b.watchedUntil(t)
	}
}

// Noticed records how long (real time) each device took to notice the
// disruption ended its session. Every device's schedule starts there. A
// host slow to deliver the losses therefore delays whole schedules.
func (b *Builder) Noticed(delays []time.Duration) {
	for _, d := range delays {
		b.notices = append(b.notices, d.Seconds()*b.run.TimeScale)
	}
}

// NoticedSilence records how long (real time) each device took to notice
// a path gone silent for silent (unscaled): a black hole, which a device
// notices only through its keepalive. A device that never noticed it is
// math.MaxInt64.
func (b *Builder) NoticedSilence(delays []time.Duration, silent time.Duration) {
	b.noticed = noticedOf(delays, b.run.TimeScale, silent)
}

// Since is at's unscaled time after the disruption.
func (b *Builder) Since(at time.Time) time.Duration {
	return time.Duration(float64(at.Sub(b.run.T0)) * b.run.TimeScale)
}

// Add takes one attempt record: a builder is every engine's attempt.Sink.
func (b *Builder) Add(r attempt.Record) {
	if b.groups != nil {
		if g, dev := b.group(r.Device); g != nil {
			gr := r
			gr.Device = dev
			g.Add(gr)
		}
	}
	if r.Seen == attempt.Broker {
		b.reached(r)
		return
	}
	dev, t := int(r.Device), r.T
	b.fleet.Add(t)
	if sg := b.segment(t); sg != nil {
		sg.fleet.Add(t)
		if dev >= 0 && dev < len(sg.tried) {
			sg.tried[dev] = true
		}
	}
	b.events.add(r)
	if r.Lag >= 0 {
		b.lags = append(b.lags, r.Lag.Seconds())
	}
	if t >= b.back {
		b.afterReturn++
	}
	if dev < 0 || dev >= len(b.tried.low) {
		b.strangers++
		return
	}
	b.tried.add(dev)
	if b.run.BrokerAt == "" && !b.run.FleetAdmits && r.Outcome == fault.Accepted {
		b.admitted(dev, t)
	}
}

// Heard takes when device dev heard the broker admit it (CONNACK 0), t
// after the disruption: its recovery where the broker's side cannot tell
// (Run.FleetAdmits). A device's are taken in the order it heard them.
func (b *Builder) Heard(dev int32, t time.Duration) {
	if b.groups != nil {
		if g, d := b.group(dev); g != nil {
			g.Heard(d, t)
		}
	}
	if b.run.FleetAdmits && dev >= 0 && int(dev) < len(b.recovered) {
		b.admitted(int(dev), t)
	}
}

// readAhead is how many records' device counters AddBatch asks for at a
// time, ahead of adding them. The virtual engine asks for its devices'
// state the same way. A million devices' counters are not in cache. They
// arrive while the records before them are added.
const readAhead = 16

// AddBatch takes records in order, as Add one by one.
func (b *Builder) AddBatch(rs []attempt.Record) {
	for k := range rs {
		if k%readAhead == 0 {
			for _, r := range rs[min(k+readAhead, len(rs)):min(k+2*readAhead, len(rs))] {
				if dev := int(r.Device); r.Seen == attempt.Fleet && dev >= 0 && dev < len(b.tried.low) {
					prefetch.Line(unsafe.Pointer(&b.tried.low[dev]))
				}
			}
		}
		b.Add(rs[k])
	}
}

// counts is a count by device, two bytes each. A storm's devices do not
// outgrow that. A map holds any device that does. A million devices'
// counters then take 2 MB of cache, not 4.
type counts struct {
	low  []uint16
	high map[int]int64 // by device: what it counted past the most low holds
}

func newCounts(devices int) counts { return counts{low: hugepage.Make[uint16](devices)} }

func (c *counts) add(i int) {
	if c.low[i] < math.MaxUint16 {
		c.low[i]++
		return
	}
	if c.high == nil {
		c.high = make(map[int]int64)
	}
	c.high[i]++
}

// of is device i's count.
func (c *counts) of(i int) int64 {
	n := int64(c.low[i])
	if n == math.MaxUint16 {
		n += c.high[i]
	}
	return n
}

// reached adds an attempt as the broker saw it.
func (b *Builder) reached(r attempt.Record) {
	b.broker.Add(r.T)
	if int(r.Node) < len(b.nodes) {
		b.nodes[r.Node].Add(r.T)
	}
	if sg := b.segment(r.T); sg != nil {
		sg.broker.Add(r.T)
	}
	if dev := int(r.Device); r.Outcome == fault.Accepted && !b.run.FleetAdmits && dev >= 0 && dev < len(b.recovered) {
		b.admitted(dev, r.T)
	}
}

// CountsRefusals reports whether b counts the attempts that reached the
// broker and were not admitted. It does not when it leaves the broker's
// side unjudged and has no nodes to count them by. An engine may then leave
// those records out. The fleet's side has them all.
func (b *Builder) CountsRefusals() bool { return !b.run.FleetVerdictOnly || b.nodes != nil }

// Back is when the broker returned, unscaled, since the disruption.
func (b *Builder) Back() time.Duration { return b.back }

// AfterReturn counts the attempts the devices made once the broker was
// back, so far.
func (b *Builder) AfterReturn() int64 { return b.afterReturn }

// TimeScale is the run's.
func (b *Builder) TimeScale() float64 { return b.run.TimeScale }

func (b *Builder) admitted(dev int, t time.Duration) {
	if sg := b.segment(t); sg != nil {
		// the last so far: the one that stayed, as the run's own recovery
		// counts
		sg.recovered[dev] = t
	}
	b.accepted++
	b.admissions.Add(t)
	b.recovered[dev] = t
}

// End is what a run knows as it ends, beyond the attempts it added: when
// it stopped watching, whether it saw every device up, and what it
// measured beside them. Report takes it once; nothing is set on a report
// after it is made. The zero End watched until the last attempt and
// measured nothing.
type End struct {
	Until time.Time // when the run stopped watching (zero: its last attempt)
	// Finished: the run saw every device up within its bound. The report
	// says every device recovered when, besides, none it disrupted is
	// stranded (Recovery.AllRecovered).
	Finished bool
	// Started is when the run began: the report's Host.WallS runs from it
	// to the report's making (zero: Host.WallS as Host has it).
	Started time.Time
	// Host is what the run measured of its cost, and of its own timers'
	// lateness where its records carry none; the lateness its records
	// show (Lag, Builder.Noticed) is added to it.
	Host Host
	// Telemetry, Proxy, External and Inferred are the report's Measures of
	// the same names, nil where the run has none.
	Telemetry *Telemetry
	Proxy     *ProxyCounts
	External  *external.Devices
	Inferred  *external.Policy
	// ProxyByNode are what each node's own proxy counted, where each node
	// of a cluster stands behind one (NodeReport.Proxy), by node.
	ProxyByNode []ProxyCounts
	// Handshake is one TLS handshake's CPU on the broker, over TLS (the
	// report's TLS cost counts the broker's arrivals at it); nil otherwise.
	Handshake *time.Duration
	// Struck is when the run made its first disruption, and ClockOffset
	// the host clock's offset it measured, for a run synchronised with
	// others (Sync); zero and nil where it has none.
	Struck      time.Time
	ClockOffset *time.Duration
	// Incomplete says why the run stopped before its end ("interrupted"),
	// as Setup.Incomplete; "" for a run that ended.
	Incomplete string
}

// Report is the run's report, as it ended: its setup, recovery, attempts,
// both views with their judgements, each disruption's, group's and
// node's, the admission limit, and what the run measured beside them.
func (b *Builder) Report(end End) (*Report, error) {
	r := b.run
	rep := New(r.Plan, r.Engine, r.Transport, r.Devices, r.T0)
	rep.Host = end.Host // the lateness the records show is fill's to add
	b.watchedUntil(end.Until)
	if err := b.fill(rep); err != nil {
		return nil, err
	}
	rep.Limit, rep.BrokerBackS = limitOf(r.Plan.AdmitRate, r.Devices), b.back.Seconds()
	rep.Noticed, rep.Incomplete = b.noticed, end.Incomplete
	rep.Recovery.AllRecovered = end.Finished && rep.stranded == 0
	rep.Telemetry, rep.Proxy, rep.External, rep.Inferred = end.Telemetry, end.Proxy, end.External, end.Inferred
	for k := range rep.Nodes {
		if k < len(end.ProxyByNode) {
			rep.Nodes[k].Proxy = &end.ProxyByNode[k]
		}
	}
	if end.Handshake != nil {
		rep.TLS = TLSCostOf(*end.Handshake, rep.Broker)
	}
	if rep.Sync != nil {
		if !r.Plan.DisruptAt.IsZero() && !end.Struck.IsZero() {
			rep.Sync.StrikeUnixMS = end.Struck.UnixMilli()
		}
		if end.ClockOffset != nil {
			ms := float64(*end.ClockOffset) / float64(time.Millisecond)
			rep.Sync.ClockOffsetMS = &ms
		}
	}
	if !end.Started.IsZero() {
		rep.Host.WallS = time.Since(end.Started).Seconds()
	}
	return rep, nil
}

// fill sets what the attempts say in rep (whose Devices is set): recovery,
// attempts, and both views with their judgements.
func (b *Builder) fill(rep *Report) error {
	recovered := make([]float64, 0, len(b.recovered))
	a := &rep.Attempts
	rep.stranded = 0
	for i, t := range b.recovered {
		switch {
		case t >= 0:
			recovered = append(recovered, t.Seconds())
		case b.tried.low[i] > 0:
			rep.stranded++
		}
		n := b.tried.of(i)
		a.Total += n
		a.PerDeviceMax = max(a.PerDeviceMax, n)
	}
	a.Total += b.strangers
	rep.recovered, rep.Recovery = len(recovered), recoveryOf(recovered)
	a.Refused = max(0, a.Total-b.accepted)
	a.PerDeviceMean = float64(a.Total) / float64(rep.Devices)
	a.AfterReturnPerDeviceMean = float64(b.afterReturn) / float64(rep.Devices)
	if err := b.events.flush(); err != nil {
		return err
	}
	rep.events, rep.eventsStreamed = b.events.kept, b.events.out != nil || b.events.discard
	rep.WatchedS = b.until.Seconds()
	// Times are known only as finely as the host kept the devices'
	// schedules: no burst narrower than twice the lag is the fleet's.
	m := stormstats.DefaultMethod
	m.MinWidth = b.run.MinWidth
	h := &rep.Host
	if len(b.lags) > 0 {
		p := stormstats.Percentiles(b.lags, 50, 99)
		h.LagP50S, h.LagP99S = p[0], p[1]
	}
	if len(b.notices) > 0 {
		h.NoticeP99S = stormstats.Percentiles(b.notices, 99)[0]
	}
	if late := h.LateP99S(); late > 0 {
		m.MinWidth = max(m.MinWidth, time.Duration(2*late*float64(time.Second)))
		h.Bound = late > HostBoundLate.Seconds()
	}
	var err error
	if rep.Fleet, err = judged(&b.fleet, b.run.FleetAt, m); err != nil {
		return err
	}
	rep.Verdict = rep.Fleet.Judgement.Verdict
	rep.Admitted = stormstats.Summarize(&b.admissions)
	if b.run.BrokerAt != "" && !b.run.FleetVerdictOnly {
		s, err := judged(&b.broker, b.run.BrokerAt, m)
		if err != nil {
			return err
		}
		rep.Broker = &s
	}
	if err := b.fillDisruptions(rep, m); err != nil {
		return err
	}
	// The report keeps the histograms, and through them b: not its
	// per-device state, a hundred million devices' worth in a large run.
	b.tried, b.recovered = counts{}, nil
	for k := range b.segments {
		b.segments[k].recovered, b.segments[k].tried = nil, nil
	}
	for k := range b.nodes {
		b.nodes[k].Cover(b.until)
		rep.Nodes = append(rep.Nodes, NodeReport{Node: k, Arrivals: stormstats.Summarize(&b.nodes[k]), hist: &b.nodes[k]})
	}
	return b.fillGroups(rep)
}

// fillDisruptions judges each disruption's recovery on its own; the run's
// verdict is then theirs together (stormstats.Overall): recoveries after
// separate disruptions are not waves.
func (b *Builder) fillDisruptions(rep *Report, m stormstats.Method) error {
	if len(b.segments) == 0 {
		return nil
	}
	var recs []stormstats.Recovery
	for k := range b.segments {
		sg := &b.segments[k]
		end := b.until
		if k+1 < len(b.segments) {
			end = b.segments[k+1].at
		}
		sg.fleet.Cover(end)
		sg.broker.Cover(end)
		var back []float64
		all := true // every device that had to come back after it did
		for i, t := range sg.recovered {
			if t >= 0 {
				back = append(back, (t - sg.at).Seconds())
			} else if sg.tried[i] {
				all = false
			}
		}
		d := DisruptionReport{AtS: sg.at.Seconds(), Recovery: recoveryOf(back)}
		d.Recovery.AllRecovered = all
		var err error
		if d.Fleet, err = judged(&sg.fleet, b.run.FleetAt, m); err != nil {
			return err
		}
		if b.run.BrokerAt != "" && !b.run.FleetVerdictOnly {
			s, err := judged(&sg.broker, b.run.BrokerAt, m)
			if err != nil {
				return err
			}
			d.Broker = &s
		}
		d.Verdict = d.Fleet.Judgement.Verdict
		rep.Disruptions = append(rep.Disruptions, d)
		recs = append(recs, stormstats.Recovery{Judgement: d.Fleet.Judgement})
	}
	rep.Verdict = stormstats.Overall(recs)
	return nil
}

// fillGroups judges each group of a mixed fleet on its own.
func (b *Builder) fillGroups(rep *Report) error {
	for _, g := range b.groups {
		g.b.lags, g.b.notices = b.lags, b.notices
		gr := &Report{Setup: Setup{Devices: g.Devices}}
		if err := g.b.fill(gr); err != nil {
			return err
		}
		// a group's verdict, across a timeline, is its recoveries' together
		gr.Recovery.AllRecovered = gr.stranded == 0
		rep.Groups = append(rep.Groups, GroupReport{Name: g.Name, Policy: g.Policy, Devices: g.Devices, Labels: g.Labels,
			Recovery: gr.Recovery, Attempts: gr.Attempts, Verdict: gr.Verdict, Fleet: gr.Fleet, Broker: gr.Broker,
			Disruptions: gr.Disruptions, Nodes: gr.Nodes})
	}
	return nil
}

func judged(h *stormstats.Histogram, measuredAt string, m stormstats.Method) (Side, error) {
	j, err := stormstats.Judge(h, m)
	return Side{MeasuredAt: measuredAt, Arrivals: stormstats.Summarize(h), Judgement: j, hist: h}, err
}
