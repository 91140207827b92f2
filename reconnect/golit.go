package reconnect

import (
	"fmt"
	"time"
)

// Each shape renders itself as the Go that builds it (fmt's %#v), for a
// caller that writes a firmware's configuration as source, as devicesim
// plan does. A new shape adds its own; TestEveryShapeWritesItsGo fails
// until it does.

func (s IoTCore) GoString() string {
	extra := ""
	if s.JitterAtCap {
		extra = ", JitterAtCap: true"
	}
	return fmt.Sprintf("reconnect.IoTCore{Base: %s, Jitter: %s, MaxBackoff: %s%s}", goDuration(s.Base), goDuration(s.Jitter),
		goDuration(s.MaxBackoff), extra)
}

func (s Exponential) GoString() string {
	return fmt.Sprintf("reconnect.Exponential{Base: %s, Multiplier: %g, Max: %s}", goDuration(s.Base), s.Multiplier, goDuration(s.Max))
}

func (s FullJitter) GoString() string {
	return fmt.Sprintf("reconnect.FullJitter{Base: %s, Max: %s}", goDuration(s.Base), goDuration(s.Max))
}

func (s EqualJitter) GoString() string {
	return fmt.Sprintf("reconnect.EqualJitter{Base: %s, Max: %s}", goDuration(s.Base), goDuration(s.Max))
}

func (s Decorrelated) GoString() string {
	return fmt.Sprintf("reconnect.Decorrelated{Base: %s, Max: %s}", goDuration(s.Base), goDuration(s.Max))
}

func (s FleetSafe) GoString() string {
	return fmt.Sprintf("reconnect.FleetSafe{Base: %s, Max: %s}", goDuration(s.Base), goDuration(s.Max))
}

func (s Linear) GoString() string {
	return fmt.Sprintf("reconnect.Linear{Initial: %s, Step: %s, Max: %s}", goDuration(s.Initial), goDuration(s.Step), goDuration(s.Max))
}

func (s Constant) GoString() string {
	return fmt.Sprintf("reconnect.Constant{Interval: %s}", goDuration(s.Interval))
}

// goDuration writes d as a Go expression in its largest whole unit:
// 2 * time.Minute, time.Second, 1500 * time.Millisecond, 3 * time.Microsecond.
func goDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"},
		{time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"}} {
		switch {
		case d == u.d:
			return u.name
		case d != 0 && d%u.d == 0:
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d", int64(d))
}

// GoString writes the configuration as the Go that builds it; a Clock is
// left out (the source cannot name one), as if nil.
func (c FloodGuardConfig) GoString() string {
	return fmt.Sprintf("reconnect.FloodGuardConfig{Requests: %d, Window: %s, Burst: %d}", c.Requests, goDuration(c.Window), c.Burst)
}
