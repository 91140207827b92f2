// Package storm reads a storm file: a storm test written down, to commit
// beside a broker's configuration and run in a pipeline. A file names the
// fleet (its groups), the brokers, a timeline of disruptions, and what the
// run must show. devicesim run -f turns it into a plan.Plan and runs it. It
// checks every expectation (Check) and fails the pipeline when one fails.
//
// The format is YAML, decoded strictly: an unknown key, a wrong type or a
// duration without its unit is an error naming the line. A storm file is at
// most MaxFileBytes and takes no anchors, aliases or merge keys, and each
// duration is bounded (plan.MaxWait, MaxDisruption, MaxSpan). Its JSON
// Schema is docs/storm.schema.json.
package storm

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/fileline"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// File is a storm file as written. Its zero value is no storm: Plan
// refuses it. Durations are written with their unit ("30s", "2m").
type File struct {
	// Engine is agents, wire or virtual; empty takes the model unless the
	// storm needs real devices (Plan says which and why).
	Engine plan.Engine `yaml:"engine"`
	// TimeScale runs the agents that many times faster (1 if unset).
	// Written auto, it runs them as fast as the host serves, up to the
	// default run's 4x. The virtual engine needs none.
	TimeScale TimeScale `yaml:"time_scale"`
	Seed      uint64    `yaml:"seed"`
	// TCPPerProcess is how many TCP devices' agents this process holds
	// before they move to child processes (0: what the descriptors allow).
	TCPPerProcess int `yaml:"tcp_per_process"`
	// Fleet is the fleet's groups. Groups may differ in everything the
	// agent's configuration has (a firmware rollout). Each key is at its
	// default where a group leaves it out. Every group takes one transport.
	// The first group's retry_after_jitter is the fleet's.
	Fleet []Group `yaml:"fleet"`
	// Compare runs the storm once for each of these policies instead of
	// the group's own, and reports them side by side.
	Compare  []string `yaml:"compare"`
	Brokers  Brokers  `yaml:"brokers"`
	Timeline []Event  `yaml:"timeline"`
	// DisruptAt is when the timeline's first disruption strikes on the
	// wall clock (plan.ParseDisruptAt): "+30s" after every shard is
	// ready, or an RFC 3339 instant.
	DisruptAt string `yaml:"disrupt_at"`
	Expect    Expect `yaml:"expect"`
	// Question, if set, is what devicesim plan asks of this fleet and
	// broker (docs/plan.md). A run ignores it.
	Question *Question `yaml:"plan"`
}

// Question is a storm file's plan section: the bounds a recovery must
// keep, and what the fleet runs today. The fleet's size, the broker's
// admission and the first disruption's outage are the file's.
type Question struct {
	TargetP99   time.Duration `yaml:"target_p99"`
	PeakBound   float64       `yaml:"peak_bound"`
	MaxAttempts float64       `yaml:"max_attempts"`
	// Current is the policy the fleet runs today, as POLICY@CAP, and
	// CurrentShare the share of the fleet on it (0: all of it).
	Current      string  `yaml:"current"`
	CurrentShare float64 `yaml:"current_share"`
	Seeds        uint64  `yaml:"seeds"`
}

// Group is a set of devices alike: their policy and everything the agent's
// configuration sets.
type Group struct {
	Name    string `yaml:"name"`
	Devices int    `yaml:"devices"`
	Policy  string `yaml:"policy"`
	// Durations left out take the default; written, even as 0s, they are
	// the file's (and 0s where the plan needs more is an error).
	MaxBackoff *time.Duration `yaml:"max_backoff"`
	// RetryCap is a count of retries, or "forever" (the default).
	RetryCap   RetryCap      `yaml:"retry_cap"`
	BootSpread time.Duration `yaml:"boot_spread"`
	// OldBootWindow is boot_window, boot_spread's name before: refused,
	// naming boot_spread, the name the agents' flags give it.
	OldBootWindow    *time.Duration `yaml:"boot_window"`
	KeepAlive        *time.Duration `yaml:"keepalive"`
	PingTimeout      *time.Duration `yaml:"ping_timeout"`
	RetryAfterJitter time.Duration  `yaml:"retry_after_jitter"`
	Telemetry        float64        `yaml:"telemetry"` // messages a second, per device
	Transport        plan.Transport `yaml:"transport"`
	// MQTT is the version the group's devices speak: "3.1.1" (the
	// default) or "5", whose reason codes shape the backoff.
	MQTT MQTTVersion `yaml:"mqtt"`
	// ServerSignals is what MQTT 5 devices do with the broker's reason
	// codes and Server References. They honour them (the default), or
	// ignore them as a client that cannot read them does (a control group).
	ServerSignals string            `yaml:"server_signals"`
	Labels        map[string]string `yaml:"labels"`
	// Expect is what this group alone must show.
	Expect Expect `yaml:"expect"`
}

