package policyfit

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
)

// Family is a reconnect policy's shape as a proxy sees it. Where the
// simulator has the family, the name is internal/plan's policy name.
type Family string

const (
	// NoBackoff retries at once: a Constant whose fastest devices' gaps are
	// under 250 ms, the refused attempt's own round trip.
	NoBackoff Family = "no-backoff"
	Constant  Family = "constant" // the same wait every time (MQTT.js 5: 1 s)
	Linear    Family = "linear"   // Base + n x Step, up to Cap
	// Exponential waits min(Cap, Base x Factor^n), unjittered: paho's
	// reconnects in Go and in Python, a fleet in lock step.
	Exponential Family = "exponential"
	// Proportional waits min(Cap, Base x Factor^n) x (1 + U[-r, r)) with r
	// (JitterFraction) at most 0.25 (1/3 is EqualJitter): gRPC's (x1.6,
	// +-20 %), the HiveMQ client's (x2, +-25 %).
	Proportional Family = "proportional"
	FullJitter   Family = "full"         // U[0, min(Cap, Base x 2^n))
	EqualJitter  Family = "equal"        // v/2 + U[0, v/2) with v = min(Cap, Base x 2^n)
	Decorrelated Family = "decorrelated" // min(Cap, U[Base, 3 x prev))
	// IoTCore waits min(Base x 2^n + U[0, Jitter), Cap), or with
	// JitterAtCap min(Base x 2^n, Cap) + U[0, Jitter) (reconnect.IoTCore).
	IoTCore   Family = "iotcore"
	FleetSafe Family = "fleet-safe" // U[hi/2, hi) with hi = min(Cap, 3 x prev) (reconnect.FleetSafe)
)

// families lists every family Infer tells apart, simplest first.
var families = []Family{NoBackoff, Constant, Linear, Exponential, Proportional, FullJitter, EqualJitter,
	Decorrelated, IoTCore, FleetSafe}

// The reasons a Fit names no family. Fit.Err wraps one of them with the
// figures that decided it; match them with errors.Is.
var (
	ErrTooFewDevices = errors.New("policyfit: too few devices") // fewer than Options.MinDevices
	// ErrTooFewRetries: fewer than Options.MinDevices devices retried
	// before they were admitted.
	ErrTooFewRetries = errors.New("policyfit: too few retries")
	// ErrAmbiguous: another family explains the attempts within
	// Options.Margin of the best (Fit.Candidates names them), or as well
	// with more parameters.
	ErrAmbiguous = errors.New("policyfit: the attempts do not separate the families")
	// ErrNoFamilyFits: the best family's fit is rejected (Fit.KS).
	ErrNoFamilyFits = errors.New("policyfit: no family fits the attempts")
	// ErrMixed: more than one policy; Inference.Groups names each.
	ErrMixed = errors.New("policyfit: the fleet runs more than one policy")
	// ErrInvalid: an Options field out of range, Infer's only error.
	ErrInvalid = errors.New("policyfit: invalid option")
)

// Device is one device's attempts as the proxy took them, in any order,
// at T since the disruption. Its sequence ends with its first admitted
// one (Outcome fault.Accepted: passed on to the broker); later ones are
// another storm's. ID is whatever tells devices apart: the client ID of
// its CONNECT, or its source address where each device has its own. A
// Device with an empty ID holds attempts whose device is not known (a TLS
// CONNECT the proxy cannot read): Infer counts them and uses none. It is
// a plain value that Infer only reads.
type Device struct {
	ID       string
	Attempts []attempt.Record
}

// Options tune Infer; every 0 is the default named beside it, so the zero
// Options is ready to use. A plain value.
type Options struct {
	// Return is when the broker admitted again, if known: an attempt from
	// then on ends its device's sequence. 0: the attempts' outcomes alone say.
	Return time.Duration
	// NoticeWindow bounds how long a device takes to notice the loss and
	// reach the proxy (its notice plus one-way latency). 0: 300 ms.
	NoticeWindow time.Duration
	// MinDevices is the fewest devices a group needs for a family to be
	// named, and the fewest that may split off as a group. 0: 10.
	MinDevices int
	// Margin is the least BIC-penalised log-likelihood ratio, in nats, by
	// which the named family beats every other. 0: 10 (odds of 22,000:1).
	Margin float64
}

