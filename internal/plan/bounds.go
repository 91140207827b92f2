package plan

import (
	"fmt"
	"time"

	"github.com/herdguard/herdguard/device"
)

// The longest a duration a plan is read with may be: a storm file's keys
// and devicesim's flags are refused beyond them, by name (CheckDuration).
// Unbounded, a run's sums wrap round time.Duration's 292 years (the
// recovery bound is an outage plus twenty caps: a 2,000,000 h cap makes it
// negative), and the model works through an outage at about one attempt a
// device a cap, for as long as the outage lasts. Each bound is far beyond
// any storm worth running, and keeps those sums within months.
const (
	// MaxWait bounds what a device waits for: its policy's cap, its boot
	// window, its ping timeout, a Retry-After and the jitter on it. A
	// device that waits a day between attempts has given up: a retry cap
	// says so plainly.
	MaxWait = 24 * time.Hour
	// MaxDisruption bounds a disruption and its parts: the outage, a
	// flap, added latency and its jitter, a rolling restart's gap. A
	// day-long outage at the default 32 s cap is 2,700 attempts a device.
	MaxDisruption = 24 * time.Hour
	// MaxSpan bounds what a run watches: when a disruption strikes on the
	// timeline, how long the run waits for recovery or for a disruption
	// to observe, a shard's wait for the others, and a recovery the
	// expectations or the planner ask for.
	MaxSpan = 7 * 24 * time.Hour
)

// CheckDuration is an error naming setting (a storm file's key, a flag)
// when d is over its limit, one of the bounds above; nil otherwise.
func CheckDuration(setting string, d, limit time.Duration) error {
	if d <= limit {
		return nil
	}
	return fmt.Errorf("%s %v: at most %v", setting, d, limit)
}

// FlagLimits is the most each of devicesim's duration flags may be, in
// every command that has it: the bounds above, which a storm file's keys
// have too (MQTT's for a keepalive).
var FlagLimits = map[string]time.Duration{
	"max-backoff": MaxWait, "boot-spread": MaxWait, "ping-timeout": MaxWait, "retry-after": MaxWait,
	"retry-after-jitter": MaxWait, "keepalive": device.MaxKeepAlive,
	"outage": MaxDisruption, "flap": MaxDisruption, "latency": MaxDisruption,
	"latency-jitter": MaxDisruption, "gap": MaxDisruption,
	"duration": MaxSpan, "ready-wait": MaxSpan, "target-p99": MaxSpan, "await": MaxSpan,
	"watch": MaxSpan, "linger": MaxSpan,
}
