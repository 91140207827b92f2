package fleetsim_test

import (
	"testing"

	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

func inVirtualTime(t *testing.T, p plan.Plan) (*report.Report, error) {
	t.Helper()
	return fleetsimtest.InVirtualTime(t, p)
}

func inBubble(t *testing.T, p plan.Plan) (*report.Report, error) {
	t.Helper()
	return fleetsimtest.InBubble(t, p)
}

func seeds() uint64 { return fleetsimtest.Seeds() }

const raceDetector = fleetsimtest.RaceDetector
