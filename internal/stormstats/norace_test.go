//go:build !race

package stormstats_test

const raceDetector = false
