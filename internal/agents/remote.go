package agents

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// A run through the fault proxy whose agents do not fit beside it (three
// or four descriptors a device) runs them in child processes, as a large
// TCP fleet does, leaving this process the proxy's two descriptors a device
// (and the in-process broker's one). Its measurement needs the devices'
// word as it happens (who is connected, who noticed a silent path), so each
// child tells every event of its device log to this one on a pipe, and the
// run follows them into its own log as if the agents were here.

// follow reads a child's event lines (written by its device log's stream)
// into l until the child closes them, and tells m, if set, as the agents
// would have. Attempt indexes are the child's; l numbers them its own way.
func (l *deviceLog) follow(rd io.Reader, m plan.LiveMetrics) error {
	sc := bufio.NewScanner(rd)
	var ours []int // the child's attempt i is our ours[i]
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		n := make([]int64, len(f))
		for k := 1; k < len(f) && k < 4; k++ {
			v, err := strconv.ParseInt(f[k], 10, 64)
			if err != nil {
				return fmt.Errorf("child event %q: %w", sc.Text(), err)
			}
			n[k] = v
		}
		switch {
		case len(f) == 5 && f[0] == "b" && int(n[1]) == len(ours):
			ours = append(ours, l.begin(time.Unix(0, n[2]), f[4], time.Duration(n[3])))
		case len(f) == 5 && f[0] == "e" && n[1] >= -1 && n[1] < int64(len(ours)) && n[2] >= 0 && int(n[2]) < len(l.connected):
			code, err := strconv.Atoi(f[4])
			if err != nil {
				return fmt.Errorf("child event %q: %w", sc.Text(), err)
			}
			i, dev, o := -1, int(n[2]), fault.Outcome(n[3])
			if n[1] >= 0 {
				i = ours[n[1]]
			}
			l.end(i, dev, o, code)
			if m != nil {
				tellMetrics(m.Device(dev), o)
			}
		case len(f) == 3 && f[0] == "l" && n[2] >= 0 && int(n[2]) < len(l.connected):
			l.lost(time.Unix(0, n[1]), int(n[2]))
			if m != nil {
				m.Device(int(n[2])).SessionDown(true)
			}
		default:
			return fmt.Errorf("child event %q: not one this run understands", sc.Text())
		}
	}
	return sc.Err()
}

// tellMetrics is an attempt's end as the agent's own metrics hook sees it.
func tellMetrics(d device.Metrics, o fault.Outcome) {
	switch o {
	case fault.Accepted:
		d.Attempt(device.AttemptAccepted)
		d.SessionUp()
	case fault.Refused:
		d.Attempt(device.AttemptRefused)
	default:
		d.Attempt(device.AttemptFailed)
	}
}

// eventStream hands a child's event lines to its parent without ever
// blocking the agent that reports them (an agent's OnEvent must not block,
// and a parent busy with a storm may read late): lines queue in memory and
// one goroutine writes them out, in order.
type eventStream struct {
	w       io.Writer
	mu      sync.Mutex
	pending []byte
	closing bool
	wake    chan struct{} // one wake-up waiting at most
	done    chan struct{}
}

func newEventStream(w io.Writer) *eventStream {
	s := &eventStream{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues p; it never fails and never waits for the reader.
func (s *eventStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.pending = append(s.pending, p...)
	s.mu.Unlock()
	s.poke()
	return len(p), nil
}

func (s *eventStream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *eventStream) run() {
	defer close(s.done)
	var out []byte
	failed := false
	for range s.wake {
		s.mu.Lock()
		out, s.pending = s.pending, out[:0]
		closing := s.closing
		s.mu.Unlock()
		if len(out) > 0 && !failed {
			_, err := s.w.Write(out)
			failed = err != nil // the parent is gone: nobody left to tell
		}
		if closing {
			return
		}
	}
}

// close writes out what is queued and stops.
func (s *eventStream) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}
