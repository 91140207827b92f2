package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// shapes are the policies a run can name, each with base 1 s and the given cap.
var shapes = map[string]func(maxBackoff time.Duration) reconnect.Shape{
	"iotcore": func(m time.Duration) reconnect.Shape {
		return reconnect.IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: m}
	},
	"iotcore-jitter-at-cap": func(m time.Duration) reconnect.Shape {
		return reconnect.IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: m, JitterAtCap: true}
	},
	"exponential": func(m time.Duration) reconnect.Shape {
		return reconnect.Exponential{Base: time.Second, Multiplier: 2, Max: m}
	},
	"full":         func(m time.Duration) reconnect.Shape { return reconnect.FullJitter{Base: time.Second, Max: m} },
	"equal":        func(m time.Duration) reconnect.Shape { return reconnect.EqualJitter{Base: time.Second, Max: m} },
	"decorrelated": func(m time.Duration) reconnect.Shape { return reconnect.Decorrelated{Base: time.Second, Max: m} },
	"fleet-safe":   func(m time.Duration) reconnect.Shape { return reconnect.FleetSafe{Base: time.Second, Max: m} },
	"linear": func(m time.Duration) reconnect.Shape {
		return reconnect.Linear{Initial: time.Second, Step: time.Second, Max: m}
	},
	"constant": func(m time.Duration) reconnect.Shape { return reconnect.Constant{Interval: m} },
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

// Shape returns the named policy's shape with the given cap, in real time.
func Shape(name string, maxBackoff time.Duration) (reconnect.Shape, error) {
	f, ok := shapes[name]
	if name == PahoDefault {
		return nil, fmt.Errorf("%s is paho's own reconnect, not a reconnect.Shape", name)
	}
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (one of %v)", name, PolicyNames())
	}
	if maxBackoff < time.Second {
		return nil, fmt.Errorf("max backoff %v is below the 1 s base", maxBackoff)
	}
	return f(maxBackoff), nil
}
