package plan

import (
	"math/rand/v2"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// Delays draws the waits of samples devices' first attempts retries
// under policy (a spec, or paho-default) capped at maxBackoff, each
// device from its own source seeded by seed and its index, and calls emit
// with each retry's number (from 1) and its wait. paho's waits are the
// same for every device: at once, then 1 s doubling to the cap; it draws
// no jitter, so seed changes nothing.
func Delays(policy string, maxBackoff time.Duration, attempts, samples int, seed uint64, emit func(attempt int, wait time.Duration)) error {
	if policy == PahoDefault {
		for range samples {
			d := time.Duration(0)
			for a := 1; a <= attempts; a++ {
				emit(a, d)
				d = min(max(2*d, time.Second), maxBackoff)
			}
		}
		return nil
	}
	shape, err := Shape(policy, maxBackoff)
	if err != nil {
		return err
	}
	p, err := reconnect.New(shape, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	if err != nil {
		return err
	}
	for s := range samples {
		b := reconnect.NewBackoff(p, rand.NewPCG(seed, uint64(s)))
		for a := 1; a <= attempts; a++ {
			d, _ := b.Next(time.Time{})
			emit(a, d)
		}
	}
	return nil
}
