package proxystorm

import (
	"errors"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/planner"
	"github.com/herdguard/herdguard/internal/policyfit"
	"github.com/herdguard/herdguard/internal/report/external"
)

// InferPolicy says which reconnect policy the fleet runs, from each
// device's attempts since the first disruption (policyfit). Devices are
// told apart by client ID: without -identify a refused attempt names
// none, and a device's own sequence is only its admitted attempts.
func (s *Storm) InferPolicy() (policyfit.Inference, error) {
	s.mu.Lock()
	t0, strikes, returned := s.t0, len(s.strikes), s.returned
	s.mu.Unlock()
	var o policyfit.Options
	switch {
	case !returned.IsZero():
		o.Return = returned.Sub(t0)
	case strikes > 0:
		o.Return = s.cfg.Plan.FirstReturn()
	}
	devices := s.Devices()
	r, err := policyfit.Infer(devices, o)
	if err != nil || named(r) {
		return r, err
	}
	// A process that keeps hundreds of clients in one event loop (MQTT.js)
	// notices a drop up to 0.7 s late: where policyfit's 300 ms for the
	// first attempt tells nothing, a second may. Not at first: so loose
	// an origin blurs a first wait that carries the base (fleet-safe's
	// U[1.5 s, 3 s) through a 10 s outage, 100 agents: named in 40 of 40
	// seeds at 300 ms, 7 of 40 at 1 s).
	o.NoticeWindow = time.Second
	if late, err := policyfit.Infer(devices, o); err == nil && named(late) {
		return late, nil
	}
	return r, nil
}

// named reports whether r names a policy for some devices.
func named(r policyfit.Inference) bool {
	for _, g := range r.Groups {
		if g.Fit.Err == nil {
			return true
		}
	}
	return false
}

// PolicyOf is an inference as the report has it.
func PolicyOf(r policyfit.Inference, identified bool) *external.Policy {
	p := &external.Policy{Fleet: fitOf(r.Fleet), Unsure: len(r.Unsure), Identified: identified}
	for _, g := range r.Groups {
		pg := external.Group{Devices: len(g.IDs), Fit: fitOf(g.Fit)}
		pg.IDs = g.IDs[:min(len(g.IDs), external.MaxGroupIDs)]
		p.Groups = append(p.Groups, pg)
	}
	return p
}

func fitOf(f policyfit.Fit) external.Fit {
	pf := external.Fit{Family: string(f.Family), BaseS: secs(f.Base), Factor: f.Factor, StepS: secs(f.Step),
		JitterS: secs(f.Jitter), JitterFraction: f.JitterFraction, JitterAtCap: f.JitterAtCap, CapS: secs(f.Cap),
		CapAtLeastS: secs(f.CapAtLeast), FirstImmediate: f.FirstImmediate, Spec: f.Spec, NoSpec: f.NoSpec,
		Devices: f.Devices, Retries: f.Retries, Margin: f.Margin, RunnerUp: string(f.RunnerUp), KS: f.KS}
	if f.Err != nil {
		pf.CannotTell = f.Err.Error()
		if errors.Is(f.Err, policyfit.ErrMixed) {
			pf.CannotTell = "the fleet runs more than one policy: see its groups"
		}
	}
	for _, c := range f.Candidates {
		pf.Candidates = append(pf.Candidates, string(c))
	}
	return pf
}

func secs(d time.Duration) float64 { return d.Seconds() }

// Prediction is the planner's question of the policy inferred, run at
// devices behind p's admission after its outage, as the fleet's current
// policy; note says what it assumed, why why none can run.
func Prediction(inferred *external.Policy, p plan.Plan, devices int) (q planner.Question, note, why string) {
	fit, why := inferred.Runnable()
	if why != "" {
		return q, "", why
	}
	capped := time.Duration(fit.CapS * float64(time.Second))
	if capped == 0 {
		capped = time.Duration(fit.CapAtLeastS * float64(time.Second))
		note = fmt.Sprintf("the storm did not reach the policy's cap: run with the longest wait seen, %v, as its cap", capped)
	}
	q = planner.Question{Devices: devices, AdmitRate: p.AdmitRate, AdmitBurst: p.AdmitBurst, AdmitMode: p.AdmitMode,
		Nodes: p.Nodes, Outage: p.Outage, Current: fmt.Sprintf("%s@%v", fit.Spec, capped.Round(time.Millisecond)), CurrentShare: 1}
	return q, note, ""
}
