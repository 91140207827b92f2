package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/report"
)

func noenv(string) string { return "" }

// TestMain lets the test binary stand in for devicesim when a run starts
// child processes (a TCP fleet beyond one process's descriptors).
func TestMain(m *testing.M) {
	if os.Getenv("HERDGUARD_DEVICESIM_CHILD") == "1" {
		if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, io.Discard, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "devicesim child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestTCPFleetBeyondOneProcessRunsInChildren(t *testing.T) {
	t.Setenv("HERDGUARD_DEVICESIM_CHILD", "1") // inherited by the children only
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "-transport", "tcp", "-devices", "90", "-tcp-per-process", "40",
		"-scenario", "broker-restart", "-policy", "full", "-time-scale", "50", "-telemetry", "1", "-out", dir}, noenv, nil, &out, &out)
	servedOrBound(t, err, out.String())
	r, err := report.ReadReport(dir)
	require.NoError(t, err)
	assert.Equal(t, 90, r.Devices)
	assert.Equal(t, "tcp", r.Transport)
	require.NotNil(t, r.Broker)
	assert.Equal(t, "broker", r.Broker.MeasuredAt)
	assert.True(t, r.Recovery.AllRecovered)
	assert.GreaterOrEqual(t, r.Recovery.P50S, 30.0)
	// Three children (40, 40 and 10 devices... by index mod 3: 30 each)
	// counted every attempt, refused dials during the outage included,
	// which the broker never sees.
	assert.Greater(t, r.Attempts.Total, r.Broker.Arrivals.Count)
	assert.EqualValues(t, r.Attempts.Total, r.Fleet.Arrivals.Count, "the children's attempts are the fleet's")
	require.NotNil(t, r.Telemetry)
	assert.Positive(t, r.Telemetry.Enqueued)
	assert.Equal(t, int(r.Telemetry.Enqueued), r.Telemetry.ReceivedUnique)
	assert.Zero(t, r.Telemetry.Lost)
}

// A TLS fleet too large for one process: the children issue their devices'
// certificates from the broker's CA, and every handshake is counted.
func TestTLSFleetBeyondOneProcessRunsInChildren(t *testing.T) {
	t.Setenv("HERDGUARD_DEVICESIM_CHILD", "1")
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "-transport", "tls", "-devices", "60", "-tcp-per-process", "30",
		"-scenario", "drop-all", "-policy", "full", "-time-scale", "20", "-out", dir}, noenv, nil, &out, &out)
	servedOrBound(t, err, out.String())
	r, err := report.ReadReport(dir)
	require.NoError(t, err)
	assert.Equal(t, "tls", r.Transport)
	assert.True(t, r.Recovery.AllRecovered)
	require.NotNil(t, r.TLS)
	require.NotNil(t, r.Broker)
	assert.EqualValues(t, r.Broker.Arrivals.Count, r.TLS.Handshakes, "one handshake a connection that reached the broker")
	// One reconnect a device after a drop-all; in real time a busy host can
	// make a handshake outlast its timeout, and the retry is one more.
	assert.GreaterOrEqual(t, r.TLS.Handshakes, int64(60), "a drop-all: every device reconnected through a handshake")
}

