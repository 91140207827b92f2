package publisher_test

import (
	"path/filepath"
	"testing"

	"github.com/herdguard/herdguard/publisher"
)

// BenchmarkEnqueue measures Publish (validation, sequence number, store
// append) for each store in one run: make bench summarises it with benchstat.
func BenchmarkEnqueue(b *testing.B) {
	payload := make([]byte, 64)
	for _, c := range []struct {
		name string
		open func(b *testing.B) publisher.Store
	}{
		{"memory", func(*testing.B) publisher.Store { return &publisher.MemoryStore{} }},
		{"bolt-nosync", func(b *testing.B) publisher.Store {
			s, err := publisher.OpenBoltStore(filepath.Join(b.TempDir(), "q.db"), publisher.BoltOptions{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"bolt-fsync", func(b *testing.B) publisher.Store {
			s, err := publisher.OpenBoltStore(filepath.Join(b.TempDir(), "q.db"), publisher.BoltOptions{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	} {
		b.Run("store="+c.name, func(b *testing.B) {
			p, err := publisher.New(publisher.Config{Session: neverConnected{}, Store: c.open(b),
				MaxMessages: b.N + 1, MaxBytes: int64(b.N+1) * 100})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Publish("telemetry/dev-1", payload); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
