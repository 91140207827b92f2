// Package fleetsim launches a fleet of real device agents against the
// in-process test broker, disrupts the broker, and measures from the
// broker's side whether the fleet came back spread out or in waves.
package fleetsim

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// Scenarios a run can name.
const (
	BootStorm        = "boot-storm"        // every device powers on at once
	BrokerRestart    = "broker-restart"    // the broker goes away for Outage, then comes back
	ThrottledRestart = "throttled-restart" // as broker-restart, then admits AdmitRate connects/s
	DropAll          = "drop-all"          // every session is dropped at once; the broker stays up
)

// Scenarios lists the scenarios a run can name.
var Scenarios = []string{BootStorm, BrokerRestart, ThrottledRestart, DropAll}

// HostAdmitLimit is roughly the connects per second this 2-core host served
// to real paho clients on the in-memory transport (make scale: 100,000 in
// 19.7 s); a scaled admission rate beyond it measures the host, not the fleet.
const HostAdmitLimit = 5000

// Config is one run. Durations are real-world (unscaled) time.
type Config struct {
	Devices    int
	Scenario   string
	Policy     string
	MaxBackoff time.Duration
	RetryCap   int // reconnect.RetryForever or a count
	Outage     time.Duration
	// TimeScale runs every duration that many times faster; reports are in
	// unscaled seconds.
	TimeScale  float64
	Seed       uint64
	Bucket     time.Duration // arrival buckets for the statistics
	Thresholds stormstats.Thresholds
	// Admission, if AdmitRate > 0: the broker admits AdmitRate connects per
	// (unscaled) second with bursts of AdmitBurst, over the limit behaving as
	// AdmitMode. throttled-restart applies it when the broker returns (100/s
	// if unset); other scenarios from the disruption on.
	AdmitRate  float64
	AdmitBurst int
	AdmitMode  testbroker.AdmissionMode
	// Progress, if set, receives a line a second while the fleet recovers.
	Progress io.Writer
	// Warn, if set, receives warnings about the run's own validity.
	Warn io.Writer
}

// Default is the embedded default run: 2,000 devices on the in-memory
// transport, a 30 s broker restart, the IoTCore policy, 10x time scale.
func Default() Config {
	return Config{Devices: 2000, Scenario: BrokerRestart, Policy: "iotcore", MaxBackoff: 32 * time.Second,
		RetryCap: reconnect.RetryForever, Outage: 30 * time.Second, TimeScale: 10, Seed: 1,
		Bucket: 100 * time.Millisecond, Thresholds: stormstats.DefaultThresholds}
}

func (c Config) validate() error {
	switch {
	case c.Devices < 1:
		return fmt.Errorf("devices must be >= 1, got %d", c.Devices)
	case !slices.Contains(Scenarios, c.Scenario):
		return fmt.Errorf("unknown scenario %q (one of %v)", c.Scenario, Scenarios)
	case c.AdmitRate < 0 || c.AdmitBurst < 0:
		return fmt.Errorf("admission rate and burst must be >= 0")
	case !(c.TimeScale >= 1 && c.TimeScale <= 1000):
		return fmt.Errorf("time scale must be in [1, 1000], got %g", c.TimeScale)
	case (c.Scenario == BrokerRestart || c.Scenario == ThrottledRestart) && c.Outage <= 0:
		return fmt.Errorf("outage must be > 0, got %v", c.Outage)
	case c.Bucket <= 0:
		return fmt.Errorf("bucket must be > 0, got %v", c.Bucket)
	case c.RetryCap < 0 && c.RetryCap != reconnect.RetryForever:
		return fmt.Errorf("retry cap must be >= 0 or forever, got %d", c.RetryCap)
	}
	_, err := Shape(c.Policy, c.MaxBackoff)
	return err
}

// Report is what a run found; see the README for each key.
type Report struct {
	Scenario     string              `json:"scenario"`
	Policy       string              `json:"policy"`
	Engine       string              `json:"engine"`
	Transport    string              `json:"transport"`
	Devices      int                 `json:"devices"`
	Seed         uint64              `json:"seed"`
	TimeScale    float64             `json:"time_scale"`
	RecoveryJSON recoveryJSON        `json:"recovery"`
	Attempts     Attempts            `json:"attempts"`
	Arrivals     stormstats.Arrivals `json:"arrivals"`
	Limit        *Limit              `json:"limit,omitempty"`
	// BrokerBackS is when the broker returned, in seconds after the
	// disruption (restart scenarios).
	BrokerBackS float64               `json:"broker_back_s,omitempty"`
	Verdict     stormstats.Verdict    `json:"verdict"`
	VerdictWhy  string                `json:"verdict_reason"`
	Thresholds  stormstats.Thresholds `json:"thresholds"`
	Host        Host                  `json:"host"`

	events []event
}

type recoveryJSON struct {
	P50S         float64 `json:"p50_s"`
	P95S         float64 `json:"p95_s"`
	P99S         float64 `json:"p99_s"`
	MaxS         float64 `json:"max_s"`
	AllRecovered bool    `json:"all_recovered"`
}