// Brokers is what the fleet connects to: the in-process broker (no
// External) or a cluster of its nodes, or external brokers, each behind a
// fault proxy of its own.
type Brokers struct {
	External *External `yaml:"external"`
	// Nodes makes the in-process broker a cluster of that many nodes; every
	// device lists every node, its home first, and fails over to the next.
	// Each node applies the admission limit on its own.
	Nodes     int        `yaml:"nodes"`
	Admission *Admission `yaml:"admission"`
}

// External is an external broker, or a cluster of them, and the TLS files
// devices use (every node's).
type External struct {
	URL string `yaml:"url"`
	// URLs, instead of URL, are a cluster's nodes, node 0 first. Every
	// device lists them all, its home node first. A device's home node is
	// its index modulo the nodes. Each node stands behind a fault proxy of
	// its own.
	URLs  []string `yaml:"urls"`
	CA    string   `yaml:"ca"`
	Cert  string   `yaml:"cert"`
	Key   string   `yaml:"key"`
	CAKey string   `yaml:"ca_key"`
	// Shard runs slice "i/n" of the fleet's device IDs, for a fleet spread
	// over several machines against one broker.
	Shard string `yaml:"shard"`
	// ReadyDir is where the shards meet before DisruptAt, and ReadyWait how
	// long each waits there for the others (plan.Plan's).
	ReadyDir  string        `yaml:"ready_dir"`
	ReadyWait time.Duration `yaml:"ready_wait"`
}

// Admission is the broker's connect rate: Rate a second with bursts of
// Burst, the rest refused, paused or disconnected (Mode).
type Admission struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	Mode  string  `yaml:"mode"` // refuse (default), pause or disconnect
	// Code is the MQTT 5 reason code a refusal sends an MQTT 5 device:
	// 0x9F (connection rate exceeded, the default), 0x89 or 0x97.
	Code ReasonCode `yaml:"code"`
}

// TimeScale is a number from 1 to 1000, or auto; the zero TimeScale is
// unset (1).
type TimeScale struct {
	Scale float64
	Auto  bool
}

func (t *TimeScale) UnmarshalYAML(b []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(b)), `"'`)
	if s == "auto" {
		*t = TimeScale{Scale: plan.Default().TimeScale, Auto: true}
		return nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("time_scale: want a number from 1 to 1000, or auto, got %s", s)
	}
	*t = TimeScale{Scale: n}
	return nil
}

// MQTTVersion is "3.1.1" or "5"; the zero MQTTVersion is unset (3.1.1).
type MQTTVersion string

func (v *MQTTVersion) UnmarshalYAML(b []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(b)), `"'`)
	if _, err := device.ParseProtocol(s); err != nil {
		return fmt.Errorf("mqtt: want \"3.1.1\" or \"5\", got %s", s)
	}
	*v = MQTTVersion(s)
	return nil
}

// ReasonCode is an MQTT 5 reason code a broker refuses with, written in
// hex (0x9F) or decimal; the zero ReasonCode is unset.
type ReasonCode byte

func (c *ReasonCode) UnmarshalYAML(b []byte) error {
	n, err := plan.ParseReasonCode(strings.Trim(string(bytes.TrimSpace(b)), `"'`))
	if err != nil {
		return fmt.Errorf("code: %w", err)
	}
	*c = ReasonCode(n)
	return nil
}

