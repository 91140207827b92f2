package virtual

import "github.com/herdguard/herdguard/internal/attempt"

// batchSink takes records a batch at a time, in order: the report's
// builder, which prefetches ahead in a batch.
type batchSink interface {
	AddBatch([]attempt.Record)
}

// pipe hands the engine's records to the report's builder in batches and in
// order. Unless inline, it runs on a goroutine of its own. The builder's
// counting and the formatting of events.csv then run beside the model, on a
// second core, rather than between its events. Three batches circulate, so
// the model waits only when the builder is two batches behind. Inline, the
// model hands each batch over itself. The builder still prefetches a
// batch's devices' counters ahead.
type pipe struct {
	sink  batchSink
	batch []attempt.Record
	full  chan []attempt.Record // nil: inline, or closed
	free  chan []attempt.Record
	done  chan struct{}
}

const pipeBatch = 8192 // records: 256 KiB, a core's cache

func newPipe(sink batchSink, inline bool) *pipe {
	p := &pipe{sink: sink, batch: make([]attempt.Record, 0, pipeBatch)}
	if inline {
		return p
	}
	p.full, p.free, p.done = make(chan []attempt.Record, 2), make(chan []attempt.Record, 3), make(chan struct{})
	for range 2 {
		p.free <- make([]attempt.Record, 0, pipeBatch)
	}
	go func() {
		defer close(p.done)
		for b := range p.full {
			sink.AddBatch(b)
			p.free <- b[:0]
		}
	}()
	return p
}

// Add takes one record; it is p's attempt.Sink.
func (p *pipe) Add(r attempt.Record) {
	p.batch = append(p.batch, r)
	if len(p.batch) == pipeBatch {
		p.handOver()
	}
}

func (p *pipe) handOver() {
	if p.full == nil {
		p.sink.AddBatch(p.batch)
		p.batch = p.batch[:0]
		return
	}
	p.full <- p.batch
	p.batch = <-p.free
}

// close hands over the last records and returns once the builder has
// taken them all. p takes no records after it.
func (p *pipe) close() {
	if len(p.batch) > 0 {
		p.handOver()
	}
	if p.full != nil {
		close(p.full)
		<-p.done
		p.full = nil
	}
}