// Attempts counts connect attempts from the disruption to full recovery.
type Attempts struct {
	Total         int64   `json:"total"` // made by the devices, including refused dials
	PerDeviceMean float64 `json:"per_device_mean"`
	PerDeviceMax  int64   `json:"per_device_max"`
	// Refused: attempts that did not end in a session (dial refused during
	// the outage, CONNACK refusals, timeouts).
	Refused int64 `json:"refused"`
	// AfterReturnPerDeviceMean counts only the attempts the broker saw once
	// it was back.
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
}

type event struct {
	t        time.Duration // unscaled, since the disruption
	clientID string
	outcome  testbroker.Outcome
	code     byte
}

// Run executes one run.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / c.TimeScale) }
	shape, _ := Shape(c.Policy, c.MaxBackoff)
	policy, err := reconnect.New(scaled{shape, c.TimeScale}, reconnect.Limits{MaxRetries: c.RetryCap})
	if err != nil {
		return nil, err
	}
	// Every duration is scaled but the keepalive, which has a 5 s floor: the
	// broker ends sessions itself in every scenario, so keepalive never
	// shapes the measurement, while a scaled one under a second drops
	// sessions on a loaded host.
	timing := device.DefaultTiming()
	timing.Policy = policy
	timing.BootSpread = scale(10 * time.Second)
	// Outside boot-storm the fleet's boot is setup, not measurement: pace it
	// at no more than half of what this host serves, or paho's connect
	// timeouts turn the setup itself into a storm.
	hostPaced := time.Duration(float64(c.Devices) / (HostAdmitLimit / 2) * float64(time.Second))
	if c.Scenario != BootStorm {
		timing.BootSpread = max(timing.BootSpread, hostPaced)
	} else if timing.BootSpread < hostPaced && c.Warn != nil {
		fmt.Fprintf(c.Warn, "warning: %d devices booting within %v is beyond the ~%d connects/s this host serves: lower -time-scale\n",
			c.Devices, timing.BootSpread, HostAdmitLimit)
	}
	timing.StableAfter = scale(time.Minute)
	timing.CredentialsWait = scale(timing.CredentialsWait)
	timing.Guard.Window = scale(timing.Guard.Window)

	broker, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	if err != nil {
		return nil, err
	}
	defer broker.Close()
	if c.Scenario == ThrottledRestart && c.AdmitRate == 0 {
		c.AdmitRate = 100
	}
	var admission testbroker.Admission
	if c.AdmitRate > 0 {
		admission = testbroker.Admission{Rate: c.AdmitRate * c.TimeScale, Burst: max(c.AdmitBurst, 1), Mode: c.AdmitMode}
		if admission.Rate > HostAdmitLimit && c.Warn != nil {
			fmt.Fprintf(c.Warn, "warning: the scaled admission rate %.0f/s is beyond the ~%d/s this host serves: lower -time-scale\n",
				admission.Rate, HostAdmitLimit)
		}
	}
	before := memInUse()
	agents := make([]*device.Agent, c.Devices)
	t0 := time.Now()
	if c.Scenario == BootStorm && c.AdmitRate > 0 {
		if err := broker.SetAdmission(admission); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range agents {
		a, err := device.New(device.Config{Broker: broker.URL(), ClientID: "dev-" + strconv.Itoa(i), Dial: broker.Dial,
			Timing: &timing, Source: rand.NewPCG(c.Seed, uint64(i)), KeepAlive: max(5*time.Second, scale(30*time.Second)),
			ConnectTimeout: 10 * time.Second})
		if err != nil {
			return nil, err
		}
		if err := a.Start(runCtx); err != nil {
			return nil, err
		}
		agents[i] = a
	}
	defer func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		cancel()
		for _, a := range agents {
			if a != nil {
				_ = a.Stop(stopCtx)
			}
		}
	}()
	attemptsBefore := make([]int64, len(agents))
	connectsBefore := make([]int64, len(agents))
	var memPerDevice float64
	returned := t0
	if c.Scenario != BootStorm {
		bootBound := timing.BootSpread + time.Minute
		if err := broker.Recorder().Await(bootBound, func(k testbroker.Counts) bool { return k.Connected == c.Devices }); err != nil {
			return nil, fmt.Errorf("fleet did not finish booting: %w", err)
		}
		memPerDevice = float64(memInUse()-before) / float64(c.Devices) / 1024
		for i, a := range agents {
			s := a.Stats()
			attemptsBefore[i], connectsBefore[i] = s.Attempts, s.Connects
		}
		broker.Recorder().Reset()
		t0 = time.Now()
		returned = t0
		if c.AdmitRate > 0 && c.Scenario != ThrottledRestart {
			if err := broker.SetAdmission(admission); err != nil {
				return nil, err
			}
		}
	}
	switch c.Scenario {
	case BrokerRestart, ThrottledRestart:
		broker.BeginOutage()
		if err := reconnect.Sleep(ctx, nil, scale(c.Outage)); err != nil {
			return nil, err
		}
		if c.Scenario == ThrottledRestart {
			if err := broker.SetAdmission(admission); err != nil {
				return nil, err
			}
		}
		if err := broker.EndOutage(); err != nil {
			return nil, err
		}
		returned = time.Now()
	case DropAll:
		broker.DropAll()
	}
	recoverBound := scale(c.Outage+20*c.MaxBackoff) + time.Minute
	if c.AdmitRate > 0 {
		recoverBound += time.Duration(3 * float64(c.Devices) / admission.Rate * float64(time.Second))
	}
	stopProgress := progress(c.Progress, broker, c.Devices, c.TimeScale, t0)
	err = broker.Recorder().Await(recoverBound, func(k testbroker.Counts) bool { return k.Connected == c.Devices })
	stopProgress()
	allRecovered := err == nil

	r := &Report{Scenario: c.Scenario, Policy: c.Policy, Engine: "agents", Transport: "mem", Devices: c.Devices,
		Seed: c.Seed, TimeScale: c.TimeScale, Thresholds: c.Thresholds}
	unscale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * c.TimeScale) }
	recovered := map[string]time.Duration{}
	var arrivals []time.Duration
	afterReturn := 0
	for _, a := range broker.Recorder().Attempts() {
		at := a.Connect
		if at.IsZero() {
			at = a.Accept
		}
		t := unscale(at.Sub(t0))
		arrivals = append(arrivals, t)
		r.events = append(r.events, event{t: t, clientID: a.ClientID, outcome: a.Outcome, code: a.Code})
		if !at.Before(returned) {
			afterReturn++
		}
		if a.Outcome == testbroker.Accepted {
			if _, seen := recovered[a.ClientID]; !seen {
				recovered[a.ClientID] = t
			}
		}
	}
	var recoveries []float64
	for _, d := range recovered {
		recoveries = append(recoveries, d.Seconds())
	}
	r.RecoveryJSON = recoveryJSON{P50S: stormstats.Percentile(recoveries, 50), P95S: stormstats.Percentile(recoveries, 95),
		P99S: stormstats.Percentile(recoveries, 99), MaxS: stormstats.Percentile(recoveries, 100),
		AllRecovered: allRecovered && len(recovered) == c.Devices}
	for i, a := range agents {
		s := a.Stats()
		n := s.Attempts - attemptsBefore[i]
		r.Attempts.Total += n
		r.Attempts.Refused += n - (s.Connects - connectsBefore[i])
		r.Attempts.PerDeviceMax = max(r.Attempts.PerDeviceMax, n)
	}
	r.Attempts.PerDeviceMean = float64(r.Attempts.Total) / float64(c.Devices)
	r.Attempts.AfterReturnPerDeviceMean = float64(afterReturn) / float64(c.Devices)
	r.Arrivals = stormstats.Summarize(arrivals, c.Bucket)
	r.BrokerBackS = unscale(returned.Sub(t0)).Seconds()
	if c.AdmitRate > 0 {
		r.Limit = &Limit{AdmitRate: c.AdmitRate, IdealRecoveryS: float64(c.Devices) / c.AdmitRate}
	}
	if memPerDevice == 0 {
		memPerDevice = float64(memInUse()-before) / float64(c.Devices) / 1024
	}
	r.Verdict, r.VerdictWhy = stormstats.Judge(r.Arrivals, c.Thresholds)
	r.Host = Host{WallS: time.Since(start).Seconds(), MemoryPerDeviceKB: memPerDevice}
	if !r.RecoveryJSON.AllRecovered {
		return r, fmt.Errorf("%w: %d of %d within %v", ErrNotRecovered, len(recovered), c.Devices, recoverBound)
	}
	return r, nil
}

