//go:build !race

package publisher_test

const raceDetector = false