// Inference is what Infer says of a fleet: a Fit for the whole and one a
// group of devices that run the same policy. It is a plain value that
// Infer does not keep; its zero value says nothing.
type Inference struct {
	// Fleet is the whole fleet's fit: Groups[0]'s when there is one group,
	// and an ErrMixed when there are more.
	Fleet Fit
	// Groups are the devices that made an attempt, largest first (then by
	// the first device's ID), but for
	// Unsure: devices that a split of the fleet could not place (neither
	// side's policy 99 times likelier), and devices whose own attempts
	// their group's named family does not explain (at 0.1 %: a policy on
	// too few devices to split off). They are members of no group.
	Groups []Group
	Unsure []string
	// Devices counts the devices with at least one attempt since the
	// disruption; Unattributed the attempts of Devices with no ID, which
	// no fit uses: Infer does not read a policy from anonymous arrivals.
	Devices, Unattributed int
}

// Group is devices that run one policy, and its Fit; a plain value.
type Group struct {
	IDs []string
	Fit Fit
}

// Fit is a family with its parameters, or why none is named. When Err is
// not nil, Family is empty and the parameters are zero. A plain value.
type Fit struct {
	Family Family
	// Err is nil for a named family; otherwise it wraps ErrTooFewDevices,
	// ErrTooFewRetries, ErrAmbiguous, ErrNoFamilyFits or ErrMixed.
	Err error
	// Candidates, with ErrAmbiguous or ErrNoFamilyFits, are the families
	// closest to the attempts, best first.
	Candidates []Family
	Params     // the family's parameters, as the fit read them

	// Spec is the policy as internal/plan.ParsePolicy reads it, to run
	// with Cap (or a cap of your choice when the storm did not reach it)
	// on the simulator; empty when it has none, and NoSpec says why.
	Spec, NoSpec string

	Devices, Retries int // how many devices and waits the fit read
	// Margin is the BIC-penalised log-likelihood ratio, in nats, over the
	// closest other family (RunnerUp).
	Margin   float64
	RunnerUp Family
	// KS is the Kolmogorov-Smirnov distance between the waits' probability
	// integral transforms under the fit and the uniform: 0 is a perfect
	// fit. KSP is its p-value, as if the parameters were known. A fit is
	// rejected on what is left of KS when each wait may move within its
	// noise (see the package doc).
	KS, KSP float64
	Noise   time.Duration // the fitted spread of an arrival's time about its wait
}

// Params are a family's parameters; each family reads those it has.
type Params struct {
	// Base is the first wait's scale: the interval (Constant, NoBackoff),
	// the first wait (Linear, Exponential, Proportional), the exponential's
	// start (FullJitter, EqualJitter, IoTCore) or the floor (Decorrelated,
	// FleetSafe). A Constant's, Linear's or NoBackoff's carries the refused
	// attempt's round trip, which the proxy cannot tell from the wait.
	Base time.Duration
	// Factor is the growth a retry (Exponential, Proportional; 2 for the
	// jittered exponentials, by their definition).
	Factor         float64
	Step           time.Duration // Linear's growth a retry
	Jitter         time.Duration // IoTCore's jitter width
	JitterFraction float64       // Proportional's r
	// JitterAtCap is IoTCore's variant that adds its jitter above the cap;
	// it is told only when the storm reached the cap.
	JitterAtCap bool
	// Cap is the longest wait, when the storm reached it; 0 when it did
	// not. CapAtLeast is then the longest wait seen: a lower bound.
	Cap, CapAtLeast time.Duration
	FirstImmediate  float64 // the share of devices whose first attempt came at once
}

