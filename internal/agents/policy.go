package agents

import (
	"fmt"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// scaled is a shape run faster by a time scale: every wait divided by it.
type scaled struct {
	reconnect.Shape
	scale float64
}

func (s scaled) Delay(n int, prev time.Duration, u float64) time.Duration {
	// prev arrives scaled; the shape thinks in real time.
	real := s.Shape.Delay(n, time.Duration(float64(prev)*s.scale), u)
	return time.Duration(float64(real) / s.scale)
}

func (s scaled) String() string { return fmt.Sprintf("%v /%g", s.Shape, s.scale) }
