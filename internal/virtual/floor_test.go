package virtual_test

import (
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/internal/eventq"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// floor is the model with nothing but its own work, the engine's floor
// (issue: the engine at most twice its cost): every device, its session
// lost, retries on full jitter (base 1 s, cap 32 s) against a broker down
// for outage and then admitting r connects a second with bursts of burst,
// refusing the rest, until every device is in. A queue of (time, device),
// one token bucket, one jitter draw an attempt; no device state beyond its
// retry count, no report. It returns the attempts made. q is the engine's
// calendar queue, or the 4-ary heap the floor was first defined with.
func floor[Q interface {
	Push(eventq.Event)
	Pop() eventq.Event
	Len() int
}](q Q, devices int, seed uint64, outage time.Duration, r float64, burst int) int {
	shape := reconnect.FullJitter{Base: time.Second, Max: 32 * time.Second}
	src := rand.New(rand.NewPCG(seed, 1))
	epoch := time.Unix(0, 0)
	lim := rate.NewLimiter(rate.Limit(r), burst)
	retries := make([]int32, devices)
	for i := range devices { // every session lost at 0: the first retry is the policy's
		q.Push(eventq.Event{At: shape.Delay(0, 0, src.Float64()), Key: src.Uint32(), Dev: int32(i)})
	}
	attempts := 0
	for q.Len() > 0 {
		e := q.Pop()
		attempts++
		if e.At >= outage && lim.AllowN(epoch.Add(e.At), 1) {
			continue // admitted: this device is back
		}
		retries[e.Dev]++
		q.Push(eventq.Event{At: e.At + shape.Delay(int(retries[e.Dev]), 0, src.Float64()), Key: src.Uint32(), Dev: e.Dev})
	}
	return attempts
}

// formatted is a writer that is not io.Discard, so the engine formats
// every events.csv row as a run writing the file does.
type formatted struct{ n int64 }

func (f *formatted) Write(p []byte) (int, error) { f.n += int64(len(p)); return len(p), nil }

// The million-device throttled restart of docs/large-fleets.md (full
// jitter, 10,000/s, burst 500): the engine, with its report and judgement,
// with and without formatting events.csv, beside the floor on the engine's
// queue and on a 4-ary heap. make bench compares them with benchstat -col
// /impl.
func BenchmarkMillionThrottledRestart(b *testing.B) {
	const devices = 1_000_000
	b.Run("impl=floor", func(b *testing.B) {
		for range b.N {
			if n := floor(new(eventq.Queue), devices, 1, time.Minute, 10_000, 500); n < devices {
				b.Fatalf("%d attempts", n)
			}
		}
	})
	b.Run("impl=floor-heap", func(b *testing.B) {
		for range b.N {
			if n := floor(new(eventq.Heap), devices, 1, time.Minute, 10_000, 500); n < devices {
				b.Fatalf("%d attempts", n)
			}
		}
	})
	for _, tc := range []struct {
		name   string
		events func() io.Writer
	}{{"impl=engine", func() io.Writer { return io.Discard }}, {"impl=engine-csv", func() io.Writer { return &formatted{} }}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				p := model(plan.ThrottledRestart, "full", devices)
				p.AdmitRate, p.AdmitBurst, p.Outage, p.Events = 10_000, 500, time.Minute, tc.events()
				if _, err := run(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The floor models the same storm as the engine: the attempts it counts
// are within 1 % of the engine's on the same fleet (the engine's devices
// also keep a client-side flood guard, which the floor leaves out).
func TestTheFloorModelsTheSameStorm(t *testing.T) {
	const devices = 20_000
	p := model(plan.ThrottledRestart, "full", devices)
	p.AdmitRate, p.AdmitBurst, p.Outage = 200, 10, time.Minute
	r, err := run(p)
	if err != nil {
		t.Fatal(err)
	}
	got := floor(new(eventq.Queue), devices, 1, time.Minute, 200, 10)
	if d := float64(got)/float64(r.Attempts.Total) - 1; d < -0.01 || d > 0.01 {
		t.Errorf("the floor made %d attempts, the engine %d: %+.1f %%", got, r.Attempts.Total, 100*d)
	}
}

// A fleet mostly idle (an hour's outage, its devices at a 10-minute cap)
// costs its attempts, not its devices times the time watched: the hour
// and a minute's outage cost about the same per attempt (ns/attempt),
// where the queue skips empty buckets 64 to a word and keeps waits beyond
// its ring in a heap.
func BenchmarkIdleHour(b *testing.B) {
	for _, outage := range []time.Duration{time.Minute, time.Hour} {
		b.Run("outage="+outage.String(), func(b *testing.B) {
			attempts := int64(0)
			for range b.N {
				p := model(plan.BrokerRestart, "full", 100_000)
				p.Outage, p.MaxBackoff, p.Events = outage, 10*time.Minute, io.Discard
				r, err := run(p)
				if err != nil {
					b.Fatal(err)
				}
				attempts += r.Attempts.Total
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(attempts), "ns/attempt")
			b.ReportMetric(float64(attempts)/float64(b.N), "attempts")
		})
	}
}
