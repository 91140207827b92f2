// Package external holds what a report of someone else's fleet, stormed
// through the fault proxy (devicesim proxy), knows beyond its attempts: how
// its devices were told apart, those never back, and which reconnect
// policy they run.
package external

import (
	"fmt"
	"io"
	"strings"
)

// Devices is how a storm of someone else's fleet told its devices apart,
// and those never back.
type Devices struct {
	// ByClientID counts the devices known by their client ID; BySession
	// those known only as a session (under TLS nothing names them).
	ByClientID int `json:"by_client_id"`
	BySession  int `json:"by_session"`
	// Identified: the proxies read each refused attempt's CONNECT
	// (-identify), so every attempt carries its client ID.
	Identified bool `json:"identified"`
	// NeverBack names the devices with no session when the watch ended,
	// at most MaxNeverBack of them; NeverBackCount counts them all.
	NeverBack      []string `json:"never_back,omitempty"`
	NeverBackCount int      `json:"never_back_count"`
}

// MaxNeverBack is the most devices never back a report names.
const MaxNeverBack = 100

// Write writes how the fleet's devices were told apart, and who never
// came back; nothing for a nil Devices.
func (x *Devices) Write(w io.Writer) {
	if x == nil {
		return
	}
	how := "by client ID"
	switch {
	case x.BySession > 0 && x.ByClientID == 0:
		how = "by session only (no CONNECT in the clear: TLS?)"
	case x.BySession > 0:
		how = fmt.Sprintf("%d by client ID, %d by session only", x.ByClientID, x.BySession)
	}
	refused := "refused attempts are counted, not named (-identify names them)"
	if x.Identified {
		refused = "refused attempts named too (-identify)"
	}
	fmt.Fprintf(w, "the fleet's devices: %s; %s\n", how, refused)
	if x.NeverBackCount > 0 {
		more := ""
		if x.NeverBackCount > len(x.NeverBack) {
			more = fmt.Sprintf(" and %d more", x.NeverBackCount-len(x.NeverBack))
		}
		named := strings.Join(x.NeverBack, ", ")
		if named == "" {
			named = "sessions with no client ID"
		}
		fmt.Fprintf(w, "never back (%d): %s%s\n", x.NeverBackCount, named, more)
	}
}

// Policy is which reconnect policy an external fleet runs, as its attempts
// through the proxy tell it (devicesim proxy): the fleet's, and each group
// of devices that runs one of its own.
type Policy struct {
	Fleet  Fit     `json:"fleet"`
	Groups []Group `json:"groups,omitempty"`
	// Unsure counts the devices no group could place.
	Unsure int `json:"unsure,omitempty"`
	// Identified: refused attempts carried their client IDs (-identify),
	// so each device's whole sequence was read.
	Identified bool `json:"identified"`
}

// Group is devices that run one policy: the first MaxGroupIDs of their
// client IDs, and their fit.
type Group struct {
	Devices int      `json:"devices"`
	IDs     []string `json:"ids"`
	Fit     Fit      `json:"fit"`
}

// MaxGroupIDs is the most client IDs a report names for a group.
const MaxGroupIDs = 20

// Fit is a policy family and its parameters, or why none is named
// (CannotTell). Times are in seconds; a cap of 0 was not reached
// (CapAtLeastS is then the longest wait seen).
type Fit struct {
	Family         string   `json:"family,omitempty"`
	CannotTell     string   `json:"cannot_tell,omitempty"`
	Candidates     []string `json:"candidates,omitempty"`
	BaseS          float64  `json:"base_s,omitempty"`
	Factor         float64  `json:"factor,omitempty"`
	StepS          float64  `json:"step_s,omitempty"`
	JitterS        float64  `json:"jitter_s,omitempty"`
	JitterFraction float64  `json:"jitter_fraction,omitempty"`
	JitterAtCap    bool     `json:"jitter_at_cap,omitempty"`
	CapS           float64  `json:"cap_s,omitempty"`
	CapAtLeastS    float64  `json:"cap_at_least_s,omitempty"`
	FirstImmediate float64  `json:"first_immediate"`
	// Spec is the policy as devicesim run's -policy reads it; NoSpec says
	// why there is none.
	Spec     string  `json:"spec,omitempty"`
	NoSpec   string  `json:"no_spec,omitempty"`
	Devices  int     `json:"devices"`
	Retries  int     `json:"retries"`
	Margin   float64 `json:"margin_nats"`
	RunnerUp string  `json:"runner_up,omitempty"`
	KS       float64 `json:"ks"`
}

