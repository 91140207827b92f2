//go:build race

package publisher_test

// raceDetector: under -race the exhaustive damage test samples its pages
// (the detector slows it fourfold); make test's stats step runs every page
// without it.
const raceDetector = true
