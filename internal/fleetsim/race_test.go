//go:build race

package fleetsim_test

// raceDetector: the race detector slows real agents tenfold, so tests that
// repeat runs over many seeds run fewer under it (make test runs them in
// full without it).
const raceDetector = true
