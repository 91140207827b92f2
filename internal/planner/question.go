// Package planner answers the question every fleet's owner brings. N
// devices are behind a broker that admits R connects a second, and the
// broker is out for T. Which reconnect policy brings the fleet back within
// the target, without the broker seeing more than it can take?
//
// It searches policy families and their parameters on the virtual engine.
// It screens them on a fleet scaled down with its broker: devices and
// admission shrink by the same factor, so the recovery keeps its shape in
// time. It screens over several seeds and outage lengths, then runs the
// best few at full scale. An Answer holds the recommendation with each
// figure's spread, and the frontier of recovery against the broker's peak.
// It says why each other policy was rejected. For a fleet in the field it
// says how much of it must move.
package planner

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// ErrInvalid is wrapped by the error of a Question that cannot be asked.
var ErrInvalid = errors.New("planner: invalid question")

// ErrNoPolicy is wrapped by the error of a Question no searched policy
// answers; the Answer beside it says which came closest.
var ErrNoPolicy = errors.New("planner: no policy meets the question's bounds")

// Question is a fleet, its broker and what the owner asks of a recovery.
// The zero Question is invalid: Devices and AdmitRate are required.
type Question struct {
	Devices   int
	AdmitRate float64 // connects a second the broker admits, all nodes together
	// AdmitBurst is the admission's burst (0: AdmitRate/20, at least 1).
	AdmitBurst int
	AdmitMode  fault.AdmissionMode
	Nodes      int           // the broker's nodes (0 or 1: one)
	Outage     time.Duration // the outage to plan for (0: 60 s)
	// TargetP99 is the recovery the owner needs: 99 % of the fleet back
	// within it of the broker's return. Zero is twice the admission's own
	// time, Devices/AdmitRate, and at least 60 s.
	TargetP99 time.Duration
	// PeakBound is the most connects the broker may see in its busiest
	// second, refused ones included (0: no bound).
	PeakBound float64
	// MaxAttempts is the most connect attempts a device may make, on
	// average, from the broker's return (0: no bound).
	MaxAttempts float64
	// MQTT5 makes the devices speak MQTT 5 and honour the broker's reason
	// codes.
	MQTT5 bool
	// Current, if set, is what the fleet runs today: a policy spec, and the
	// share of the fleet that runs it (the rest runs the recommendation).
	Current      string
	CurrentShare float64
	// Seeds is how many seeds each candidate runs on (0: 3).
	Seeds uint64
	// Seed is the first seed (0: 1).
	Seed uint64
}

// withDefaults is q with every zero that has a default filled in.
func (q Question) withDefaults() Question {
	if q.AdmitBurst == 0 {
		q.AdmitBurst = max(1, int(q.AdmitRate/20))
	}
	if q.Nodes == 0 {
		q.Nodes = 1
	}
	if q.Outage == 0 {
		q.Outage = time.Minute
	}
	if q.TargetP99 == 0 {
		q.TargetP99 = max(time.Minute, q.ideal()*2).Round(time.Second)
	}
	if q.Seeds == 0 {
		q.Seeds = 3
	}
	if q.Seed == 0 {
		q.Seed = 1
	}
	if q.Current != "" && q.CurrentShare == 0 {
		q.CurrentShare = 1
	}
	return q
}

// ideal is the admission's own time for the fleet: Devices / AdmitRate.
func (q Question) ideal() time.Duration {
	return time.Duration(float64(q.Devices) / q.AdmitRate * float64(time.Second))
}

// Validate reports the first thing wrong with q.
func (q Question) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
	}
	switch {
	case q.Devices < 1:
		return bad("devices must be at least 1, got %d", q.Devices)
	case !(q.AdmitRate > 0) || math.IsInf(q.AdmitRate, 0):
		return bad("the broker's admission rate must be > 0 connects/s, got %g", q.AdmitRate)
	case q.AdmitBurst < 0 || q.Nodes < 0 || q.Outage < 0 || q.TargetP99 < 0:
		return bad("burst, nodes, outage and target must be >= 0")
	case q.PeakBound < 0 || q.MaxAttempts < 0 || math.IsNaN(q.PeakBound) || math.IsNaN(q.MaxAttempts):
		return bad("the peak bound and max attempts must be >= 0")
	case q.MaxAttempts > 0 && q.MaxAttempts < 1:
		return bad("max attempts %g is below 1: every device makes at least the attempt that connects", q.MaxAttempts)
	case q.CurrentShare < 0 || q.CurrentShare > 1:
		return bad("the current policy's share must be within 0 and 1, got %g", q.CurrentShare)
	case q.CurrentShare > 0 && q.Current == "":
		return bad("a share of the fleet needs the policy it runs")
	}
	if i := strings.LastIndexByte(q.Current, '@'); i >= 0 {
		if _, _, ok := splitCap(q.Current); !ok {
			return bad("the current policy %q: its cap after @ must be a duration within (0, %v]", q.Current, plan.MaxWait)
		}
	}
	return nil
}
