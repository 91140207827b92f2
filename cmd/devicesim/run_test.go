package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func noenv(string) string { return "" }

func delays(t *testing.T, args ...string) string {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append([]string{"delays"}, args...), noenv, &out, &out))
	return out.String()
}

func TestDelaysAreReproducibleAndFollowThePolicy(t *testing.T) {
	a := delays(t, "-policy", "iotcore", "-attempts", "3", "-samples", "4", "-seed", "7")
	assert.Equal(t, a, delays(t, "-policy", "iotcore", "-attempts", "3", "-samples", "4", "-seed", "7"), "same seed, same draws")
	assert.NotEqual(t, a, delays(t, "-policy", "iotcore", "-attempts", "3", "-samples", "4", "-seed", "8"))
	lines := strings.Split(strings.TrimSpace(a), "\n")
	require.Len(t, lines, 1+3*4)
	assert.Equal(t, "attempt,delay_ms", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "1,1"), "wait_0 is 1 s + U[0, 1 s): %s", lines[1])
	assert.Contains(t, delays(t, "-policy", "exponential", "-attempts", "2", "-samples", "1"), "2,2000.000")
	assert.Equal(t, "attempt,delay_ms\n1,0.000\n2,1000.000\n3,2000.000\n4,4000.000\n5,4000.000\n",
		delays(t, "-policy", "paho-default", "-attempts", "5", "-samples", "1", "-max-backoff", "4s"))
}

func TestCommandErrors(t *testing.T) {
	var out bytes.Buffer
	assert.Error(t, run(context.Background(), nil, noenv, &out, &out))
	assert.Error(t, run(context.Background(), []string{"fly"}, noenv, &out, &out))
	assert.ErrorContains(t, run(context.Background(), []string{"delays", "-policy", "hope"}, noenv, &out, &out), "unknown policy")
	assert.Error(t, run(context.Background(), []string{"run", "-devices", "0"}, noenv, &out, &out))
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-admit-mode", "maybe"}, noenv, &out, &out), "-admit-mode")
	assert.Error(t, run(context.Background(), []string{"run", "-admit-rate", "-1"}, noenv, &out, &out))
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-shard", "3/2"}, noenv, &out, &out), "-shard")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-shards", "4"}, noenv, &out, &out), "JOB_COMPLETION_INDEX")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-shards", "4"}, func(string) string { return "1" }, &out, &out),
		"external broker", "a shard needs -broker")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-scenario", "observe"}, noenv, &out, &out), "-broker")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-transport", "tcp", "-devices", "10000"}, noenv, &out, &out), "descriptors")
	assert.Error(t, run(context.Background(), []string{"merge"}, noenv, &out, &out))
}

func TestHelpListsRunFlags(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help", "run"}, noenv, &out, &out))
	for _, f := range []string{"-devices", "-scenario", "-policy", "-max-backoff", "-retry-cap", "-outage", "-time-scale", "-seed", "-out",
		"-admit-rate", "-admit-burst", "-admit-mode", "-compare", "-transport", "-broker", "-flap", "-retry-after", "-duration",
		"-shard", "-shards", "-telemetry", "paho-default", "config-outage", "observe", "flapping"} {
		assert.Contains(t, out.String(), f)
	}
}
