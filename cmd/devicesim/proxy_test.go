package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/testbroker"
)

// proxyRun runs devicesim proxy with args, and returns where its fleet
// connects (read from its output as a user would), its output, and its
// error once it ends.
func proxyRun(t *testing.T, args ...string) (addr string, out *strings.Builder, done <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	out = &strings.Builder{}
	errc, scanned := make(chan error, 1), make(chan struct{})
	go func() {
		err := run(context.Background(), append([]string{"proxy"}, args...), noenv, nil, pw, pw)
		pw.Close()
		<-scanned // out is whole, and no longer written, once done says so
		errc <- err
	}()
	addrs := make(chan string, 1)
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if a, ok := strings.CutPrefix(line, "node 0: the fleet connects to "); ok {
				addrs <- strings.TrimSuffix(strings.Fields(a)[0], ",")
			}
		}
	}()
	select {
	case addr = <-addrs:
	case err := <-errc:
		t.Fatalf("devicesim proxy ended first: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("devicesim proxy said nowhere to connect")
	}
	return addr, out, errc
}

// agentsAt starts n of the firmware's agents (the mission's formula)
// against addr, stopped when the test ends.
func agentsAt(t *testing.T, addr string, n int) {
	t.Helper()
	for i := range n {
		tm := device.DefaultTiming()
		tm.BootSpread = 200 * time.Millisecond
		a, err := device.New(device.Config{Broker: "tcp://" + addr, ClientID: fmt.Sprintf("dev-%d", i), Timing: &tm,
			Source: rand.NewPCG(uint64(i), 2)})
		require.NoError(t, err)
		require.NoError(t, a.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = a.Stop(ctx)
		})
	}
}

// devicesim proxy, pointed at by a fleet it did not start, strikes it
// once every session is up, sees it back, and writes what run writes and
// each device's attempts and waits.
func TestProxyStormsAFleetItDidNotStart(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	dir := t.TempDir()
	addr, out, done := proxyRun(t, "-broker", strings.TrimPrefix(b.URL(), "tcp://"), "-await-sessions", "20", "-outage", "2s",
		"-identify", "-out", dir)
	agentsAt(t, addr, 20)
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the storm did not end")
	}
	assert.Contains(t, out.String(), "striking once 20 sessions are up")
	r, err := report.ReadReport(dir)
	require.NoError(t, err)
	assert.Equal(t, 20, r.Devices)
	assert.True(t, r.Recovery.AllRecovered)
	devices, err := os.ReadFile(filepath.Join(dir, "devices.csv"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(devices)), "\n")
	require.Len(t, lines, 21)
	assert.Equal(t, "client_id,attempts,last_admitted_s,waits_s", lines[0])
	assert.Regexp(t, `^dev-0,\d+,\d+\.\d{3},[\d. ]+$`, lines[1])
}

// What the proxy cannot do is refused before it listens, naming why.
func TestProxyRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-await-sessions", "1"}, "a broker to stand in front of is required"},
		{[]string{"-broker", "127.0.0.1:1"}, "nothing would start the storm"},
		{[]string{"-broker", "127.0.0.1:1", "-await-sessions", "1", "-scenario", "boot-storm"}, "boots a fleet of devicesim's own agents"},
		{[]string{"-broker", "127.0.0.1:1", "-control", "0.0.0.0:0"}, "needs a bearer token"},
		{[]string{"-broker", "127.0.0.1:1", "-await-sessions", "1", "-outage", "2000000h"}, "-outage 2000000h0m0s: at most 24h0m0s"},
		{[]string{"-broker", "127.0.0.1:1", "-await-sessions", "1", "-disrupt-at", "+30s"}, "strikes at an instant"},
		{[]string{"-broker", "127.0.0.1:1", "-await-sessions", "1", "-predict-devices", "1000"}, "needs -admit-rate R"},
	} {
		err := run(context.Background(), append([]string{"proxy"}, tc.args...), noenv, nil, io.Discard, io.Discard)
		require.Error(t, err, "%v", tc.args)
		assert.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
