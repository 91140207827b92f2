//go:build !race

package fleetsim_test

const raceDetector = false
