package testbroker

import (
	"time"

	"github.com/herdguard/herdguard/fault"
)

// Hooks into the recorder's unexported write path for its benchmark.
func (r *Recorder) RecordAttemptForBench(now time.Time, id string) {
	seq := r.accept(now)
	r.connect(seq, now, id, 4)
	r.decide(seq, fault.Accepted, 0)
}
