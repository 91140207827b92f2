package planner

import (
	"fmt"
	"time"
)

// Families are the policy families the search tries, each with the
// parameters it takes besides its cap.
var families = []string{"iotcore", "iotcore-jitter-at-cap", "full", "equal", "decorrelated", "fleet-safe"}

// guarded are the families the search also runs with a flood guard of
// GuardedRate attempts a minute.
var guarded = []string{"full", "fleet-safe"}

// GuardedRate is the flood guard the search tries beside the firmware's.
const GuardedRate = 4

// unjittered are the families without jitter: screened once, at a 32 s
// cap, so the answer can say why none of them will do.
var unjittered = []string{"exponential", "linear", "constant"}

// SearchSpace is the default search. Every family runs at caps from 16 s,
// doubling, to the longer of 256 s and the admission's own time for the
// fleet. The caps stop at 15 min, the most a remote configuration may set.
// The mission's formula also runs with a base of 4 s and a jitter of 4 or
// 10 s, within a remote configuration's bounds. Full jitter and fleet-safe
// also run with a flood guard of GuardedRate attempts a minute, where the
// firmware's allows 10: fewer attempts, at the cost of the slots a device
// then waits for.
func SearchSpace(q Question) []Candidate {
	q = q.withDefaults()
	top := min(max(256*time.Second, q.ideal()), 15*time.Minute)
	var caps []time.Duration
	for c := 16 * time.Second; c <= top; c *= 2 {
		caps = append(caps, c)
	}
	var out []Candidate
	for _, c := range caps {
		for _, f := range families {
			out = append(out, Candidate{Policy: f, MaxBackoff: c})
		}
		for _, f := range guarded {
			out = append(out, Candidate{Policy: fmt.Sprintf("%s:guard=%d", f, GuardedRate), MaxBackoff: c})
		}
		for _, base := range []time.Duration{time.Second, 4 * time.Second} {
			for _, jitter := range []time.Duration{time.Second, 4 * time.Second, 10 * time.Second} {
				if base == time.Second && jitter == time.Second {
					continue // the family's own, above
				}
				if base > c {
					continue
				}
				out = append(out, Candidate{Policy: fmt.Sprintf("iotcore:base=%v,jitter=%v", base, jitter), MaxBackoff: c})
			}
		}
	}
	for _, f := range unjittered {
		out = append(out, Candidate{Policy: f, MaxBackoff: 32 * time.Second})
	}
	return out
}
