package storm

import (
	"fmt"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/plan"
)

// duration is a key the file writes a duration under, and its bound.
type duration struct {
	key   string
	d     time.Duration
	limit time.Duration
}

// checkDurations holds every duration the file writes to its bound (plan's
// MaxWait, MaxDisruption and MaxSpan; MQTT's for a keepalive), naming the
// first key over it.
func (f *File) checkDurations() error {
	keys := []duration{{"expect.recovery_p99", f.Expect.RecoveryP99, plan.MaxSpan}}
	if x := f.Brokers.External; x != nil {
		keys = append(keys, duration{"brokers.external.ready_wait", x.ReadyWait, plan.MaxSpan})
	}
	if f.Question != nil {
		keys = append(keys, duration{"plan.target_p99", f.Question.TargetP99, plan.MaxSpan})
	}
	for i, g := range f.Fleet {
		at := fmt.Sprintf("fleet[%d].", i)
		keys = append(keys, duration{at + "max_backoff", orZero(g.MaxBackoff), plan.MaxWait},
			duration{at + "boot_spread", g.BootSpread, plan.MaxWait},
			duration{at + "keepalive", orZero(g.KeepAlive), device.MaxKeepAlive},
			duration{at + "ping_timeout", orZero(g.PingTimeout), plan.MaxWait},
			duration{at + "retry_after_jitter", g.RetryAfterJitter, plan.MaxWait},
			duration{at + "expect.recovery_p99", g.Expect.RecoveryP99, plan.MaxSpan})
	}
	for k, e := range f.Timeline {
		at := fmt.Sprintf("timeline[%d].", k)
		keys = append(keys, duration{at + "at", e.At, plan.MaxSpan},
			duration{at + "outage", orZero(e.Outage), plan.MaxDisruption},
			duration{at + "flap", orZero(e.Flap), plan.MaxDisruption},
			duration{at + "latency", orZero(e.Latency), plan.MaxDisruption},
			duration{at + "latency_jitter", orZero(e.LatencyJitter), plan.MaxDisruption},
			duration{at + "gap", e.Gap, plan.MaxDisruption},
			duration{at + "retry_after", e.RetryAfter, plan.MaxWait},
			duration{at + "duration", e.Duration, plan.MaxSpan},
			duration{at + "watch", e.Watch, plan.MaxSpan})
	}
	for _, k := range keys {
		if err := plan.CheckDuration(k.key, k.d, k.limit); err != nil {
			return err
		}
	}
	return nil
}

func orZero(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return *d
}
