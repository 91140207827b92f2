package reconnect_test

import (
	"math/rand/v2"
	"testing"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"

	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/reconnect"
)

// The next-delay benchmarks run side by side with cenkalti/backoff/v5's
// NextBackOff in one invocation (make bench); docs/measurements.md quotes the ratio.

var sink time.Duration

func BenchmarkNextDelay(b *testing.B) {
	// cenkalti first: benchstat -col /impl takes the first column as the base.
	b.Run("impl=cenkalti-v5", func(b *testing.B) {
		eb := cenkalti.NewExponentialBackOff()
		eb.InitialInterval = time.Second
		eb.MaxInterval = 32 * time.Second
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if i&15 == 0 {
				eb.Reset() // stay in the growing part of the curve
			}
			sink += eb.NextBackOff()
		}
	})
	now := time.Unix(0, 0)
	for _, c := range []struct {
		name  string
		shape reconnect.Shape
	}{
		{"iotcore", reconnect.DefaultIoTCore},
		{"full", reconnect.FullJitter{Base: time.Second, Max: 32 * time.Second}},
		{"decorrelated", reconnect.Decorrelated{Base: time.Second, Max: 32 * time.Second}},
		{"exponential", reconnect.Exponential{Base: time.Second, Multiplier: 2, Max: 10 * time.Minute}},
	} {
		p, err := reconnect.New(c.shape, reconnect.Limits{MaxRetries: reconnect.RetryForever})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("impl="+c.name, func(b *testing.B) {
			bo := reconnect.NewBackoff(p, rand.NewPCG(1, 2))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if i&15 == 0 {
					bo.Reset()
				}
				d, _ := bo.Next(now)
				sink += d
			}
		})
	}
}

// BenchmarkPolicyDelay is the stateless form a virtual-time simulator calls.
func BenchmarkPolicyDelay(b *testing.B) {
	p, _ := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	src := rand.NewPCG(1, 2)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink += p.Delay(i&7, 0, jitter.Float64(src))
	}
}
