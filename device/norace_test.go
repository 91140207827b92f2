//go:build !race

package device_test

const raceDetector = false
