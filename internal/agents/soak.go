package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/reconnect"
)

// Mixed is a soak's worst storm: the broker restarts, comes back throttled
// (refusing over the admission rate), and drops everyone again once half the
// fleet is back.
const Mixed = "mixed"

// SoakStorms are the storms a soak goes through, in turn.
var SoakStorms = []string{string(plan.DropAll), string(plan.BrokerRestart), string(plan.ThrottledRestart), string(plan.Flapping), Mixed}

// SoakConfig is a soak: one fleet of real agents with telemetry on, through
// Storms storms in turn, to find what a single run cannot: goroutines or
// memory that do not come back, and messages lost or duplicated beyond what
// at-least-once delivery allows.
type SoakConfig struct {
	Devices int
	Storms  int
	Policy  string
	// Telemetry is each device's rate of QoS 1 messages per (unscaled)
	// second; it runs for the whole soak. Must be > 0.
	Telemetry float64
	TimeScale float64
	// Outage is how long each restart and flapping window lasts (unscaled).
	Outage time.Duration
	// AdmitRate is the throttled storms' admission (connects per unscaled
	// second, refused over it).
	AdmitRate float64
	Seed      uint64
	// Progress, if set, gets a line per storm.
	Progress io.Writer
}

// DefaultSoak is make soak's: 10,000 devices through ten storms.
func DefaultSoak() SoakConfig {
	return SoakConfig{Devices: 10_000, Storms: 10, Policy: "iotcore", Telemetry: 0.1, TimeScale: 5,
		Outage: 20 * time.Second, AdmitRate: 1000, Seed: 1}
}

// SoakReport is what a soak found. Pass is false, and Problems say why, when
// goroutines or heap did not return within Tolerance of the baseline, a
// message was lost, or there were more duplicates than session losses (at
// least once allows one per loss: the message in flight).
type SoakReport struct {
	Devices   int          `json:"devices"`
	Policy    string       `json:"policy"`
	TimeScale float64      `json:"time_scale"`
	Storms    []SoakStorm  `json:"storms"`
	Baseline  Footprint    `json:"baseline"`
	Final     Footprint    `json:"final"`
	Tolerance float64      `json:"tolerance"`
	Telemetry SoakMessages `json:"telemetry"`
	WallS     float64      `json:"wall_s"`
	Pass      bool         `json:"pass"`
	Problems  []string     `json:"problems,omitempty"`
}

// SoakStorm is one storm's outcome.
type SoakStorm struct {
	Kind            string             `json:"kind"`
	RecoveryP99S    float64            `json:"recovery_p99_s"`
	AttemptsPerDev  float64            `json:"attempts_per_device"`
	SessionsLost    int                `json:"sessions_lost"`
	Verdict         stormstats.Verdict `json:"verdict"`
	Goroutines      int                `json:"goroutines_after"`
	HeapAfterMiB    float64            `json:"heap_after_mib"`
	QueuedAtRecover int                `json:"queued_at_recovery"`
}

// Footprint is the process's goroutines and live heap after a GC.
type Footprint struct {
	Goroutines int     `json:"goroutines"`
	HeapMiB    float64 `json:"heap_mib"`
}

// SoakMessages counts the soak's telemetry end to end.
type SoakMessages struct {
	Enqueued       uint64 `json:"enqueued"`
	Acknowledged   uint64 `json:"acknowledged"`
	ReceivedUnique int64  `json:"received_unique"`
	Duplicates     int64  `json:"duplicates"`
	SessionsLost   int    `json:"sessions_lost"` // each may duplicate its message in flight
	DroppedOldest  uint64 `json:"dropped_oldest"`
	Lost           int64  `json:"lost"`
}

// soakTolerance is how far above the baseline goroutines and heap may end.
const soakTolerance = 0.10

func (sc SoakConfig) config() (plan.Plan, error) {
	c := plan.Default()
	c.Devices, c.Policy, c.Telemetry, c.TimeScale, c.Seed = sc.Devices, sc.Policy, sc.Telemetry, sc.TimeScale, sc.Seed
	c.Outage, c.Scenario = sc.Outage, plan.BrokerRestart
	switch {
	case sc.Storms < 1:
		return c, fmt.Errorf("storms must be >= 1, got %d", sc.Storms)
	case !(sc.Telemetry > 0):
		return c, fmt.Errorf("a soak needs telemetry (> 0 messages per device per second), got %g", sc.Telemetry)
	case !(sc.AdmitRate > 0):
		return c, fmt.Errorf("admit rate must be > 0, got %g", sc.AdmitRate)
	}
	return c, c.Validate()
}