// settings are Options with the defaults filled in, times in seconds.
type settings struct {
	ret, notice, margin float64
	minDevices          int
	// fitted is every family's fit to a set of devices so far
	// (fitFamily): a split fits the same sides again as its rounds settle.
	fitted map[string]*fitted
}

func (o Options) settings() (settings, error) {
	if o.Return < 0 || o.NoticeWindow < 0 || o.MinDevices < 0 || !(o.Margin >= 0) {
		return settings{}, fmt.Errorf("%w: %+v: every field must be >= 0", ErrInvalid, o)
	}
	or := func(v, def float64) float64 {
		if v > 0 {
			return v
		}
		return def
	}
	return settings{ret: o.Return.Seconds(), notice: or(o.NoticeWindow.Seconds(), 0.3), margin: or(o.Margin, 10),
		minDevices: int(or(float64(o.MinDevices), 10))}, nil
}

// Infer says which reconnect policy the devices run, from their attempts
// after one disruption: for the whole fleet and for each group of devices
// that run the same one. Its only error is an invalid Options
// (ErrInvalid); what the attempts cannot tell is each Fit's Err. It only
// reads devices, and is safe to call from several goroutines at once.
func Infer(devices []Device, o Options) (Inference, error) {
	s, err := o.settings()
	if err != nil {
		return Inference{}, err
	}
	seqs, unattributed := prepare(devices, s)
	s.fitted = map[string]*fitted{}
	r := Inference{Devices: len(seqs), Unattributed: unattributed}
	groups, unsure := partition(seqs, &s)
	for _, q := range unsure {
		r.Unsure = append(r.Unsure, q.id)
	}
	for _, g := range groups {
		fit, ids := g.fit(), []string(nil)
		for _, q := range g.members {
			if g.an.odd[q] {
				r.Unsure = append(r.Unsure, q.id)
			} else {
				ids = append(ids, q.id)
			}
		}
		r.Groups = append(r.Groups, Group{IDs: ids, Fit: fit})
	}
	switch len(r.Groups) {
	case 0:
		r.Fleet = Fit{Err: fmt.Errorf("%w: no device made an attempt", ErrTooFewDevices)}
	case 1:
		r.Fleet = r.Groups[0].Fit
	default:
		r.Fleet = Fit{Devices: len(seqs), Err: fmt.Errorf("%w: %d groups", ErrMixed, len(r.Groups))}
	}
	return r, nil
}

// maxAttempts is how many of a device's attempts a fit reads: enough for
// any cap a storm shows, and a no-backoff device's thousands cost no more.
const maxAttempts = 32

// seq is one device's attempts as a fit reads them, in seconds: its first
// arrival since the disruption and the gaps between arrivals.
type seq struct {
	id    string
	n     int // its index among the fleet's
	first float64
	gaps  []float64
}

// prepare turns devices into sequences, each cut at its first admitted
// attempt, and counts the attempts of devices with no ID.
func prepare(devices []Device, s settings) (seqs []*seq, unattributed int) {
	var ts []time.Duration
	for _, d := range devices {
		if d.ID == "" {
			unattributed += len(d.Attempts)
			continue
		}
		ts = ts[:0]
		end := time.Duration(-1)
		for _, a := range d.Attempts {
			if a.T < 0 {
				continue // before the disruption: another story
			}
			ts = append(ts, a.T)
			if (a.Outcome == fault.Accepted || s.ret > 0 && a.T.Seconds() >= s.ret) && (end < 0 || a.T < end) {
				end = a.T
			}
		}
		slices.Sort(ts)
		if end >= 0 {
			ts = ts[:slices.Index(ts, end)+1]
		}
		if len(ts) == 0 {
			continue
		}
		ts = ts[:min(len(ts), maxAttempts)]
		q := &seq{id: d.ID, n: len(seqs), first: ts[0].Seconds(), gaps: make([]float64, len(ts)-1)}
		for i := range q.gaps {
			q.gaps[i] = (ts[i+1] - ts[i]).Seconds()
		}
		seqs = append(seqs, q)
	}
	return seqs, unattributed
}
