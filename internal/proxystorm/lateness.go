package proxystorm

import (
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// latenessTick is how often the proxy's own clock is sampled.
const latenessTick = 10 * time.Millisecond

// lateness samples how late this process's timers fire while the storm
// runs. The proxies stamp each connection when its goroutine gets to it: a
// host too busy to run a timer on time stamps arrivals as late, and blurs
// bursts as narrow. A storm that ran so late is the host's, not the
// fleet's (report.HostBoundLate).
type lateness struct {
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	late []float64 // seconds, one a tick
}

func startLateness() *lateness {
	l := &lateness{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTimer(latenessTick)
		defer t.Stop()
		for {
			due := time.Now().Add(latenessTick)
			t.Reset(latenessTick)
			select {
			case <-l.stop:
				return
			case now := <-t.C:
				l.mu.Lock()
				l.late = append(l.late, max(0, now.Sub(due)).Seconds())
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// end stops the sampling and returns the p50 and p99 lateness, seconds.
func (l *lateness) end() (p50, p99 float64) {
	close(l.stop)
	<-l.done
	if len(l.late) == 0 {
		return 0, 0
	}
	p := stormstats.Percentiles(l.late, 50, 99)
	return p[0], p[1]
}
