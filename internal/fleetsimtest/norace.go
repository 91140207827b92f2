//go:build !race

package fleetsimtest

// RaceDetector: see race.go.
const RaceDetector = false
