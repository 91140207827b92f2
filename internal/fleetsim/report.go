package fleetsim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

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
	// MeasuredAt says whose clock the arrivals are: "broker" (the
	// in-process broker's), "devices" (an external broker: the devices'
	// own attempts, refused dials included) or "config-server".
	MeasuredAt string `json:"measured_at"`
	// DisruptionUnixMS anchors the unscaled times, to merge shards.
	DisruptionUnixMS int64  `json:"disruption_unix_ms"`
	Shard            string `json:"shard,omitempty"`
	// Telemetry is what the devices' store-and-forward queues did over the
	// whole run, when it had telemetry.
	Telemetry *Telemetry `json:"telemetry,omitempty"`

	events    []event
	recovered int
	// after DropEvents: the chart's 100 ms arrival counts, events gone
	chartCounts   []int
	eventsDropped bool
}

type recoveryJSON struct {
	P50S         float64 `json:"p50_s"`
	P95S         float64 `json:"p95_s"`
	P99S         float64 `json:"p99_s"`
	MaxS         float64 `json:"max_s"`
	AllRecovered bool    `json:"all_recovered"`
}

// recoveryOf is the percentiles of each device's recovery time (AllRecovered
// is the caller's to set).
func recoveryOf(recovered map[string]time.Duration) recoveryJSON {
	var xs []float64
	for _, t := range recovered {
		xs = append(xs, t.Seconds())
	}
	return recoveryJSON{P50S: stormstats.Percentile(xs, 50), P95S: stormstats.Percentile(xs, 95),
		P99S: stormstats.Percentile(xs, 99), MaxS: stormstats.Percentile(xs, 100)}
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

// event is one attempt in a report: tens of millions in a million-device
// run, so kept small (56 bytes).
type event struct {
	t        time.Duration // unscaled, since the disruption
	unixNS   int64         // wall clock, to merge shards' events
	clientID string
	outcome  string
	code     int32
}

// JSON encodes the report as report.json holds it.
func (r *Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// Summary writes the human-readable summary.
func (r *Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "%s, %d devices, policy %s, %s transport, time scale %gx (times below are unscaled)\n",
		r.Scenario, r.Devices, r.Policy, r.Transport, r.TimeScale)
	rc := r.RecoveryJSON
	fmt.Fprintf(w, "recovery: p50 %.1f s, p95 %.1f s, p99 %.1f s, max %.1f s; all recovered: %v\n",
		rc.P50S, rc.P95S, rc.P99S, rc.MaxS, rc.AllRecovered)
	a := r.Attempts
	fmt.Fprintf(w, "attempts: %d (%.1f per device, max %d), %d refused; %.2f per device once the disruption ended\n",
		a.Total, a.PerDeviceMean, a.PerDeviceMax, a.Refused, a.AfterReturnPerDeviceMean)
	ar := r.Arrivals
	fmt.Fprintf(w, "arrivals (seen by the %s): peak %.0f/s (100 ms), %.0f/s (1 s), peak/mean %.1f, Fano %.1f (local %.1f), busiest second %.1fx its surroundings, max share in 1 s %.0f%%\n",
		r.MeasuredAt, ar.PeakPerS100ms, ar.PeakPerS1s, ar.PeakToMean, ar.Fano, ar.LocalFano, ar.LocalPeakRatio, 100*ar.MaxShare1s)
	if r.Limit != nil {
		fmt.Fprintf(w, "admission limit %.0f/s: ideal recovery %.1f s after the return; p99 took %.1f s from the disruption\n",
			r.Limit.AdmitRate, r.Limit.IdealRecoveryS, rc.P99S)
	}
	if t := r.Telemetry; t != nil {
		fmt.Fprintf(w, "telemetry (%g/s per device, whole run): %d enqueued, %d acknowledged, %d received once, %d duplicates, %d publish failures retried, %d dropped by full queues, %d lost\n",
			t.RatePerDevice, t.Enqueued, t.Acknowledged, t.ReceivedUnique, t.Duplicates, t.Retried, t.DroppedOldest, t.Lost)
	}
	fmt.Fprintf(w, "verdict: %s (%s)\n", r.Verdict, r.VerdictWhy)
	fmt.Fprintf(w, "host: %.1f s wall, %.1f KiB per device\n", r.Host.WallS, r.Host.MemoryPerDeviceKB)
}

// CompareTable writes one row per report: policy, recovery p99, attempts per
// device, peak arrivals per second, Fano factor and verdict.
func CompareTable(w io.Writer, reports []*Report) {
	fmt.Fprintf(w, "%-22s %14s %16s %13s %8s %11s %12s  %s\n", "policy", "recovery p99", "attempts/device", "peak/s (1 s)", "Fano", "local Fano", "peak/around", "verdict")
	for _, r := range reports {
		p99 := fmt.Sprintf("%.1f s", r.RecoveryJSON.P99S)
		if !r.RecoveryJSON.AllRecovered {
			p99 = "> " + p99 // p99 of those that came back; some did not
		}
		fmt.Fprintf(w, "%-22s %14s %16.1f %13.0f %8.1f %11.1f %12.1f  %s\n", r.Policy, p99,
			r.Attempts.PerDeviceMean, r.Arrivals.PeakPerS1s, r.Arrivals.Fano, r.Arrivals.LocalFano, r.Arrivals.LocalPeakRatio, r.Verdict)
	}
}

// WriteFiles writes report.json, events.csv, arrivals.svg and report.html
// into dir.
func (r *Report) WriteFiles(dir string) error {
	if r.eventsDropped {
		return fmt.Errorf("fleetsim: the report's events were dropped; write its files before DropEvents")
	}
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
	err = writeFile(filepath.Join(dir, "events.csv"), func(w io.Writer) error {
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"t_s", "unix_ms", "client_id", "outcome", "code"})
		for _, e := range r.events {
			_ = cw.Write([]string{strconv.FormatFloat(e.t.Seconds(), 'f', 4, 64), strconv.FormatInt(e.unixNS/1e6, 10),
				e.clientID, e.outcome, strconv.Itoa(int(e.code))})
		}
		cw.Flush()
		return cw.Error()
	})
	if err != nil {
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
	return writeFile(filepath.Join(dir, "report.html"), func(w io.Writer) error { return WriteHTML(w, reports) })
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