// Event is one disruption on the timeline.
type Event struct {
	At            time.Duration  `yaml:"at"`
	Disruption    plan.Scenario  `yaml:"disruption"`
	Outage        *time.Duration `yaml:"outage"`
	Flap          *time.Duration `yaml:"flap"`
	Latency       *time.Duration `yaml:"latency"`
	LatencyJitter *time.Duration `yaml:"latency_jitter"`
	RetryAfter    time.Duration  `yaml:"retry_after"`
	// Gap is a rolling restart's time from one node's restart to the next.
	Gap time.Duration `yaml:"gap"`
	// Node, on a cluster, is the one node the disruption strikes (0 is
	// the first); left out, it strikes every node at once (a busy-node, the
	// first).
	Node *int `yaml:"node"`
	// Code is what a busy-node answers MQTT 5 devices with (0x89 server
	// busy, the default).
	Code ReasonCode `yaml:"code"`
	// Duration bounds an observe run: how long to wait for a disruption.
	Duration time.Duration `yaml:"duration"`
	// Watch is how long after the disruption the run waits for the fleet
	// before it ends unrecovered (0: from the outage, the cap and the
	// admission rate).
	Watch time.Duration `yaml:"watch"`
}

// Expect is what the run must show. Unset bounds are not checked.
type Expect struct {
	Verdict string `yaml:"verdict"` // spread, waves or inconclusive: the fleet's
	// RecoveryP99 bounds the 99th percentile of recovery after the
	// disruption.
	RecoveryP99 time.Duration `yaml:"recovery_p99"`
	// AttemptsPerDevice bounds the mean attempts a device made.
	AttemptsPerDevice float64 `yaml:"attempts_per_device"`
	// BrokerBusiestSecond bounds the connects that reached the broker in
	// its busiest second (each node's, of a cluster): through the fault
	// proxy, those it let through.
	BrokerBusiestSecond float64 `yaml:"broker_busiest_second"`
	// FleetBusiestSecond bounds the dials the devices made in their
	// busiest second, refused ones included.
	FleetBusiestSecond float64 `yaml:"fleet_busiest_second"`
	// Unsided is the old busiest_second, which named no side: refused,
	// naming the two.
	Unsided *float64 `yaml:"busiest_second"`
	// NoTelemetryLost: every message a device enqueued reached the broker.
	NoTelemetryLost bool `yaml:"no_telemetry_lost"`
}

// RetryCap is a retry count or "forever"; the zero RetryCap is unset
// (forever).
type RetryCap struct {
	N   int
	Set bool
}

func (r *RetryCap) UnmarshalYAML(b []byte) error {
	s := string(bytes.TrimSpace(b))
	r.Set = true
	if s == "forever" {
		r.N = reconnect.RetryForever
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("retry_cap: want a count >= 0 or forever, got %s", s)
	}
	r.N = n
	return nil
}

// ErrInvalid is wrapped by every error Read and Plan return.
var ErrInvalid = errors.New("invalid storm file")

// Read decodes a storm file. Its errors name the line and the field.
// ${NAME} in it is the environment's NAME, through getenv (nil: none). A
// pipeline can thus name its own broker. A name getenv leaves empty is an
// error, never an empty setting. It reads at most MaxFileBytes, and
// refuses YAML's anchors, aliases and merge keys (see plain).
func Read(r io.Reader, getenv func(string) string) (*File, error) {
	b, err := readBounded(r)
	if err != nil {
		return nil, err
	}
	var missing []string
	size := len(b)
	b = []byte(os.Expand(string(b), func(name string) string {
		v := ""
		if getenv != nil {
			v = getenv(name)
		}
		if v == "" && !slices.Contains(missing, name) { // a name used twice is missing once
			missing = append(missing, name)
		}
		if size += len(v); size > MaxFileBytes {
			return "" // refused below: no more to hold
		}
		return v
	}))
	switch {
	case len(missing) > 0:
		return nil, fmt.Errorf("%w: the file names ${%s}, which the environment does not set", ErrInvalid, strings.Join(missing, "}, ${"))
	case size > MaxFileBytes:
		return nil, fmt.Errorf("%w: over %d KiB with its ${NAME}s filled in; a storm file is a page or two", ErrInvalid, MaxFileBytes>>10)
	}
	if err := plain(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	f := &File{}
	if err := yaml.UnmarshalWithOptions(b, f, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, atLine(err))
	}
	return f, nil
}

