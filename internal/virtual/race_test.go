//go:build race

package virtual_test

// raceDetector: the large golden runs are left to the stats step, which
// runs without the race detector.
const raceDetector = true
