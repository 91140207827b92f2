// Package hostload measures how much of this machine a run of real agents
// can have now, and chooses the time scale that share serves.
//
// Real agents keep real timers. At a time scale the host cannot serve,
// their attempts leave late and their losses are noticed late, and the
// figures are the host's, not the fleet's. A run that leaves its scale to
// the host asks Share first, starts at Scale's answer, and runs again
// slower if its report still says the host bound it.
package hostload

import (
	"runtime"
	"sync"
	"time"
)

// Share spins one goroutine a core for d and returns the fraction of those
// cores' time the process got. That is about 1 on an idle host, and about
// 0.5 on two cores with one CPU-bound job beside it. It returns 1 where
// the process's CPU time cannot be read.
func Share(d time.Duration) float64 {
	n := runtime.GOMAXPROCS(0)
	before, ok := cpuTime()
	if !ok {
		return 1
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				for range 10_000 { // a little work between clock reads
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	after, _ := cpuTime()
	return min(1, float64(after-before)/(float64(wall)*float64(n)))
}

// DevicesAtFull is the most real agents a run starts at its full time
// scale. Beyond it the scale falls in proportion: the host's work grows
// with the fleet, and with the scale.
const DevicesAtFull = 2000

// margin is how far below a power of two a measured share may fall and
// still round up to it: Share reads a little under 1 on an idle host.
const margin = 1.15

// Scale is the time scale that a fleet of devices real agents starts at
// on a host that gives the run share of its cores. It is at most most,
// itself at least 1. It is most scaled by the share and by DevicesAtFull /
// devices, rounded down to a power of two, and never below 1.
func Scale(most float64, share float64, devices int) float64 {
	s := margin * most * min(1, share) * min(1, float64(DevicesAtFull)/float64(max(devices, 1)))
	scale := 1.0
	for scale*2 <= s {
		scale *= 2
	}
	return min(scale, most)
}

// Slower is the next time scale to try after a run at scale was bound by
// its host: half of it, and never below 1. It reports false when scale is
// already 1.
func Slower(scale float64) (float64, bool) {
	if scale <= 1 {
		return 1, false
	}
	return max(1, scale/2), true
}
