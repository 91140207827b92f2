package stormstats_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// BenchmarkJudge10M streams ten million arrivals into a Histogram and
// judges them: a million-device virtual run, or merged shards, is this big.
// Spread is 10 million independent arrivals over 1,000 s; waves is 30
// rounds of 333,333 every 32 s (normal, sigma 250 ms), as an unjittered
// fleet at its cap makes them.
func BenchmarkJudge10M(b *testing.B) {
	const n = 10_000_000
	r := rand.New(rand.NewPCG(1, 2))
	series := map[string][]time.Duration{"spread": make([]time.Duration, n), "waves": make([]time.Duration, n)}
	for i := range n {
		series["spread"][i] = time.Duration(r.Float64() * float64(1000*time.Second))
		series["waves"][i] = time.Duration(i%30)*32*time.Second + time.Duration((1+r.NormFloat64()/4)*float64(time.Second))
	}
	for _, name := range []string{"spread", "waves"} {
		b.Run("arrivals="+name, func(b *testing.B) {
			for b.Loop() {
				var h stormstats.Histogram
				for _, t := range series[name] {
					h.Add(t)
				}
				j, err := stormstats.Judge(&h, stormstats.DefaultMethod)
				if err != nil || (j.Verdict == stormstats.Waves) != (name == "waves") {
					b.Fatalf("%v: %s", err, j.Reason)
				}
			}
		})
	}
}

// BenchmarkPercentiles10M takes a report's four recovery percentiles of ten
// million devices' recovery times (a 40 s decay, on the engine's 100 µs):
// by selection, as Percentiles does, against sorting the times first.
func BenchmarkPercentiles10M(b *testing.B) {
	const n = 10_000_000
	r := rand.New(rand.NewPCG(1, 3))
	times := make([]float64, n)
	for i := range times {
		times[i] = math.Round(40*r.ExpFloat64()*1e4) / 1e4
	}
	xs := make([]float64, n)
	b.Run("impl=select", func(b *testing.B) {
		for b.Loop() {
			copy(xs, times)
			stormstats.Percentiles(xs, 50, 95, 99, 100)
		}
	})
	b.Run("impl=sort", func(b *testing.B) {
		for b.Loop() {
			copy(xs, times)
			slices.Sort(xs)
		}
	})
}