// Write writes which policy the fleet runs; nothing for a nil Policy.
func (p *Policy) Write(w io.Writer) {
	if p == nil {
		return
	}
	if len(p.Groups) < 2 {
		fmt.Fprintf(w, "the fleet's reconnect policy: %s\n", p.Fleet.describe())
	} else {
		fmt.Fprintf(w, "the fleet runs %d reconnect policies:\n", len(p.Groups))
		for _, g := range p.Groups {
			more := ""
			if g.Devices > len(g.IDs) {
				more = ", ..."
			}
			fmt.Fprintf(w, "  %d devices (%s%s): %s\n", g.Devices, strings.Join(g.IDs[:min(3, len(g.IDs))], ", "), more, g.Fit.describe())
		}
	}
	if p.Unsure > 0 {
		fmt.Fprintf(w, "  %d devices no group could place\n", p.Unsure)
	}
	if !p.Identified {
		fmt.Fprintln(w, "  (refused attempts named no device: -identify reads each one's whole sequence)")
	}
}

// describe says a fit in a line: the family and its parameters, how well
// it fits, and the spec to run it with.
func (f Fit) describe() string {
	if f.CannotTell != "" {
		s := "cannot tell: " + f.CannotTell
		if len(f.Candidates) > 0 {
			s += " (closest: " + strings.Join(f.Candidates, ", ") + ")"
		}
		return s
	}
	var parts []string
	if f.BaseS > 0 {
		parts = append(parts, fmt.Sprintf("base %s", secondsOf(f.BaseS)))
	}
	if f.Factor > 0 {
		parts = append(parts, fmt.Sprintf("x%.2g a retry", f.Factor))
	}
	if f.StepS > 0 {
		parts = append(parts, fmt.Sprintf("+%s a retry", secondsOf(f.StepS)))
	}
	if f.JitterS > 0 {
		parts = append(parts, fmt.Sprintf("jitter %s", secondsOf(f.JitterS)))
	}
	if f.JitterFraction > 0 {
		parts = append(parts, fmt.Sprintf("jitter +-%.0f %%", 100*f.JitterFraction))
	}
	switch {
	case f.CapS > 0:
		parts = append(parts, "cap "+secondsOf(f.CapS))
	case f.CapAtLeastS > 0:
		parts = append(parts, "cap not reached (waits up to "+secondsOf(f.CapAtLeastS)+" seen)")
	}
	if f.FirstImmediate >= 0.005 {
		parts = append(parts, fmt.Sprintf("first retry at once on %.0f %%", 100*f.FirstImmediate))
	}
	s := f.Family + ": " + strings.Join(parts, ", ")
	s += fmt.Sprintf("; fit over %d devices, %d waits: %.0f nats over %s, KS %.3f", f.Devices, f.Retries, f.Margin, f.RunnerUp, f.KS)
	if f.Spec != "" {
		s += "; devicesim's -policy " + f.Spec
	}
	return s
}

func secondsOf(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", 1000*s)
	}
	return fmt.Sprintf("%.3g s", s)
}

// Runnable is the fit a prediction runs: the fleet's, or its largest
// group's when it runs several; why, if none can run. A nil Policy has
// none.
func (p *Policy) Runnable() (Fit, string) {
	switch {
	case p == nil:
		return Fit{}, "no device's attempts were read"
	case len(p.Groups) > 1:
		fit := p.Groups[0].Fit
		if fit.Spec == "" {
			return fit, "the largest group's policy (" + fit.Family + ") has no spec devicesim runs: " + fit.NoSpec
		}
		return fit, ""
	case p.Fleet.CannotTell != "":
		return p.Fleet, "which policy the fleet runs cannot be told: " + p.Fleet.CannotTell
	case p.Fleet.Spec == "":
		return p.Fleet, "its policy (" + p.Fleet.Family + ") has no spec devicesim runs: " + p.Fleet.NoSpec
	}
	return p.Fleet, ""
}
