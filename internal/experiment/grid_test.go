package experiment_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/experiment"
)

// A small grid in virtual time: the mission's formula behind a broker that
// admits 200 connects a second comes back in waves and fails its cells;
// fleet-safe passes them. The grid's table, HTML and verdicts say so.
func TestGridTellsTheSafePolicyFromTheFormula(t *testing.T) {
	gc := experiment.DefaultGrid()
	gc.Devices, gc.AdmitRates, gc.Policies = []int{2000}, []float64{200}, []string{"iotcore", "fleet-safe"}
	g, err := experiment.RunGrid(context.Background(), gc)
	require.NoError(t, err)
	require.Len(t, g.Cells, 4, "two policies, throttled restart and boot storm")
	assert.True(t, g.Passed("fleet-safe"), "%+v", g.Cells)
	assert.False(t, g.Passed("iotcore"))
	for _, c := range g.Cells {
		if c.Policy == "iotcore" && c.Scenario == "throttled-restart" {
			assert.Equal(t, "waves", c.Verdict)
			assert.NotEmpty(t, c.Why)
		}
	}
	var table, html bytes.Buffer
	g.Table(&table)
	assert.Contains(t, table.String(), "fleet-safe")
	require.NoError(t, g.WriteHTML(&html))
	assert.True(t, strings.Contains(html.String(), "<table"), "grid.html has its tables")
}

// The rollout question on a small fleet: every share runs, the answer is
// the smallest share from which every row passes, and the formula alone
// does not.
func TestMixNamesTheSmallestSafeShare(t *testing.T) {
	mc := experiment.DefaultMix()
	mc.Storm.Devices, mc.Storm.AdmitRate, mc.Storm.AdmitBurst, mc.PeakBound = 5000, 100, 5, 400
	mc.Shares = []float64{0, 0.5, 1}
	m, err := experiment.RunMix(context.Background(), mc)
	require.NoError(t, err)
	require.Len(t, m.Rows, 3)
	assert.False(t, m.Rows[0].Pass, "the formula alone: %+v", m.Rows[0])
	assert.Equal(t, "waves", string(m.Rows[0].Verdict))
	assert.True(t, m.Rows[2].Pass, "fleet-safe alone: %+v", m.Rows[2])
	assert.Contains(t, []float64{0.5, 1}, m.Smallest)
	var table bytes.Buffer
	m.Table(&table)
	assert.Contains(t, table.String(), "the smallest share on fleet-safe that passes")
}