// Soak runs a soak.
func Soak(ctx context.Context, sc SoakConfig) (*SoakReport, error) {
	c, err := sc.config()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &run{c: c, ids: c.Shard.IDs(c.Devices)}
	defer r.close()
	if err := r.setup(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, m := range r.members {
		if err := m.start(runCtx); err != nil {
			return nil, err
		}
	}
	defer r.stopMembers(cancel)
	n := len(r.ids)
	if err := r.obs.await(ctx, r.timing.BootSpread+time.Minute, func(k int) bool { return k == n }); err != nil {
		return nil, fmt.Errorf("fleet did not finish booting: %w", err)
	}
	rep := &SoakReport{Devices: n, Policy: c.Policy, TimeScale: c.TimeScale, Tolerance: soakTolerance}
	rc := newReceiver()
	if _, err := r.settle(ctx, rc); err != nil {
		return nil, err
	}
	rep.Baseline = footprint()
	for k := range sc.Storms {
		kind := SoakStorms[k%len(SoakStorms)]
		s, err := r.soakStorm(ctx, kind, sc.AdmitRate, rc)
		if err != nil {
			return rep, fmt.Errorf("storm %d (%s): %w", k+1, kind, err)
		}
		rep.Storms = append(rep.Storms, s)
		rep.Telemetry.SessionsLost += s.SessionsLost
		if sc.Progress != nil {
			fmt.Fprintf(sc.Progress, "storm %2d %-17s recovery p99 %6.1f s, %4.1f attempts/device, %s; %d goroutines, %.0f MiB heap\n",
				k+1, kind, s.RecoveryP99S, s.AttemptsPerDev, s.Verdict, s.Goroutines, s.HeapAfterMiB)
		}
	}
	rep.Final = rep.Storms[len(rep.Storms)-1].footprint()
	if err := r.drainTelemetry(ctx); err != nil {
		return rep, err
	}
	rc.take(r.broker.Recorder().TakePublishes())
	t := &rep.Telemetry
	for _, m := range r.members {
		s := m.(*agentMember).pub.Stats()
		t.Enqueued += s.Enqueued
		t.Acknowledged += s.Delivered
		t.DroppedOldest += s.DroppedOldest
	}
	t.ReceivedUnique, t.Duplicates = rc.unique, rc.duplicates
	t.Lost = int64(t.Enqueued) - int64(t.DroppedOldest) - rc.unique
	rep.WallS = time.Since(start).Seconds()
	rep.check()
	return rep, nil
}

func (s SoakStorm) footprint() Footprint {
	return Footprint{Goroutines: s.Goroutines, HeapMiB: s.HeapAfterMiB}
}

// check sets Pass and Problems.
func (rep *SoakReport) check() {
	b, f, t := rep.Baseline, rep.Final, rep.Telemetry
	if float64(f.Goroutines) > float64(b.Goroutines)*(1+rep.Tolerance) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("goroutines %d after the storms against %d before", f.Goroutines, b.Goroutines))
	}
	if f.HeapMiB > b.HeapMiB*(1+rep.Tolerance) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("heap %.1f MiB after the storms against %.1f MiB before", f.HeapMiB, b.HeapMiB))
	}
	if t.Lost != 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d telemetry messages lost", t.Lost))
	}
	if t.Duplicates > int64(t.SessionsLost) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d duplicates, more than the %d session losses allow", t.Duplicates, t.SessionsLost))
	}
	rep.Pass = len(rep.Problems) == 0
}

// Summary writes the soak's outcome.
func (rep *SoakReport) Summary(w io.Writer) {
	t := rep.Telemetry
	fmt.Fprintf(w, "soak: %d devices, %d storms, policy %s, time scale %gx, %.0f s wall\n",
		rep.Devices, len(rep.Storms), rep.Policy, rep.TimeScale, rep.WallS)
	fmt.Fprintf(w, "goroutines %d before, %d after; heap %.1f MiB before, %.1f MiB after (tolerance %.0f%%)\n",
		rep.Baseline.Goroutines, rep.Final.Goroutines, rep.Baseline.HeapMiB, rep.Final.HeapMiB, 100*rep.Tolerance)
	fmt.Fprintf(w, "telemetry: %d enqueued, %d acknowledged, %d received once, %d duplicates (%d session losses), %d dropped by full queues, %d lost\n",
		t.Enqueued, t.Acknowledged, t.ReceivedUnique, t.Duplicates, t.SessionsLost, t.DroppedOldest, t.Lost)
	if rep.Pass {
		fmt.Fprintln(w, "pass")
		return
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "FAIL:", p)
	}
}

