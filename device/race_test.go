//go:build race

package device_test

// raceDetector: the flood of TestAFloodOfMessagesMeetsBackPressure is a
// tenth as long under the race detector, which slows its 400 MB tenfold.
const raceDetector = true
