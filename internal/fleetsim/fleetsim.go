// Package fleetsim runs a storm: a fleet that loses its broker, and
// whether it comes back spread out or in waves. The flow:
//
//	plan.Plan ──Validate──▶ Engine (agents: real devices; virtual: the model)
//	                           │ every attempt.Record, as it is made
//	                           ▼
//	                  report.Builder ──stormstats.Judge──▶ report.Report
//
// A plan is checked once, before anything starts, against what this host
// holds; either engine then takes it and emits the same records to the
// same builder, so a report reads the same whichever engine made it.
package fleetsim

import (
	"context"
	"fmt"

	"github.com/herdguard/herdguard/internal/agents"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/virtual"
)

// Engine runs a validated plan's fleet through its disruption and returns
// what it found. A fleet that ends with devices still offline returns its
// report and an error wrapping report.ErrNotRecovered.
type Engine interface {
	Run(ctx context.Context, p plan.Plan) (*report.Report, error)
}

// EngineFunc is a function that is an Engine.
type EngineFunc func(ctx context.Context, p plan.Plan) (*report.Report, error)

func (f EngineFunc) Run(ctx context.Context, p plan.Plan) (*report.Report, error) { return f(ctx, p) }

// Engines are the engines a plan can name.
var Engines = map[plan.Engine]Engine{
	plan.Agents: EngineFunc(agents.Run),
	plan.Virtual: EngineFunc(func(ctx context.Context, p plan.Plan) (*report.Report, error) {
		return virtual.Run(ctx, p, virtual.Options{})
	}),
}

// Run validates p and runs it on the engine it names.
func Run(ctx context.Context, p plan.Plan) (*report.Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e, ok := Engines[p.Engine]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q", p.Engine)
	}
	return e.Run(ctx, p)
}
