package member

import (
	"fmt"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// Scaled is a shape run faster by a time scale: every wait divided by
// Scale (>= 1). Like the shape it wraps, it is read-only and safe to share.
type Scaled struct {
	reconnect.Shape
	Scale float64
}

func (s Scaled) Delay(n int, prev time.Duration, u float64) time.Duration {
	// prev arrives scaled; the shape thinks in real time.
	real := s.Shape.Delay(n, time.Duration(float64(prev)*s.Scale), u)
	return time.Duration(float64(real) / s.Scale)
}

func (s Scaled) String() string { return fmt.Sprintf("%v /%g", s.Shape, s.Scale) }
