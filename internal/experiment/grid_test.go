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
