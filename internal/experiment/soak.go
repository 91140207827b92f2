package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/agents"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Mixed is a soak's worst storm: the broker restarts, comes back throttled
// (refusing over the admission rate), and drops everyone again once half the
// fleet is back.
const Mixed = "mixed"

// SoakStorms are the storms a soak goes through, in turn.
var SoakStorms = []string{string(plan.DropAll), string(plan.BrokerRestart), string(plan.ThrottledRestart), string(plan.Flapping), Mixed}

// SoakConfig is a soak: one live fleet of real agents with telemetry on,
// through Storms storms in turn. It finds what a single run cannot:
// goroutines or memory that do not come back, and messages lost or
// duplicated beyond what at-least-once delivery allows.
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

// SoakReport is what a soak found. Pass is false, and Problems say why,
// when goroutines or heap did not return within Tolerance of the
// baseline. The same holds when a message was lost, or when there were
// more duplicates than session losses. At least once allows one per loss:
// the message in flight.
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

// plan is the soak's fleet: the default run's, with the soak's size,
// policy, telemetry and pace. Its throttled storms' admission refuses over
// the rate in bursts of a twentieth of it.
func (sc SoakConfig) plan() (plan.Plan, error) {
	p := plan.Default()
	p.Devices, p.Policy, p.Telemetry, p.TimeScale, p.Seed = sc.Devices, sc.Policy, sc.Telemetry, sc.TimeScale, sc.Seed
	p.Outage, p.Scenario = sc.Outage, plan.BrokerRestart
	p.AdmitRate, p.AdmitBurst, p.AdmitMode = sc.AdmitRate, max(1, int(sc.AdmitRate/20)), fault.RefuseOverLimit
	switch {
	case sc.Storms < 1:
		return p, fmt.Errorf("storms must be >= 1, got %d", sc.Storms)
	case !(sc.Telemetry > 0):
		return p, fmt.Errorf("a soak needs telemetry (> 0 messages per device per second), got %g", sc.Telemetry)
	case !(sc.AdmitRate > 0):
		return p, fmt.Errorf("admit rate must be > 0, got %g", sc.AdmitRate)
	}
	return p, p.Validate()
}

// Soak runs a soak: one live fleet (agents.Start) through storm after
// storm, each awaited, reported and settled before the next.
func Soak(ctx context.Context, sc SoakConfig) (*SoakReport, error) {
	p, err := sc.plan()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	f, err := agents.Start(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	if err := f.AwaitUp(ctx); err != nil {
		return nil, err
	}
	rep := &SoakReport{Devices: f.Devices(), Policy: p.Policy, TimeScale: p.TimeScale, Tolerance: soakTolerance}
	if _, err := f.Settle(ctx); err != nil {
		return nil, err
	}
	rep.Baseline = footprint()
	for k := range sc.Storms {
		kind := SoakStorms[k%len(SoakStorms)]
		s, err := soakStorm(ctx, f, kind, p.Outage)
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
	if err := f.Drain(ctx); err != nil {
		return rep, err
	}
	tel := f.Telemetry()
	t := &rep.Telemetry
	t.Enqueued, t.Acknowledged, t.DroppedOldest = tel.Enqueued, tel.Acknowledged, tel.DroppedOldest
	t.ReceivedUnique, t.Duplicates = int64(tel.ReceivedUnique), int64(tel.Duplicates)
	t.Lost = int64(t.Enqueued) - int64(t.DroppedOldest) - t.ReceivedUnique
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
var ErrSoakFailed = errors.New("experiment: soak failed")

// soakStorm puts the fleet through one storm, waits for it to recover and
// for its queues to settle, and counts what the broker received.
func soakStorm(ctx context.Context, f *agents.Fleet, kind string, outage time.Duration) (SoakStorm, error) {
	var err error
	switch kind {
	case Mixed:
		err = mixedStorm(ctx, f, outage)
	default:
		err = f.Disrupt(ctx, plan.Event{Scenario: plan.Scenario(kind), Outage: outage})
	}
	if err != nil {
		return SoakStorm{}, err
	}
	rec, err := f.AwaitRecovery(ctx)
	// a throttled storm's limit ends with it
	if lift := f.SetAdmission(fault.Admission{}); err == nil {
		err = lift
	}
	if err != nil {
		return SoakStorm{}, err
	}
	rep, err := f.Report(rec, report.End{Finished: rec.Recovered})
	if err != nil {
		return SoakStorm{}, err
	}
	queued, err := f.Settle(ctx)
	if err != nil {
		return SoakStorm{}, err
	}
	s := SoakStorm{Kind: kind, RecoveryP99S: rep.Recovery.P99S, AttemptsPerDev: rep.Attempts.PerDeviceMean,
		SessionsLost: rec.SessionsLost, Verdict: rep.Verdict, QueuedAtRecover: queued}
	fp := footprint()
	s.Goroutines, s.HeapAfterMiB = fp.Goroutines, fp.HeapMiB
	return s, nil
}

// mixedStorm: the broker restarts, comes back throttled, and drops
// everyone once half the fleet is back.
func mixedStorm(ctx context.Context, f *agents.Fleet, outage time.Duration) error {
	if err := f.Disrupt(ctx, plan.Event{Scenario: plan.ThrottledRestart, Outage: outage}); err != nil {
		return err
	}
	if err := f.AwaitConnected(ctx, f.Devices()/2); err != nil {
		return err
	}
	return f.Disrupt(ctx, plan.Event{Scenario: plan.DropAll})
}

// footprint measures the live heap (what the last GC kept, not the spans
// it has not handed back) and the goroutines, after a GC.
func footprint() Footprint {
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	return Footprint{Goroutines: runtime.NumGoroutine(), HeapMiB: float64(live[0].Value.Uint64()) / (1 << 20)}
}
