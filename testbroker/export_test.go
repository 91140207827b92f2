package testbroker

import "time"

// Hooks into the recorder's unexported write path for its benchmark.
func (r *Recorder) RecordAttemptForBench(now time.Time, id string) {
	seq := r.accept(now)
	r.connect(seq, now, id)
	r.decide(seq, Accepted, 0)
}