// ErrSoakFailed is returned (wrapped) by a soak command whose checks failed.
var ErrSoakFailed = errors.New("fleetsim: soak failed")

// soakStorm puts the fleet through one storm, waits for it to recover and
// for its queues to settle, and counts what the broker received.
func (r *run) soakStorm(ctx context.Context, kind string, admitRate float64, rc *receiver) (SoakStorm, error) {
	n := len(r.ids)
	r.c.Scenario, r.c.AdmitRate = plan.Scenario(kind), 0
	throttle := fault.Admission{Rate: admitRate * r.c.TimeScale, Burst: max(1, int(admitRate/20)), Mode: fault.RefuseOverLimit}
	var d disruption
	var err error
	switch kind {
	case string(plan.ThrottledRestart):
		r.c.AdmitRate, r.admission = admitRate, throttle
		d, err = r.disrupt(ctx, time.Now())
	case Mixed:
		d, err = r.mixedStorm(ctx, throttle)
	default:
		d, err = r.disrupt(ctx, time.Now())
	}
	if err != nil {
		return SoakStorm{}, err
	}
	recoverErr := r.obs.await(ctx, r.recoverBound(), func(k int) bool { return k == n })
	d.watched(recoverErr == nil, r.c.MaxBackoff, r.c.TimeScale)
	_ = r.broker.SetAdmission(fault.Admission{}) // lifting the limit cannot fail
	if recoverErr != nil {
		return SoakStorm{}, recoverErr
	}
	rep, err := r.report(d)
	if err != nil {
		return SoakStorm{}, err
	}
	queued, err := r.settle(ctx, rc)
	if err != nil {
		return SoakStorm{}, err
	}
	s := SoakStorm{Kind: kind, RecoveryP99S: rep.Recovery.P99S, AttemptsPerDev: rep.Attempts.PerDeviceMean,
		SessionsLost: r.devlog.lossCount(), Verdict: rep.Verdict, QueuedAtRecover: queued}
	r.devlog.reset()
	r.broker.Recorder().ResetConnections()
	f := footprint()
	s.Goroutines, s.HeapAfterMiB = f.Goroutines, f.HeapMiB
	return s, nil
}

// mixedStorm: the broker restarts, comes back throttled, and drops everyone
// once half the fleet is back.
func (r *run) mixedStorm(ctx context.Context, throttle fault.Admission) (disruption, error) {
	b := r.broker
	d := disruption{t0: time.Now()}
	b.Recorder().ResetConnections()
	b.BeginOutage()
	if err := reconnect.Sleep(ctx, nil, r.scale(r.c.Outage)); err != nil {
		return d, err
	}
	if err := b.SetAdmission(throttle); err != nil {
		return d, err
	}
	if err := b.EndOutage(); err != nil {
		return d, err
	}
	d.returned = time.Now()
	half := len(r.ids) / 2
	if err := r.obs.await(ctx, r.recoverBound(), func(k int) bool { return k >= half }); err != nil {
		return d, err
	}
	b.DropAll()
	return d, nil
}

// settle waits until the fleet's queues hold no more than one message a
// device (the one in flight), then hands what the broker received to rc. It
// returns what was queued when it began.
func (r *run) settle(ctx context.Context, rc *receiver) (int, error) {
	first := -1
	bound := time.Now().Add(time.Minute + r.scale(2*r.c.MaxBackoff))
	tick := time.NewTicker(20 * time.Millisecond) // no event to wait on across thousands of queues
	defer tick.Stop()
	for {
		queued := r.queued()
		if first < 0 {
			first = queued
		}
		if queued <= len(r.members) {
			rc.take(r.broker.Recorder().TakePublishes())
			return first, nil
		}
		if time.Now().After(bound) {
			return first, fmt.Errorf("fleetsim: %d telemetry messages still queued after the fleet recovered", queued)
		}
		select {
		case <-ctx.Done():
			return first, ctx.Err()
		case <-tick.C:
		}
	}
}

// footprint measures the live heap (what the last GC kept, not the spans
// it has not handed back) and the goroutines, after a GC.
func footprint() Footprint {
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	return Footprint{Goroutines: runtime.NumGoroutine(), HeapMiB: float64(live[0].Value.Uint64()) / (1 << 20)}
}
