package devicecore

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/herdguard/herdguard/reconnect"
)

// The Core's bucket takes the same slots as reconnect.FloodGuard (a
// rate.Limiter) on the same times: the same waits, to the nanosecond, over
// random configurations and random call sequences (tries and takes, times
// bunched and spread, a time repeated), so a simulation of Cores and a
// fleet of Agents meet the same guard.
func TestTheCoresGuardIsRateLimitersArithmetic(t *testing.T) {
	epoch := time.Unix(1_700_000_000, 0)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 9))
		g := reconnect.FloodGuardConfig{Requests: 1 + r.IntN(20), Window: time.Duration(1 + r.Int64N(int64(2*time.Minute))), Burst: r.IntN(6)}
		fg, err := reconnect.NewFloodGuard(g)
		if err != nil {
			t.Fatal(err)
		}
		var c Core
		now := time.Duration(r.Int64N(int64(time.Hour)))
		for call := range 300 {
			switch r.IntN(4) {
			case 0: // bunched
				now += time.Duration(r.Int64N(int64(time.Second)))
			case 1: // spread
				now += time.Duration(r.Int64N(int64(g.Window)))
			case 2: // the same instant
			case 3:
				now += time.Duration(r.Int64N(10))
			}
			var want, got time.Duration
			if r.IntN(3) == 0 {
				want, got = fg.Reserve(epoch.Add(now)), c.reserve(&g, now)
			} else {
				want, got = fg.TryReserve(epoch.Add(now)), c.tryReserve(&g, now)
			}
			if got != want {
				t.Fatalf("seed %d, call %d (%+v at %v): the Core's guard says %v, rate.Limiter %v", seed, call, g, now, got, want)
			}
		}
	}
}

// A Core is small enough for a hundred million in memory: 48 bytes on
// 64-bit platforms, its flood guard included (a Machine's guard alone was
// an 80-byte rate.Limiter on the heap).
func TestCoreIsSmall(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 && unsafe.Sizeof(Core{}) != 48 {
		t.Fatalf("a Core is %d bytes, want 48", unsafe.Sizeof(Core{}))
	}
}
