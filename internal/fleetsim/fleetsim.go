// Package fleetsim runs a storm: a fleet that loses its broker, and
// whether it comes back spread out or in waves. The flow:
//
//	plan.Plan ──Validate──▶ Engine (agents: real devices; virtual: the model)
//	                           │ every attempt.Record, as it is made
//	                           ▼
//	                  report.Builder ──stormstats.Judge──▶ report.Report
//
// A plan is checked once, before anything starts. It is checked against
// what this host holds. Either engine then takes it and emits the same
// records to the same builder. A report thus reads the same whichever
// engine made it.
package fleetsim

import (
	"context"
	"fmt"

	"github.com/herdguard/herdguard/internal/agents"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/virtual"
)

// Runner is an engine's entry: it runs a validated plan's fleet through
// its disruption and returns what it found. A fleet that ends with
// devices still offline returns its report and an error wrapping
// report.ErrNotRecovered.
type Runner interface {
	Run(ctx context.Context, p plan.Plan) (*report.Report, error)
}

// RunnerFunc is a function that is a Runner.
type RunnerFunc func(ctx context.Context, p plan.Plan) (*report.Report, error)

func (f RunnerFunc) Run(ctx context.Context, p plan.Plan) (*report.Report, error) { return f(ctx, p) }

// Runners are the engines a plan can name (plan.Engine), each by its
// Runner.
var Runners = map[plan.Engine]Runner{
	plan.Agents: RunnerFunc(agents.Run),
	plan.Wire:   RunnerFunc(agents.Run), // the agents' fleet, whose members are wire devices
	plan.Virtual: RunnerFunc(func(ctx context.Context, p plan.Plan) (*report.Report, error) {
		return virtual.Run(ctx, p, virtual.Options{})
	}),
}

// Run validates p and runs it on the engine it names.
func Run(ctx context.Context, p plan.Plan) (*report.Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e, ok := Runners[p.Engine]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q", p.Engine)
	}
	return e.Run(ctx, p)
}