// ErrNotRecovered is wrapped when a run ends with devices still offline.
var ErrNotRecovered = errors.New("fleetsim: not every device recovered")

func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// progress prints connected/total and attempts per second once a second.
func progress(w io.Writer, b *testbroker.Broker, total int, scale float64, t0 time.Time) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				k := b.Recorder().Counts()
				fmt.Fprintf(w, "t=%5.0fs  connected %d/%d  attempts/s %d\n",
					time.Since(t0).Seconds()*scale, k.Connected, total, int(float64(k.Attempts-last)/scale))
				last = k.Attempts
			}
		}
	}()
	return func() { close(done); <-finished }
}

// WriteFiles writes report.json, events.csv, arrivals.svg and report.html
// into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := r.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "events.csv"))
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"t_s", "client_id", "outcome", "code"})
	for _, e := range r.events {
		_ = cw.Write([]string{strconv.FormatFloat(e.t.Seconds(), 'f', 4, 64), e.clientID, e.outcome.String(), strconv.Itoa(int(e.code))})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return WriteCharts(dir, []*Report{r})
}

// WriteCharts writes arrivals.svg and report.html for reports (one run, or a
// compare run's) into dir.
func WriteCharts(dir string, reports []*Report) error {
	svg, err := ChartSVG(reports)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "arrivals.svg"), svg, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	if err := WriteHTML(f, reports); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
