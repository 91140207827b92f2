package fleetsim

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/herdguard/herdguard/internal/hostload"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// ServedScale is p at the scale the host serves its fleet: a run of real
// agents that leaves its time scale to the host starts at the scale the
// host's share of its cores, measured now, serves for the fleet. It says
// so on w. Any other plan is p.
func ServedScale(p plan.Plan, w io.Writer) plan.Plan {
	if !p.AutoScale || !p.Engine.Real() || p.TimeScale <= 1 {
		return p
	}
	share := hostload.Share(300 * time.Millisecond)
	scale := hostload.Scale(p.TimeScale, share, p.Devices)
	fmt.Fprintf(w, "time scale %gx (at most %gx): this run has %.0f %% of the host's cores now, for %d devices\n",
		scale, p.TimeScale, 100*share, p.Devices)
	p.TimeScale = scale
	return p
}

// SlowerWhileBound runs p with run; when p leaves its time scale to the
// host, it runs it again slower, saying so on w, for as long as the host
// bound it and a slower scale is left. It returns the plan of the run it
// reports.
func SlowerWhileBound(ctx context.Context, p plan.Plan, w io.Writer, run func(plan.Plan) (*report.Report, error)) (*report.Report, plan.Plan, error) {
	for {
		r, err := run(p)
		if r == nil || !r.Host.Bound || !p.AutoScale || ctx.Err() != nil {
			return r, p, err
		}
		slower, ok := hostload.Slower(p.TimeScale)
		if !ok {
			return r, p, err
		}
		fmt.Fprintf(w, "the host set this run's times at %gx (%.0f ms late at the 99th percentile): running it again at %gx\n",
			p.TimeScale, 1000*r.Host.LateP99S(), slower)
		p.TimeScale = slower
	}
}
