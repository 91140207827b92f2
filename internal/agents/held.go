package agents

import (
	"context"
	"time"

	"github.com/herdguard/herdguard/internal/agents/children"
	"github.com/herdguard/herdguard/internal/report"
)

// held is a child run's end: wait for the parent's t0 (plan.Outputs.Hold),
// let the telemetry drain, and report the devices' own attempts from t0
// on.
func (f *Fleet) held(ctx context.Context, start time.Time) (*report.Report, error) {
	t0, err := children.ReadHold(f.p.Hold)
	if err != nil {
		return nil, err
	}
	if f.p.HasTelemetry() {
		if err := f.Drain(ctx); err != nil {
			return nil, err
		}
	}
	rec := Watch{T0: t0, Returned: t0, Until: time.Now(), Recovered: f.obs.Connected() == len(f.ids)}
	if rec.Recovered {
		rec.Until = rec.Until.Add(f.scale(f.p.MaxBackoff))
	}
	end := report.End{Finished: rec.Recovered, Started: start}
	if ctx.Err() != nil {
		end.Incomplete = "interrupted"
	}
	if f.p.HasTelemetry() {
		end.Telemetry = f.Telemetry()
	}
	end.Host.MemoryPerDeviceKB = f.memoryPerDevice()
	f.processCost(&end.Host)
	return f.Report(rec, end)
}