// atLine is yaml's error as the line it names (a *fileline.Error), with
// the source around it as yaml prints it.
func atLine(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && te.DstType == reflect.TypeFor[time.Duration]() && te.Token != nil {
		// yaml's "cannot unmarshal uint64 into ... time.Duration" names no fix.
		pos := te.Token.Position
		return &fileline.Error{Line: pos.Line, Column: pos.Column,
			Err: fmt.Errorf("%s is not a duration: write it with its unit, such as 30s", te.Token.Value)}
	}
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		return errors.New(yaml.FormatError(err, false, true))
	}
	pos := ye.GetToken().Position
	text := strings.TrimPrefix(ye.FormatError(false, true), fmt.Sprintf("[%d:%d] ", pos.Line, pos.Column))
	return &fileline.Error{Line: pos.Line, Column: pos.Column, Err: errors.New(text)}
}

// Plan is the run the file describes, and why its engine was chosen when
// the file leaves it open.
func (f *File) Plan() (p plan.Plan, why string, err error) {
	bad := func(format string, args ...any) (plan.Plan, string, error) {
		return p, "", fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case len(f.Fleet) == 0:
		return bad("fleet: name at least one group of devices")
	}
	if err := f.checkTimeline(); err != nil {
		return bad("%v", err)
	}
	for k, g := range f.Fleet {
		switch {
		case g.ServerSignals != "" && g.ServerSignals != "honour" && g.ServerSignals != "ignore":
			return bad("fleet[%d]: server_signals: honour or ignore, got %q", k, g.ServerSignals)
		case g.ServerSignals != "" && g.MQTT != "5":
			return bad("fleet[%d]: server_signals: only MQTT 5 devices read them (mqtt: \"5\")", k)
		}
	}
	p = plan.Default()
	p.Seed, p.TCPPerProcess, p.Nodes = f.Seed, f.TCPPerProcess, f.Brokers.Nodes
	f.fleetOf(&p)
	if len(f.Fleet) > 1 {
		if err := f.mix(&p); err != nil {
			return bad("%v", err)
		}
	}
	if err := f.timelineOf(&p); err != nil {
		return bad("%v", err)
	}
	if a := f.Brokers.Admission; a != nil {
		mode, err := fault.ParseAdmissionMode(cmp.Or(a.Mode, "refuse"))
		if err != nil {
			return bad("brokers.admission.mode: %v", err)
		}
		p.AdmitRate, p.AdmitBurst, p.AdmitMode, p.AdmitCode = a.Rate, cmp.Or(a.Burst, 1), mode, byte(a.Code)
	}
	if x := f.Brokers.External; x != nil {
		p.Broker, p.TLSCA, p.TLSCert, p.TLSKey, p.TLSCAKey = x.URL, x.CA, x.Cert, x.Key, x.CAKey
		switch {
		case x.URL != "" && len(x.URLs) > 0:
			return bad("brokers.external: url names one broker and urls a cluster's nodes: write one of them")
		case x.URL == "" && len(x.URLs) == 0:
			return bad("brokers.external: name the broker (url) or a cluster's nodes (urls)")
		case len(x.URLs) > 0:
			p.Broker, p.Peers = x.URLs[0], x.URLs[1:]
		}
		if x.Shard != "" {
			sh, err := plan.ParseShard(x.Shard)
			if err != nil {
				return bad("brokers.external.shard: %v", err)
			}
			p.Shard = sh
		}
		p.ReadyDir, p.ReadyWait = x.ReadyDir, x.ReadyWait
	}
	if f.DisruptAt != "" {
		at, err := plan.ParseDisruptAt(f.DisruptAt)
		if err != nil {
			return bad("disrupt_at: %v", err)
		}
		p.DisruptAt = at
	}
	p.TimeScale, p.AutoScale = cmp.Or(f.TimeScale.Scale, 1), f.TimeScale.Auto
	p.Engine, why = f.Engine, "the file names it"
	if p.Engine == "" {
		p.Engine, why = chooseEngine(p)
	}
	if len(f.Compare) > 0 && len(p.Groups) > 0 {
		return bad("compare: a mixed fleet's groups name their own policies; compare runs one group's storm under each policy")
	}
	// What the host holds (its descriptors, a binary for child processes)
	// is the run's to check on the machine it runs on: a storm file is
	// often read on another.
	anyHost := p
	anyHost.Descriptors, anyHost.Exe = math.MaxInt32, cmp.Or(p.Exe, "devicesim")
	for _, policy := range f.Compare {
		q := anyHost
		q.Policy = policy
		if err := q.Validate(); err != nil {
			return bad("compare %s: %v", policy, err)
		}
	}
	if err := anyHost.Validate(); err != nil {
		return bad("%v", err)
	}
	return p, why, nil
}

