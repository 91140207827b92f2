package agents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/internal/hostload"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/reconnect"
)

// ErrLost is wrapped when telemetry went missing.
var ErrLost = errors.New("agents: telemetry lost")

// Run runs plan p, which the caller has validated, on real agents. A live
// fleet is booted, put through the plan's disruption, awaited, and
// reported. The plan may instead have a timeline, each disruption at its
// time after the first, or a cluster's rolling restart, node by node.
// Every disruption's recovery is judged on its own. A run that ends with
// devices still offline returns its report and an error wrapping
// ErrNotRecovered. An interrupted one (ctx ended) returns its report so
// far and ctx's error.
func Run(ctx context.Context, p plan.Plan) (*report.Report, error) {
	start := time.Now()
	f, err := Start(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	if p.Hold != nil {
		return f.held(ctx, start)
	}
	memPerDevice, err := f.boot(ctx)
	if err != nil {
		return nil, err
	}
	rec, recoverErr := f.storm(ctx)
	if !reportable(ctx, recoverErr) {
		return nil, recoverErr
	}
	var drainErr error
	if f.p.HasTelemetry() {
		drainErr = f.Drain(ctx)
	}
	if err := f.releaseChildren(rec.T0); err != nil { // their reports are part of the end
		return nil, err
	}
	end := f.end(start, memPerDevice, recoverErr == nil)
	if ctx.Err() != nil {
		end.Incomplete = "interrupted"
	}
	rep, err := f.Report(rec, end)
	if err != nil {
		return nil, err
	}
	return rep, f.outcome(ctx, rep, recoverErr, drainErr)
}

// boot waits for the whole fleet to come up (boot-storm measures the boot
// itself) and returns what a device holds.
func (f *Fleet) boot(ctx context.Context) (memPerDevice float64, err error) {
	if f.p.Scenario == plan.BootStorm {
		return 0, nil
	}
	if err := f.AwaitUp(ctx); err != nil {
		return 0, err
	}
	memPerDevice = f.memoryPerDevice()
	if f.p.Ready != nil {
		f.p.Ready() // observe: the user's disruption may come from here on
	}
	return memPerDevice, nil
}

// step is one disruption of the plan's storm, at its time after the first.
type step struct {
	at time.Duration // unscaled
	do func(ctx context.Context) error
}

// steps are the plan's disruptions, in order of time: the first, and the
// rest of its timeline, a rolling restart's node by node, one a gap.
func (f *Fleet) steps() []step {
	var out []step
	for _, s := range f.p.Strikes() {
		e := s.Event
		if s.Node != plan.AllNodes {
			e.Node = &s.Node
		}
		out = append(out, step{at: s.At, do: func(ctx context.Context) error { return f.Disrupt(ctx, e) }})
	}
	return out
}

// storm makes the plan's disruptions, each at its time after the first,
// and awaits the fleet's recovery from them all. An interrupt between them
// ends the timeline there, and the recovery is what was seen so far.
func (f *Fleet) storm(ctx context.Context) (Watch, error) {
	if f.p.Scenario != plan.BootStorm {
		first, err := f.awaitStrike(ctx)
		if err != nil {
			return Watch{}, err
		}
		f.struckAt = &first
		// The plan's admission limit holds from the first disruption on,
		// as in the model; a throttled restart's from its return.
		if f.p.AdmitRate > 0 && f.p.Scenario != plan.ThrottledRestart {
			if err := f.admit(f.admission); err != nil {
				return Watch{}, err
			}
		}
		for _, s := range f.steps() {
			if reconnect.Sleep(ctx, nil, time.Until(first.at.Add(f.scale(s.at)))) != nil {
				break
			}
			if err := s.do(ctx); err != nil && (ctx.Err() == nil || f.w == nil) {
				return Watch{}, err
			}
		}
	}
	rec, err := f.AwaitRecovery(ctx)
	// The broker was first back when the plan says, whatever the host's
	// timers made of it: the model's instant.
	rec.Returned = rec.T0.Add(f.scale(f.p.FirstReturn()))
	return rec, err
}

// processState is what the process holds and has spent, at a moment.
type processState struct {
	heap, resident uint64
	cpu            time.Duration
}

func processNow() processState {
	rss, _ := hostload.Resident()
	return processState{heap: report.HeapInUse(), resident: rss, cpu: hostload.CPU()}
}

// memoryPerDevice is the heap the members added, per device, in KiB.
func (f *Fleet) memoryPerDevice() float64 {
	return float64(report.HeapInUse()-f.before.heap) / float64(len(f.ids)) / 1024
}

// end is what the run knows as it ends: whether every device came up
// (finished), its telemetry, and what it cost this host and its children.
func (f *Fleet) end(start time.Time, memPerDevice float64, finished bool) report.End {
	n := len(f.ids)
	end := report.End{Finished: finished, Started: start}
	if f.p.HasTelemetry() {
		end.Telemetry = f.Telemetry()
	}
	if memPerDevice == 0 {
		memPerDevice = f.memoryPerDevice()
	}
	h := &end.Host
	if f.childReports == nil {
		f.processCost(h)
	} else {
		h.KernelTCPKB = float64(hostload.KernelTCP()) / 1024
	}
	for _, cr := range f.childReports { // the agents' side, in their processes
		share := float64(cr.Devices) / float64(n)
		memPerDevice += cr.Host.MemoryPerDeviceKB * share
		h.ResidentPerDeviceKB += cr.Host.ResidentPerDeviceKB * share
		h.CPUPerDeviceMS += cr.Host.CPUPerDeviceMS * share
	}
	h.MemoryPerDeviceKB, h.AgentProcesses = memPerDevice, len(f.childReports)
	return end
}

// processCost is what this process's devices cost it from their start:
// its peak resident memory, and its CPU, per device; and the kernel's TCP
// buffers now.
func (f *Fleet) processCost(h *report.Host) {
	n := float64(len(f.ids))
	_, peak := hostload.Resident()
	h.ResidentPerDeviceKB = float64(peak-min(peak, f.before.resident)) / n / 1024
	h.CPUPerDeviceMS = float64(hostload.CPU()-f.before.cpu) / float64(time.Millisecond) / n
	h.KernelTCPKB = float64(hostload.KernelTCP()) / 1024
}

// outcome is the run's error: interrupted, not recovered, a drain that
// failed, or telemetry lost, in that order; nil for a run that saw
// everyone back and lost nothing.
func (f *Fleet) outcome(ctx context.Context, rep *report.Report, recoverErr, drainErr error) error {
	n, recovered := len(f.ids), rep.Recovered()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted with %d of %d devices back: %w", recovered, n, ctx.Err())
	case !rep.Recovery.AllRecovered:
		return fmt.Errorf("%w: %d of %d within %v", ErrNotRecovered, recovered, n, f.recoverBound())
	case drainErr != nil:
		return drainErr
	case rep.Telemetry != nil && rep.Telemetry.Lost != 0:
		return fmt.Errorf("%w: %d telemetry messages", ErrLost, rep.Telemetry.Lost)
	}
	return nil
}
