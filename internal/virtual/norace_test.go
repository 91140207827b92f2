//go:build !race

package virtual_test

const raceDetector = false
