package fleetsim

import (
	"encoding/json"
	"fmt"
	"io"
)

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
	fmt.Fprintf(w, "host: %.1f s wall, %.0f KiB per device\n", r.Host.WallS, r.Host.MemoryPerDeviceKB)
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