// fleetOf sets the fleet's settings in p: the first group's, which the
// run takes for the fleet's own where a setting has one value a run.
func (f *File) fleetOf(p *plan.Plan) {
	g := f.groupOf(f.Fleet[0])
	p.Devices, p.Policy, p.MaxBackoff, p.RetryCap = g.Devices, g.Policy, g.MaxBackoff, *g.RetryCap
	p.BootSpread, p.KeepAlive, p.PingTimeout, p.Telemetry, p.Transport = g.BootSpread, g.KeepAlive, g.PingTimeout, *g.Telemetry, g.Transport
	p.MQTT5, p.IgnoreServerSignals = *g.MQTT5, *g.IgnoreServerSignals
	p.RetryAfterJitter = f.Fleet[0].RetryAfterJitter
}

// groupOf is a group as the file writes it, every key it leaves out at its
// default (not the first group's).
func (f *File) groupOf(g Group) plan.Group {
	d := plan.Default()
	retryCap, telemetry := reconnect.RetryForever, g.Telemetry
	if g.RetryCap.Set {
		retryCap = g.RetryCap.N
	}
	mqtt5, ignore := g.MQTT == "5", g.ServerSignals == "ignore"
	pg := plan.Group{Name: g.Name, Devices: g.Devices, Policy: cmp.Or(g.Policy, d.Policy), MaxBackoff: d.MaxBackoff,
		RetryCap: &retryCap, BootSpread: g.BootSpread, KeepAlive: d.KeepAlive, PingTimeout: d.PingTimeout,
		Telemetry: &telemetry, Transport: cmp.Or(g.Transport, d.Transport), MQTT5: &mqtt5, IgnoreServerSignals: &ignore, Labels: g.Labels}
	set(&pg.MaxBackoff, g.MaxBackoff)
	set(&pg.KeepAlive, g.KeepAlive)
	set(&pg.PingTimeout, g.PingTimeout)
	return pg
}

// mix makes the plan's groups of a file's several. They add up to the
// fleet. They differ in everything the agent's configuration has but the
// config fetch's jitter on a Retry-After. That jitter is the fleet's.
func (f *File) mix(p *plan.Plan) error {
	p.Devices = 0
	for i, g := range f.Fleet {
		switch {
		case g.Name == "":
			return fmt.Errorf("fleet[%d]: a group of a mixed fleet needs a name", i)
		case g.Expect.NoTelemetryLost:
			return fmt.Errorf("fleet[%d] (%s): no_telemetry_lost is the fleet's expectation (expect:), not a group's", i, g.Name)
		case g.RetryAfterJitter != f.Fleet[0].RetryAfterJitter:
			return fmt.Errorf("fleet[%d] (%s): retry_after_jitter is the fleet's config fetch: set it in the first group alone", i, g.Name)
		}
		p.Groups = append(p.Groups, f.groupOf(g))
		p.Devices += g.Devices
	}
	return nil
}

