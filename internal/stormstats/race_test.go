//go:build race

package stormstats_test

// raceDetector: under -race the ground truth runs a few cells only (it is
// ten times slower); make test runs the whole short version without it.
const raceDetector = true
