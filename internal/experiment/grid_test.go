package experiment_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/experiment"
	"github.com/herdguard/herdguard/internal/fleetsimtest"
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

// The same cells on MQTT 5, honouring the broker's 0x9F and deaf to it, run
// to the end: the formula's fleet that honours the code makes fewer
// attempts and comes back sooner, and the broker's busiest second, its
// return's burst, is the same either way: on every one of 20 seeds.
func TestGridComparesFleetsThatHearTheBrokerWithDeafOnes(t *testing.T) {
	gc := experiment.DefaultGrid()
	gc.Devices, gc.AdmitRates, gc.Policies = []int{2000}, []float64{100}, []string{"iotcore"}
	gc.MQTT, gc.Full = []string{experiment.MQTT5, experiment.MQTT5Deaf}, true
	for gc.Seed = 1; gc.Seed <= fleetsimtest.Seeds(); gc.Seed++ {
		g, err := experiment.RunGrid(context.Background(), gc)
		require.NoError(t, err)
		require.Len(t, g.Cells, 4, "two kinds of device, throttled restart and boot storm")
		cell := map[string]experiment.GridCell{}
		for _, c := range g.Cells {
			if c.Scenario == "throttled-restart" {
				cell[c.MQTT] = c
			}
		}
		honour, deaf := cell[experiment.MQTT5], cell[experiment.MQTT5Deaf]
		assert.Less(t, honour.AttemptsAfterReturn, deaf.AttemptsAfterReturn, "seed %d", gc.Seed)
		assert.Less(t, honour.P99AfterReturnS, deaf.P99AfterReturnS, "seed %d", gc.Seed)
		assert.Positive(t, honour.BusiestS)
		assert.Equal(t, honour.BusiestS, deaf.BusiestS, "seed %d: the return's burst comes before any refusal", gc.Seed)
	}

	gc.MQTT = []string{"4"}
	_, err := experiment.RunGrid(context.Background(), gc)
	assert.ErrorContains(t, err, `MQTT: want 3.1.1, 5 or 5-deaf, got "4"`)
}