// timelineOf sets the plan's storm: its first disruption, and the rest of
// its timeline.
func (f *File) timelineOf(p *plan.Plan) error {
	for k, e := range f.Timeline {
		switch {
		case e.Gap != 0 && !e.Disruption.Rolls():
			return fmt.Errorf("timeline[%d]: gap %v: a gap is a rolling restart's or drain's, from one node's to the next; %s takes none", k, e.Gap, e.Disruption)
		case e.Code != 0 && e.Disruption != plan.BusyNode:
			return fmt.Errorf("timeline[%d]: code %#02x: a code is a busy-node's; %s takes none (an admission's refusals take brokers.admission.code)", k, byte(e.Code), e.Disruption)
		case e.Code != 0 && k > 0:
			return fmt.Errorf("timeline[%d]: code: one code for the storm's busy nodes: set it on the first", k)
		}
	}
	ev := f.Timeline[0]
	p.Scenario = ev.Disruption
	set(&p.Outage, ev.Outage)
	set(&p.Flap, ev.Flap)
	set(&p.Latency, ev.Latency)
	set(&p.LatencyJitter, ev.LatencyJitter)
	p.RetryAfter, p.Bound, p.Gap, p.Duration, p.Node = ev.RetryAfter, ev.Watch, ev.Gap, cmp.Or(ev.Duration, p.Duration), ev.Node
	p.BusyCode = byte(ev.Code)
	for _, e := range f.Timeline[1:] {
		if e.RetryAfter != 0 || e.Watch != 0 || e.Duration != 0 {
			return fmt.Errorf("timeline: a disruption after the first takes at, disruption, outage, flap, latency, latency_jitter, gap and node (%s at %v)",
				e.Disruption, e.At)
		}
		ev := plan.Event{At: e.At, Scenario: e.Disruption, Gap: e.Gap, Node: e.Node}
		if e.Disruption.HasOutage() {
			ev.Outage = plan.Default().Outage // the key's default, as the first disruption's
		}
		set(&ev.Outage, e.Outage)
		set(&ev.Flap, e.Flap)
		set(&ev.Latency, e.Latency)
		set(&ev.LatencyJitter, e.LatencyJitter)
		p.Then = append(p.Then, ev)
	}
	return nil
}

// set takes a duration the file wrote over the default.
func set(dst *time.Duration, v *time.Duration) {
	if v != nil {
		*dst = *v
	}
}

// chooseEngine picks the engine for a file that leaves it open: the model,
// unless the storm needs what only real agents do, which it names.
func chooseEngine(p plan.Plan) (plan.Engine, string) {
	v := p
	v.Engine = plan.Virtual
	if err := v.Validate(); err != nil {
		return plan.Agents, "the storm needs real devices: " + err.Error()
	}
	return plan.Virtual, "the model runs all of this storm; engine: agents runs it on real agents"
}

// checkTimeline holds what both commands read of a file to the format:
// a timeline that starts at 0s, every duration within its bound, no key
// the format has renamed.
func (f *File) checkTimeline() error {
	switch {
	case len(f.Timeline) == 0:
		return errors.New("timeline: name the disruption")
	case f.Timeline[0].At != 0:
		return fmt.Errorf("timeline: the first disruption starts at 0s, once the fleet is up (got %v)", f.Timeline[0].At)
	}
	if err := f.checkDurations(); err != nil {
		return err
	}
	return f.checkOldKeys()
}

// checkOldKeys refuses the keys the format has renamed, naming the new
// one: busiest_second, which said no side of the storm, and boot_window.
func (f *File) checkOldKeys() error {
	expects := map[string]Expect{"expect": f.Expect}
	for i, g := range f.Fleet {
		expects[fmt.Sprintf("fleet[%d].expect", i)] = g.Expect
	}
	for i, g := range f.Fleet {
		if g.OldBootWindow != nil {
			return fmt.Errorf("fleet[%d].boot_window is now boot_spread, as deviceagent's and devicesim's -boot-spread name it", i)
		}
	}
	for _, at := range slices.Sorted(maps.Keys(expects)) {
		if expects[at].Unsided != nil {
			return fmt.Errorf("%s.busiest_second: say which side it bounds: broker_busiest_second (the connects that "+
				"reached the broker; through the fault proxy, those it let through) or fleet_busiest_second (every dial "+
				"the devices made, refused ones included)", at)
		}
	}
	return nil
}
