//go:build race

package fleetsimtest

// RaceDetector: the race detector slows real agents tenfold, so tests that
// repeat runs over many seeds run fewer under it (make test runs them in
// full without it).
const RaceDetector = true
