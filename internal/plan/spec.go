package plan

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// Policy is a policy spec read: a family from PolicyNames, and the base
// and jitter it takes where they are not the family's 1 s. A spec is the
// family's name alone ("full"), or with its parameters
// ("iotcore:base=2s,jitter=4s"); jitter is the mission's formula's alone.
type Policy struct {
	Family       string
	Base, Jitter time.Duration // 0: 1 s
	// Guard is the connect attempts a minute the device's flood guard
	// allows ("full:guard=4"); 0 keeps the firmware's (device.DefaultTiming).
	Guard int
}

// maxGuard is the most attempts a minute a guard spec may allow: one a
// second more than any policy here makes.
const maxGuard = 600

// ParsePolicy reads a policy spec.
func ParsePolicy(spec string) (Policy, error) {
	name, params, _ := strings.Cut(spec, ":")
	p := Policy{Family: name}
	if _, ok := shapes[name]; !ok && name != PahoDefault {
		return p, fmt.Errorf("unknown policy %q (one of %v)", name, PolicyNames())
	}
	if params == "" {
		return p, nil
	}
	if name == PahoDefault {
		return p, fmt.Errorf("%s takes no parameters", name)
	}
	for _, kv := range strings.Split(params, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k == "guard" {
			n, err := strconv.Atoi(v)
			switch {
			case err != nil || n < 1 || n > maxGuard:
				return p, fmt.Errorf("policy %q: guard is the connect attempts a minute the flood guard allows, 1 to %d, got %q",
					spec, maxGuard, v)
			case p.Guard != 0:
				return p, fmt.Errorf("policy %q: guard is given twice", spec)
			}
			p.Guard = n
			continue
		}
		d, err := time.ParseDuration(v)
		switch {
		case !ok || err != nil:
			return p, fmt.Errorf("policy %q: %q is not key=duration", spec, kv)
		case d < time.Millisecond:
			return p, fmt.Errorf("policy %q: %s %v is below 1 ms", spec, k, d)
		case k == "base" && p.Base == 0:
			p.Base = d
		case k == "jitter" && p.Jitter == 0 && strings.HasPrefix(name, "iotcore"):
			p.Jitter = d
		case k == "jitter" && p.Jitter == 0:
			return p, fmt.Errorf("policy %q: only the iotcore formulas take a jitter", spec)
		default:
			return p, fmt.Errorf("policy %q: %q is not base, jitter or guard, or is given twice", spec, k)
		}
	}
	if name == "constant" && p.Base != 0 {
		return p, fmt.Errorf("policy %q: constant waits its cap and takes no base", spec)
	}
	return p, nil
}

// shape is p's reconnect.Shape with the given cap.
func (p Policy) shape(maxBackoff time.Duration) (reconnect.Shape, error) {
	base, jitter := cmp.Or(p.Base, time.Second), cmp.Or(p.Jitter, time.Second)
	if maxBackoff < base {
		return nil, fmt.Errorf("max backoff %v is below the %v base", maxBackoff, base)
	}
	s := shapes[p.Family](base, jitter, maxBackoff)
	return s, s.Validate()
}
