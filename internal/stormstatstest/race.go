//go:build race

package stormstatstest

// RaceDetector: under -race the statistical tests run 1 seed and the
// ground truth a few cells only. Under -race a judgement costs ten times as
// much. make test's stats step runs them in full without it.
const RaceDetector = true
