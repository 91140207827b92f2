package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/storm"
)

// devicesim run -f: a storm file's expectations gate the exit status, and
// report.json keeps them, passed or failed.
func TestStormFileGatesThePipeline(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "storm.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
engine: virtual
fleet: [{devices: 2000, policy: fleet-safe}]
brokers: {admission: {rate: 100, burst: 5}}
timeline: [{disruption: throttled-restart, outage: 1m}]
expect: {verdict: spread, attempts_per_device: 100, recovery_p99: 10s}
`), 0o600))
	out := filepath.Join(dir, "report")
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"run", "-f", file, "-out", out}, noenv, nil, &stdout, &stdout)
	require.Error(t, err, "2,000 devices behind 100/s cannot be back within 10 s")
	assert.ErrorContains(t, err, "1 of 3 expectations failed: recovery p99")
	assert.Contains(t, stdout.String(), "engine virtual (the file names it)")
	assert.Contains(t, stdout.String(), "pass  verdict")
	assert.Contains(t, stdout.String(), "FAIL  recovery p99")
	r, err := report.ReadReport(out)
	require.NoError(t, err)
	require.Len(t, r.Expectations, 3)
	assert.False(t, r.Expectations[1].Pass)

	err = run(context.Background(), []string{"run", "-f", file, "-devices", "10"}, noenv, nil, &stdout, &stdout)
	assert.ErrorContains(t, err, "-devices: the storm file -f says it")
}

// Every command that takes a storm file reads it alike: within its cap,
// and without YAML's aliases, so that none expands a billion laughs.
func TestEveryCommandReadsTheStormFileAlike(t *testing.T) {
	dir := t.TempDir()
	valid := "fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all}]\n"
	files := map[string]string{
		"over 128 KiB": valid + strings.Repeat("#", storm.MaxFileBytes) + "\n",
		"line 3, column 4: *g: a storm file takes no anchors": valid + "a: *g\n",
	}
	for want, text := range files {
		file := filepath.Join(dir, "storm.yaml")
		require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
		for _, args := range [][]string{
			{"run", "-f", file, "-out", filepath.Join(dir, "report")},
			{"plan", "-f", file},
			{"merge", "-f", file, dir},
			{"deploy", "-f", file, "-image", "registry.example.com/devicesim:v1", "-out", filepath.Join(dir, "deploy")},
		} {
			var out bytes.Buffer
			err := run(context.Background(), args, noenv, nil, &out, &out)
			assert.ErrorContains(t, err, want, args[0])
		}
	}
	assert.NoDirExists(t, filepath.Join(dir, "deploy"))
}
