package jitter_test

import (
	"math/rand/v2"
	"testing"

	"github.com/herdguard/herdguard/internal/jitter"
)

// A draw is in [0, 1) whatever the source gives, its extremes included, and
// is the same on every platform for the same seed: the firmware (32-bit ARM
// included) and the simulator must wait the same.
func TestFloat64IsUniformOnEveryPlatform(t *testing.T) {
	for _, u := range []uint64{0, 1, 1 << 11, 1<<64 - 1} {
		if f := jitter.Float64(fixed(u)); f < 0 || f >= 1 {
			t.Errorf("source %#x: draw %v, want [0, 1)", u, f)
		}
	}
	if f := jitter.Float64(fixed(1<<64 - 1)); f != 1-0x1p-53 {
		t.Errorf("the largest draw is %v, want 1 - 2^-53", f)
	}
	src := rand.NewPCG(1, 2)
	var sum float64
	for range 1000 {
		sum += jitter.Float64(src)
	}
	// the same sum on amd64 and under qemu-arm: the draws are exact
	if want := 508.12644719386964; sum != want {
		t.Errorf("1,000 draws from PCG(1, 2) sum to %v, want %v", sum, want)
	}
}

// Two sources made by NewSource are seeded apart.
func TestNewSourcesDiffer(t *testing.T) {
	a, b := jitter.NewSource(), jitter.NewSource()
	if a.Uint64() == b.Uint64() && a.Uint64() == b.Uint64() {
		t.Error("two sources drew the same two numbers")
	}
}

type fixed uint64

func (f fixed) Uint64() uint64 { return uint64(f) }