// A fleet storming an external broker through the fault proxy, its agents
// in child processes: each child tells the run every event as it happens,
// so the run knows who is connected and who noticed a silent path, while
// this process holds only the proxy's two descriptors a device.
func TestProxiedFleetBeyondOneProcessRunsInChildren(t *testing.T) {
	t.Setenv("HERDGUARD_DEVICESIM_CHILD", "1")
	for _, scenario := range []string{"throttled-restart", "blackhole"} {
		t.Run(scenario, func(t *testing.T) {
			m := mosquittotest.Start(t, "")
			dir := t.TempDir()
			var out bytes.Buffer
			err := run(context.Background(), []string{"run", "-broker", m.URL(), "-devices", "300", "-tcp-per-process", "100",
				"-scenario", scenario, "-admit-rate", "500", "-admit-burst", "25", "-policy", "fleet-safe", "-time-scale", "10", "-out", dir},
				noenv, nil, &out, &out)
			servedOrBound(t, err, out.String())
			r, err := report.ReadReport(dir)
			require.NoError(t, err)
			assert.Equal(t, 3, r.Host.AgentProcesses, "three children of 100 devices")
			assert.True(t, r.Recovery.AllRecovered)
			require.NotNil(t, r.Broker)
			require.NotNil(t, r.Proxy)
			assert.Equal(t, "proxy", r.Broker.MeasuredAt)
			assert.GreaterOrEqual(t, r.Proxy.Answered, 300, "every device came back through the proxy")
			assert.EqualValues(t, r.Attempts.Total, r.Fleet.Arrivals.Count, "the children's attempts reached the run as they happened")
			assert.GreaterOrEqual(t, r.Attempts.Total, int64(r.Proxy.Admitted))
			// mosquitto saw the boot and every connection the proxy saw it
			// answer (one a loaded mosquitto never took from its backlog
			// before its device's 1 s timeout is let through, not answered)
			assert.NoError(t, m.AwaitAccepted(300+r.Proxy.Answered), "mosquitto logged %d", m.Accepted())
			switch scenario {
			case "throttled-restart":
				assert.Positive(t, r.Proxy.Refused)
			case "blackhole":
				require.NotNil(t, r.Noticed)
				assert.Equal(t, 300, r.Noticed.Devices+r.Noticed.AtEnd, "every device's loss reached the run")
			}
		})
	}
}

func delays(t *testing.T, args ...string) string {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append([]string{"delays"}, args...), noenv, nil, &out, &out))
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

// -cpuprofile before a command profiles it (make pgo's profiles), and the
// command does what it does without one.
func TestACommandProfiledWritesItsProfile(t *testing.T) {
	for _, flag := range []string{"-cpuprofile", "--cpuprofile="} {
		path := filepath.Join(t.TempDir(), "cpu.prof")
		args := []string{flag, path}
		if strings.HasSuffix(flag, "=") {
			args = []string{flag + path}
		}
		var out bytes.Buffer
		args = append(args, "delays", "-policy", "iotcore", "-attempts", "3", "-samples", "4", "-seed", "7")
		require.NoError(t, run(context.Background(), args, noenv, nil, &out, &out))
		assert.Equal(t, delays(t, "-policy", "iotcore", "-attempts", "3", "-samples", "4", "-seed", "7"), out.String())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Greater(t, len(b), 2)
		assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a profile is gzipped")
	}
	var out bytes.Buffer
	assert.ErrorContains(t, run(context.Background(), []string{"-cpuprofile"}, noenv, nil, &out, &out), "needs a file")
	assert.ErrorContains(t, run(context.Background(), []string{"-cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir")}, noenv, nil, &out, &out), "-cpuprofile")
}

func TestCommandErrors(t *testing.T) {
	var out bytes.Buffer
	assert.Error(t, run(context.Background(), nil, noenv, nil, &out, &out))
	assert.Error(t, run(context.Background(), []string{"fly"}, noenv, nil, &out, &out))
	assert.ErrorContains(t, run(context.Background(), []string{"delays", "-policy", "hope"}, noenv, nil, &out, &out), "unknown policy")
	assert.Error(t, run(context.Background(), []string{"run", "-devices", "0"}, noenv, nil, &out, &out))
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-admit-mode", "maybe"}, noenv, nil, &out, &out), "-admit-mode")
	assert.Error(t, run(context.Background(), []string{"run", "-admit-rate", "-1"}, noenv, nil, &out, &out))
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-shard", "3/2"}, noenv, nil, &out, &out), "-shard")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-shards", "4"}, noenv, nil, &out, &out), "JOB_COMPLETION_INDEX")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-shards", "4"}, func(string) string { return "1" }, nil, &out, &out),
		"external broker", "a shard needs -broker")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-scenario", "observe"}, noenv, nil, &out, &out), "-broker")
	assert.ErrorContains(t, run(context.Background(), []string{"run", "-broker", "tcp://127.0.0.1:1883,127.0.0.1:1884"}, noenv, nil, &out, &out),
		`broker "127.0.0.1:1884": the fault proxy takes`, "the second of an external cluster's nodes")
	assert.Error(t, run(context.Background(), []string{"merge"}, noenv, nil, &out, &out))
}

