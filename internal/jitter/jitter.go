// Package jitter is the randomness every timing package draws from. It
// gives a source seeded from crypto/rand where the caller gave none. It
// gives uniform draws from any source, computed the same way everywhere.
// A seed thus gives the same waits in the firmware and in the simulator.
package jitter

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
)

// NewSource returns a PCG source seeded from crypto/rand: no two devices
// draw the same sequence.
func NewSource() rand.Source {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms (Go 1.24+ crashes instead)
	return rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]))
}

// Float64 draws a uniform number in [0, 1) from src.
func Float64(src rand.Source) float64 {
	return float64(src.Uint64()>>11) * 0x1p-53
}
