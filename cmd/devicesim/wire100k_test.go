package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/hostload"
	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/report"
)

var (
	wire100k    = flag.Bool("wire.100k", false, "make wire-100k: examples/wire-100k/storm.yaml, sixteen shards against six mosquittos")
	wireStorm   = flag.String("wire.storm", "../../examples/wire-100k/storm.yaml", "with -wire.100k, the storm file")
	wire100kOut = flag.String("wire.out", "", "with -wire.100k, where the shards' reports and logs go (a temporary directory if unset)")
)

// make wire-100k: a hundred thousand real MQTT sessions on this machine.
// The storm file's sixteen shards run as sixteen devicesim processes,
// each with its devices and their proxies, against six mosquittos as one
// cluster's nodes, through one throttled restart. Every device must
// come back, and shard 0's merged report speaks for the whole fleet; a
// shard the host bound (two cores for all of it) says so in its log. The
// peak resident memory of every process the run started (shards, their
// children, the mosquittos) is sampled each second and summed.
func TestHundredThousandRealSessions(t *testing.T) {
	if !*wire100k {
		t.Skip("make wire-100k runs it (-wire.100k)")
	}
	const shards, nodes = 16, 6
	env := append(os.Environ(), "HERDGUARD_DEVICESIM_CHILD=1")
	for k := range nodes {
		env = append(env, fmt.Sprintf("MQTT_NODE_%d=%s", k, mosquittotest.Start(t, "").URL()))
	}
	dir := *wire100kOut
	if dir == "" {
		dir = t.TempDir()
	}
	peak := sampleMemory(t)
	storm, err := filepath.Abs(*wireStorm)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, shards)
	for i := range shards {
		out := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		require.NoError(t, os.MkdirAll(out, 0o755))
		log, err := os.Create(out + ".log")
		require.NoError(t, err)
		defer log.Close()
		cmd := exec.Command(os.Args[0], "run", "-f", storm, "-merge", "-out", out)
		cmd.Env, cmd.Stdout, cmd.Stderr = append(env, "SHARD="+strconv.Itoa(i)), log, log
		require.NoError(t, cmd.Start())
		wg.Go(func() { errs[i] = cmd.Wait() })
	}
	wg.Wait()
	total, most := peak()
	for i, err := range errs {
		if err == nil {
			continue
		}
		// A shard whose host was late says so and fails its expectations:
		// its report stands, and says it. Any other end is a failure.
		log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("shard-%d.log", i)))
		if bound := "the host bound this run"; strings.Contains(string(log), bound) {
			t.Logf("shard %d: %s", i, strings.TrimSpace(string(log)))
			continue
		}
		t.Errorf("shard %d: %v: %s", i, err, log)
	}
	b, err := os.ReadFile(filepath.Join(dir, "merged", "report.json"))
	require.NoError(t, err)
	var r report.Report
	require.NoError(t, json.Unmarshal(b, &r))
	var summary bytes.Buffer
	r.Summary(&summary)
	t.Logf("merged report:\n%s", summary.String())
	t.Logf("peak resident memory of every process the run started, summed: %.2f GiB; the largest process's: %.0f MiB",
		float64(total)/(1<<30), float64(most)/(1<<20))
	assert.Equal(t, devicesOf(t, storm), r.Devices)
	assert.True(t, r.Recovery.AllRecovered, "every device back")
}

// sampleMemory sums, each second until the test ends, the resident memory
// of every process descended from this one, and returns a function that
// gives the highest sum seen and the largest single process.
func sampleMemory(t *testing.T) func() (total, largest uint64) {
	var mu sync.Mutex
	var top, big uint64
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			sum, one := descendantsRSS(os.Getpid())
			mu.Lock()
			top, big = max(top, sum), max(big, one)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	return func() (uint64, uint64) {
		mu.Lock()
		defer mu.Unlock()
		return top, big
	}
}

// descendantsRSS is the summed VmRSS of root's descendants, and the
// largest one's, in bytes, from /proc.
func descendantsRSS(root int) (sum, largest uint64) {
	entries, _ := os.ReadDir("/proc")
	parent, rss := map[int]int{}, map[int]uint64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: the comm may hold spaces, so after ")"
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		rss[pid], _ = hostload.ResidentOf(e.Name())
	}
	for pid, r := range rss {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				sum, largest = sum+r, max(largest, r)
				break
			}
		}
	}
	return sum, largest
}

// devicesOf is the fleet the storm file at path names.
func devicesOf(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "devices:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("%s names no devices", path)
	return 0
}
