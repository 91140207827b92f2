//go:build !race

package stormstatstest

// RaceDetector: see race.go.
const RaceDetector = false
