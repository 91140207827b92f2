package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/reconnect"
)

// shapes are the policy families a run can name, each built from its
// base (b), the mission's formula's jitter (j) and its cap (m).
var shapes = map[string]func(b, j, m time.Duration) reconnect.Shape{
	"iotcore": func(b, j, m time.Duration) reconnect.Shape {
		return reconnect.IoTCore{Base: b, Jitter: j, MaxBackoff: m}
	},
	"iotcore-jitter-at-cap": func(b, j, m time.Duration) reconnect.Shape {
		return reconnect.IoTCore{Base: b, Jitter: j, MaxBackoff: m, JitterAtCap: true}
	},
	"exponential": func(b, _, m time.Duration) reconnect.Shape {
		return reconnect.Exponential{Base: b, Multiplier: 2, Max: m}
	},
	"full":         func(b, _, m time.Duration) reconnect.Shape { return reconnect.FullJitter{Base: b, Max: m} },
	"equal":        func(b, _, m time.Duration) reconnect.Shape { return reconnect.EqualJitter{Base: b, Max: m} },
	"decorrelated": func(b, _, m time.Duration) reconnect.Shape { return reconnect.Decorrelated{Base: b, Max: m} },
	"fleet-safe":   func(b, _, m time.Duration) reconnect.Shape { return reconnect.FleetSafe{Base: b, Max: m} },
	"linear":       func(b, _, m time.Duration) reconnect.Shape { return reconnect.Linear{Initial: b, Step: b, Max: m} },
	"constant":     func(_, _, m time.Duration) reconnect.Shape { return reconnect.Constant{Interval: m} },
}

// PolicyNames lists the policies a run can name.
func PolicyNames() []string {
	names := []string{PahoDefault}
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Guard is the flood guard a policy spec names ("full:guard=4"), with the
// firmware's window and burst; nil where it names none (the firmware's
// own, device.DefaultTiming) or is no spec.
func Guard(spec string) *reconnect.FloodGuardConfig {
	p, err := ParsePolicy(spec)
	if err != nil || p.Guard == 0 {
		return nil
	}
	g := *device.DefaultTiming().Guard
	g.Requests = p.Guard
	return &g
}

// Shape returns the policy spec's shape (see ParsePolicy) with the given
// cap, in real time.
func Shape(spec string, maxBackoff time.Duration) (reconnect.Shape, error) {
	p, err := ParsePolicy(spec)
	if err != nil {
		return nil, err
	}
	if p.Family == PahoDefault {
		return nil, fmt.Errorf("%s is paho's own reconnect, not a reconnect.Shape", spec)
	}
	return p.shape(maxBackoff)
}
