package chart_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/herdguard/herdguard/internal/chart"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Two panels share one figure: each its title, the legend once (the
// first panel's entries), the bursts labelled with their size, the limit
// labelled, the title within the figure.
func TestFigureStacksPanelsUnderOneLegend(t *testing.T) {
	line := func(label string) chart.Line {
		return chart.Line{XYs: chart.RateSeries([]int{0, 50, 0, 0, 40, 0, 0, 30}, 1), Label: label, Color: chart.Vermilion, Width: vg.Points(1)}
	}
	a := chart.Panel{Title: "iotcore: waves", Lines: []chart.Line{line("every attempt")}, YMax: 500, OutageEnd: 0.5,
		OutageText: "the outage", Limit: 100, Bursts: []stormstats.Burst{{AtS: 0.1, WidthS: 0.1, Count: 50}}}
	b := a
	b.Title = "fleet-safe: spread"
	svg, err := chart.Figure("broker-restart, 2,000 devices", []chart.Panel{a, b}, 0.8)
	require.NoError(t, err)
	s := string(svg)
	assert.Contains(t, s, "iotcore: waves")
	assert.Contains(t, s, "fleet-safe: spread")
	assert.Equal(t, 1, strings.Count(s, ">every attempt<"), "the legend names each line once")
	assert.Equal(t, 2, strings.Count(s, ">50<"), "each panel's burst labelled with its size")
	assert.Contains(t, s, "admission limit 100/s")
	assert.Contains(t, s, "broker-restart, 2,000 devices")
}

func TestNumbersAsTheChartWritesThem(t *testing.T) {
	assert.Equal(t, "1,234,567", chart.Thousands(1234567))
	assert.Equal(t, "-1,000", chart.Thousands(-1000))
	assert.Equal(t, "2", chart.TrimFloat(2.0))
	assert.Equal(t, "8.7", chart.TrimFloat(8.66))
	assert.Equal(t, plotter.XYs{{X: 0, Y: 10}, {X: 0.2, Y: 5}}, chart.RateSeries([]int{1, 1, 1}, 2))
}
