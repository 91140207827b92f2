package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/experiment"
	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/rendezvous"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstatstest"
)

// shardSeed is the shard test's seed; docs/large-fleets.md gives the test's
// outcome over ten of them.
var shardSeed = flag.Uint64("shards.seed", 7, "TestShardsStrikeOneStormAsOneProcessDoes: the devices' seed")

// shardStorm is one storm against mosquitto through the fault proxy: 400
// devices on the mission's formula lose the broker for 30 s, at 10x.
func shardStorm(url string) []string {
	return []string{"run", "-broker", url, "-scenario", "broker-restart", "-outage", "30s", "-policy", "iotcore",
		"-devices", "400", "-seed", strconv.FormatUint(*shardSeed, 10), "-time-scale", "10", "-events", "on"}
}

// Four devicesim processes run as a Kubernetes Indexed Job runs them:
// each its slice of the fleet by its JOB_COMPLETION_INDEX, meeting in one
// directory, striking mosquitto's restart at one instant (-disrupt-at
// +2s), and shard 0 merging the four reports. The merged report agrees
// with one process that ran the whole fleet through the same storm: the
// same verdict, and recovery and attempts within the engines' agreement
// bounds (experiment.DefaultCalibrationBounds: 5 %, or 0.5 s and 0.05
// attempts).
func TestShardsStrikeOneStormAsOneProcessDoes(t *testing.T) {
	if stormstatstest.RaceDetector {
		t.Skip("real-time storms: make test runs it without the race detector (make interop)")
	}
	t.Parallel() // beside RabbitMQ's storms: real time, mostly waiting
	m := mosquittotest.Start(t, "")
	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)

	var out bytes.Buffer
	wholeErr := run(context.Background(), append(shardStorm(m.URL()), "-out", filepath.Join(dir, "whole")), noenv, nil, &out, &out)
	servedOrBound(t, wholeErr, out.String())
	whole, err := report.ReadReport(filepath.Join(dir, "whole"))
	require.NoError(t, err)

	const shards = 4
	bound := make([]bool, shards)
	var wg sync.WaitGroup
	for i := range shards {
		cmd := exec.Command(exe, append(shardStorm(m.URL()), "-shards", strconv.Itoa(shards), "-disrupt-at", "+2s", "-merge",
			"-out", filepath.Join(dir, "job", "shard-"+strconv.Itoa(i)))...)
		cmd.Env = append(os.Environ(), "HERDGUARD_DEVICESIM_CHILD=1", "JOB_COMPLETION_INDEX="+strconv.Itoa(i))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() == exitHostBound {
				bound[i] = true
				return
			}
			assert.NoError(t, err, "shard %d: %s", i, stderr.String())
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var parts []*report.Report
	for i := range shards {
		r, err := report.ReadReport(filepath.Join(dir, "job", "shard-"+strconv.Itoa(i)))
		require.NoError(t, err)
		parts = append(parts, r)
		require.NotNil(t, r.Sync)
		assert.Equal(t, "+2s", r.Sync.DisruptAt)
		assert.Equal(t, parts[0].Sync.StrikeUnixMS, r.Sync.StrikeUnixMS, "every shard named one instant")
		assert.InDelta(t, r.Sync.StrikeUnixMS, r.DisruptionUnixMS, float64(rendezvous.MaxSkew/time.Millisecond),
			"shard %d struck at the instant", i)
		require.NotNil(t, r.Sync.ClockOffsetMS)
		assert.InDelta(t, 0, *r.Sync.ClockOffsetMS, 50, "one machine's clock, against its own volume")
		assert.Equal(t, 100, r.Devices)
	}
	merged, err := report.ReadReport(filepath.Join(dir, "job", "merged"))
	require.NoError(t, err)
	assert.Equal(t, 400, merged.Devices)
	assert.True(t, merged.Recovery.AllRecovered)
	var total int64
	for _, r := range parts {
		total += r.Attempts.Total
	}
	assert.Equal(t, total, merged.Attempts.Total, "every shard's attempts, once")

	if whole.Host.Bound || bound[0] || bound[1] || bound[2] || bound[3] {
		t.Log("the host bound a run: its times are the host's, not the fleet's, so they are not compared")
		return
	}
	figures := func(r *report.Report) experiment.EngineFigures {
		return experiment.EngineFigures{P50S: r.Recovery.P50S, P99S: r.Recovery.P99S, AttemptsPerDevice: r.Attempts.PerDeviceMean}
	}
	t.Logf("one process: p50 %.2f s, p99 %.2f s, %.3f attempts a device, %s; four shards merged: p50 %.2f s, p99 %.2f s, "+
		"%.3f attempts a device, %s", whole.Recovery.P50S, whole.Recovery.P99S, whole.Attempts.PerDeviceMean, whole.Verdict,
		merged.Recovery.P50S, merged.Recovery.P99S, merged.Attempts.PerDeviceMean, merged.Verdict)
	assert.Equal(t, whole.Verdict, merged.Verdict)
	assert.Empty(t, experiment.DefaultCalibrationBounds.Apart(figures(whole), figures(merged)))
}

// A shard too large for one process splits its own slice among children:
// two shards of 120 devices through mosquitto, each in children of 30,
// run every device once, each its own slice and none of the other's.
func TestAShardsChildrenRunItsSliceAlone(t *testing.T) {
	if stormstatstest.RaceDetector {
		t.Skip("real-time storms: make test runs it without the race detector")
	}
	t.Parallel() // beside the other real-time storms of make interop, which mostly wait
	m := mosquittotest.Start(t, "")
	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 2 {
		cmd := exec.Command(exe, "run", "-broker", m.URL(), "-scenario", "drop-all", "-policy", "full", "-devices", "120",
			"-tcp-per-process", "30", "-time-scale", "20", "-shard", fmt.Sprintf("%d/2", i), "-disrupt-at", "+1s",
			"-out", filepath.Join(dir, "shard-"+strconv.Itoa(i)))
		cmd.Env = append(os.Environ(), "HERDGUARD_DEVICESIM_CHILD=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		wg.Go(func() {
			err := cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitHostBound {
				assert.NoError(t, err, "shard %d: %s", i, stderr.String())
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int32]int{}
	for i := range 2 {
		r, err := report.ReadReport(filepath.Join(dir, "shard-"+strconv.Itoa(i)))
		require.NoError(t, err)
		assert.Equal(t, 60, r.Devices)
		assert.Equal(t, 2, r.Host.AgentProcesses, "60 devices in children of 30")
		for _, e := range r.Events() {
			assert.EqualValues(t, i, e.Device%2, "shard %d ran device %d", i, e.Device)
			seen[e.Device]++
		}
	}
	assert.Len(t, seen, 120, "every device ran, in one shard")
}
