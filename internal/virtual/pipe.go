package virtual

import "github.com/herdguard/herdguard/internal/attempt"

// pipe hands the engine's records to the report's builder on a goroutine
// of its own, in batches and in order: the builder's counting and the
// formatting of events.csv then run beside the model, on a second core,
// rather than between its events. Three batches circulate, so the model
// waits only when the builder is two batches behind.
type pipe struct {
	batch []attempt.Record
	full  chan []attempt.Record
	free  chan []attempt.Record
	done  chan struct{}
}

const pipeBatch = 8192 // records: 256 KiB, a core's cache

func newPipe(sink attempt.Sink) *pipe {
	p := &pipe{full: make(chan []attempt.Record, 2), free: make(chan []attempt.Record, 3), done: make(chan struct{})}
	for range 2 {
		p.free <- make([]attempt.Record, 0, pipeBatch)
	}
	p.batch = make([]attempt.Record, 0, pipeBatch)
	go func() {
		defer close(p.done)
		for b := range p.full {
			for _, r := range b {
				sink.Add(r)
			}
			p.free <- b[:0]
		}
	}()
	return p
}

// Add takes one record; it is p's attempt.Sink.
func (p *pipe) Add(r attempt.Record) {
	p.batch = append(p.batch, r)
	if len(p.batch) == pipeBatch {
		p.full <- p.batch
		p.batch = <-p.free
	}
}

// close hands over the last records and returns once the builder has
// taken them all; a nil pipe has none. p takes no records after it.
func (p *pipe) close() {
	if p == nil || p.full == nil {
		return
	}
	if len(p.batch) > 0 {
		p.full <- p.batch
	}
	close(p.full)
	<-p.done
	p.full = nil
}
