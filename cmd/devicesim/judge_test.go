package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// judge runs devicesim judge on in (standard input when file is "-").
func judge(t *testing.T, in string, args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = run(context.Background(), append([]string{"judge"}, args...), noenv, strings.NewReader(in), &o, &e)
	return o.String(), e.String(), err
}

// rounds: devices in lock-step every period, as plain seconds.
func rounds(devices, count int, period float64) string {
	var b strings.Builder
	for k := range count {
		for d := range devices {
			fmt.Fprintf(&b, "%.3f\n", float64(k)*period+float64(d)*0.001)
		}
	}
	return b.String()
}

func TestJudgeGolden(t *testing.T) {
	out, _, err := judge(t, rounds(100, 5, 32), "-")
	require.NoError(t, err)
	golden := filepath.Join("testdata", "judge-waves.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out)
}

func TestJudgeExpectGatesAPipeline(t *testing.T) {
	in := rounds(100, 5, 32)
	_, _, err := judge(t, in, "-expect", "waves", "-")
	assert.NoError(t, err)
	_, _, err = judge(t, in, "-expect", "spread", "-")
	require.ErrorContains(t, err, "verdict waves, expected spread")
	var e *exitError
	assert.False(t, errors.As(err, &e), "a verdict other than the expected one exits 1, not 2")
	_, _, err = judge(t, in, "-expect", "maybe", "-")
	assert.True(t, errors.As(err, &e) && e.code == 2, "a bad flag is bad input: %v", err)
}

func TestJudgeJSON(t *testing.T) {
	out, _, err := judge(t, rounds(100, 5, 32), "-json", "-")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "waves", doc["verdict"])
	assert.EqualValues(t, 500, doc["count"])
	assert.InDelta(t, 1, doc["synchrony"], 0.01)
	assert.InDelta(t, 32, doc["period_s"], 0.1)
	assert.Contains(t, doc, "arrivals")
	assert.Len(t, doc["bursts"], 5)
}

func TestJudgeARunsEventsFile(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"run", "-engine", "virtual", "-policy", "exponential", "-devices", "200",
		"-expect", "waves", "-out", dir}, noenv, nil, &out, &out), out.String())
	got, _, err := judge(t, "", "-expect", "waves", filepath.Join(dir, "events.csv"))
	require.NoError(t, err, got)
	assert.Contains(t, got, "verdict: waves")
	assert.Contains(t, got, "arrivals: 1,000 over", "every attempt the devices made, refused dials included")

	err = run(context.Background(), []string{"run", "-engine", "virtual", "-policy", "exponential", "-devices", "200",
		"-expect", "spread", "-out", dir}, noenv, nil, &out, &out)
	assert.ErrorContains(t, err, "verdict waves, expected spread", "run -expect fails the run")
}

func TestJudgeBadInputExits2AndWritesNothing(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.csv")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for name, tc := range map[string]struct{ in, file, want string }{
		"empty file":       {"", empty, "no arrivals"},
		"unparsable line":  {"1\n2\nthree\n", "-", "line 3"},
		"no time column":   {"a,b\n1,2\n", "-", "line 1"},
		"missing file":     {"", filepath.Join(t.TempDir(), "nope"), "no such file"},
		"two files":        {"", "a b", "name one file"},
		"bad unix_ms line": {"unix_ms\n1000\nsoon\n", "-", "line 3"},
	} {
		args := strings.Fields(tc.file)
		if tc.file == empty || strings.Contains(tc.file, "nope") {
			args = []string{tc.file}
		}
		stdout, _, err := judge(t, tc.in, args...)
		var e *exitError
		require.True(t, errors.As(err, &e), "%s: %v", name, err)
		assert.Equal(t, 2, e.code, name)
		assert.ErrorContains(t, err, tc.want, name)
		assert.Empty(t, stdout, "%s: nothing written", name)
	}
}