func TestHelpListsRunFlags(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help", "run"}, noenv, nil, &out, &out))
	for _, f := range []string{"-engine", "-devices", "-scenario", "-policy", "-max-backoff", "-retry-cap", "-outage", "-time-scale", "-seed", "-out",
		"-admit-rate", "-admit-burst", "-admit-mode", "-compare", "-transport", "-broker", "-flap", "-retry-after", "-duration",
		"-shard", "-shards", "-telemetry", "paho-default", "config-outage", "observe", "flapping"} {
		assert.Contains(t, out.String(), f)
	}
}

// Every command's help starts with its modes, so that a capability is
// found from the help: grid's names -mix, run's its exit statuses.
func TestEveryCommandsHelpListsItsModes(t *testing.T) {
	for cmd, want := range map[string][]string{
		"run":       {"usage: devicesim run", "devicesim run -f STORM.yaml", "-engine virtual", "-shards N", "3 the host bound it"},
		"grid":      {"usage: devicesim grid", "devicesim grid -mix fleet-safe", "-mqtt 5,5-deaf", "-full", "-mix string"},
		"judge":     {"usage: devicesim judge"},
		"merge":     {"usage: devicesim merge -out DIR SHARD_DIR..."},
		"soak":      {"usage: devicesim soak"},
		"calibrate": {"usage: devicesim calibrate"},
		"delays":    {"usage: devicesim delays"},
	} {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"help", cmd}, noenv, nil, &out, &out), cmd)
		for _, w := range want {
			assert.Contains(t, out.String(), w, cmd)
		}
		assert.Contains(t, out.String(), "flags:\n", cmd)
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"grid", "-mix", "fleet-safe", "-h"}, noenv, nil, &out, &out))
	assert.Contains(t, out.String(), "usage: devicesim grid -mix POLICY")
	assert.Contains(t, out.String(), "-peak-bound")
}

// A run's output directory may be shared: links planted where its files
// go, the streamed events.csv and grid's and plan's outputs included, are
// replaced and never written through.
func TestOutputsWriteThroughNoPlantedLink(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		files []string
	}{
		{[]string{"run", "-engine", "virtual", "-devices", "50", "-policy", "full"},
			[]string{"events.csv", "report.json", "report.html", "arrivals.svg"}},
		{[]string{"deploy", "-f", "../../deploy/storm.yaml", "-image", "i"},
			[]string{"job.yaml", "kustomization.yaml"}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			dir, victims := t.TempDir(), t.TempDir()
			for _, name := range tc.files {
				victim := filepath.Join(victims, name)
				require.NoError(t, os.WriteFile(victim, []byte("not yours"), 0o600))
				require.NoError(t, os.Symlink(victim, filepath.Join(dir, name)))
			}
			var out bytes.Buffer
			require.NoError(t, run(context.Background(), append(tc.args, "-out", dir), noenv, nil, &out, &out), out.String())
			for _, name := range tc.files {
				b, err := os.ReadFile(filepath.Join(victims, name))
				require.NoError(t, err)
				assert.Equal(t, "not yours", string(b), "%s: written through the link", name)
				fi, err := os.Lstat(filepath.Join(dir, name))
				require.NoError(t, err)
				assert.True(t, fi.Mode().IsRegular(), "%s is the run's own file", name)
			}
		})
	}
}

// -compare takes policy specs whose own parameters are comma-separated, as
// -policies does: "full:guard=4,iotcore:base=2s,jitter=4s" is two.
func TestCompareTakesSpecsWithTheirParameters(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	require.NoError(t, run(context.Background(), []string{"run", "-engine", "virtual", "-devices", "200",
		"-compare", "full:guard=4,iotcore:base=2s,jitter=4s", "-out", dir}, noenv, nil, &out, &out), out.String())
	assert.Regexp(t, `\nfull:guard=4 +\d`, out.String())
	assert.Regexp(t, `\niotcore:base=2s,jitter=4s +\d`, out.String())
	for _, policy := range []string{"full:guard=4", "iotcore:base=2s,jitter=4s"} {
		_, err := os.Stat(filepath.Join(dir, policy, "report.json"))
		assert.NoError(t, err, "%s has a directory of its own", policy)
	}
}
