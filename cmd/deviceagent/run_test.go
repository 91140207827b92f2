package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/internal/waitfor"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

const bound = 20 * time.Second

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	if os.Getenv("DEVICEAGENT_RUN_MAIN") == "1" { // the SIGTERM test runs the real main here
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// syncBuffer collects log output and lets a test wait for a line.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed waitfor.Broadcast
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changed.Notify()
	return s.b.Write(p)
}

// await blocks until the output contains substr, or fails after bound.
func (s *syncBuffer) await(t *testing.T, substr string) {
	t.Helper()
	if err := waitfor.Until(&s.mu, &s.changed, bound, func() bool { return strings.Contains(s.b.String(), substr) }); err != nil {
		t.Fatalf("log never said %q:\n%s", substr, s.String())
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func noEnv(string) string { return "" }

func startRun(t *testing.T, args []string) (cancel func() error, logs *syncBuffer) {
	ctx, stop := context.WithCancel(context.Background())
	logs = &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv, logs) }()
	return func() error {
		stop()
		select {
		case err := <-done:
			return err
		case <-time.After(bound):
			t.Fatal("run did not return after cancel")
			return nil
		}
	}, logs
}

func TestRunPublishesHeartbeatAndStopsCleanly(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	stop, logs := startRun(t, []string{"-broker", b.URL(), "-client-id", "dev-7", "-heartbeat", "20ms", "-boot-spread", "1ms"})
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 3 }))
	require.NoError(t, stop())
	pubs := b.Recorder().Publishes()
	assert.Equal(t, "devices/dev-7/heartbeat", pubs[0].Topic)
	for i, p := range pubs[:3] {
		env, err := publisher.DecodeEnvelope(p.Payload)
		require.NoError(t, err, "heartbeats travel in the publisher's envelope")
		assert.Equal(t, uint64(i+1), env.Seq)
	}
	assert.Contains(t, logs.String(), "stopped")
}

// The reference firmware speaks MQTT 5 when told to, heartbeats and all.
func TestRunSpeaksMQTT5(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	stop, logs := startRun(t, []string{"-broker", b.URL(), "-client-id", "dev-5", "-heartbeat", "20ms", "-boot-spread", "1ms",
		"-mqtt-version", "5"})
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 2 }))
	require.NoError(t, stop())
	assert.Contains(t, logs.String(), "config.mqtt=5")
	for _, a := range b.Recorder().Attempts() {
		assert.Equal(t, byte(5), a.Protocol)
	}
}

func TestRunWithMutualTLSFromFiles(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TLS, MutualTLS: true})
	require.NoError(t, err)
	defer b.Close()
	files, err := b.WriteClientFiles(t.TempDir(), "dev-tls")
	require.NoError(t, err)
	args := []string{"-broker", b.URL(), "-client-id", "dev-tls", "-heartbeat", "20ms", "-boot-spread", "1ms",
		"-ca", files.CA, "-cert", files.Cert, "-key", files.Key}
	stop, logs := startRun(t, args)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 1 }))
	require.NoError(t, stop())
	assert.Contains(t, logs.String(), "client_certificate=true")

	// A key group or others may read is refused before anything
	// connects, unless a flag allows it, and then the log says so.
	require.NoError(t, os.Chmod(files.Key, 0o640))
	err = run(context.Background(), args, noEnv, &bytes.Buffer{})
	require.ErrorContains(t, err, "-key "+files.Key+" is mode 0640")
	assert.Equal(t, 1, b.Recorder().Counts().Attempts, "the refused run never connected")
	stop, logs = startRun(t, append(args, "-allow-open-secret-files"))
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Accepted >= 2 }))
	require.NoError(t, stop())
	assert.Contains(t, logs.String(), `level=WARN msg="-allow-open-secret-files: group or others may read these" device=dev-tls files=`+files.Key)
}

func TestRunAppliesAndStoresRemoteConfig(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	cs := configserver.NewServer()
	defer cs.Close()
	cs.SetConfig("dev-9", []byte(`{"heartbeat_interval":"5s","reconnect":{"base":"2s","jitter":"1s","max_backoff":"64s"}}`))
	dir := t.TempDir()
	stop, logs := startRun(t, []string{"-broker", b.URL(), "-client-id", "dev-9", "-boot-spread", "1ms",
		"-config-url", cs.DeviceURL("dev-9"), "-allow-plaintext", "-data-dir", dir})
	logs.await(t, "config applied")
	require.NoError(t, stop())
	stored, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	assert.Contains(t, string(stored), `"max_backoff":"64s"`)
	_, err = os.Stat(filepath.Join(dir, "queue.db"))
	assert.NoError(t, err, "the telemetry queue is durable under -data-dir")
}

func TestFlagErrorsNameTheFlag(t *testing.T) {
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"no broker":     {nil, nil, "-broker"},
		"no client id":  {[]string{"-broker", "tcp://x:1"}, nil, "-client-id"},
		"bad heartbeat": {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-heartbeat", "0s"}, nil, "-heartbeat"},
		"bad env":       {[]string{"-broker", "tcp://x:1", "-client-id", "a"}, map[string]string{"HERDGUARD_BOOT_SPREAD": "soon"}, "-boot-spread"},
		"bad level":     {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-log-level", "loud"}, nil, "-log-level"},
		// paho sends the keepalive in 16 bits: 65536s would arrive as 0.
		"keepalive over 16 bits": {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-keepalive", "65536s"}, nil, "from 1s to 65535s"},
		"keepalive of 200000h":   {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-keepalive", "200000h"}, nil, "from 1s to 65535s"},
		"max packet over 16MiB":  {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-max-packet", "16385KiB"}, nil, "-allow-large-packets"},
		"max packet over MQTT's": {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-max-packet", "256MiB", "-allow-large-packets"}, nil, "268435455 bytes"},
		"bad MQTT version":       {[]string{"-broker", "tcp://x:1", "-client-id", "a", "-mqtt-version", "3"}, nil, "-mqtt-version must be 3.1.1 or 5"},
		"half a cert":            {[]string{"-broker", "ssl://x:1", "-client-id", "a", "-cert", "c.pem"}, nil, "key"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), c.args, func(k string) string { return c.env[k] }, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// The bounds are inclusive, and what an error names as an example parses.
func TestSizesAndKeepaliveAtTheirBounds(t *testing.T) {
	for _, args := range [][]string{
		{"-keepalive", "65535s"}, {"-keepalive", "1s"}, {"-max-packet", "16MiB"},
		{"-max-packet", "268435455", "-allow-large-packets"}, {"-max-packet", "64"},
	} {
		_, err := parse(append([]string{"-broker", "tcp://x:1", "-client-id", "a"}, args...), noEnv, &bytes.Buffer{})
		assert.NoError(t, err, "%v", args)
	}
	var b byteSize
	err := b.Set("256MiB")
	require.Error(t, err)
	examples := regexp.MustCompile(`\d+(KiB|MiB)?`).FindAllString(err.Error(), -1)
	require.Len(t, examples, 5)
	for _, v := range examples {
		assert.NoError(t, b.Set(v), "the error names %s", v)
	}
}

func TestEnvironmentFallback(t *testing.T) {
	env := map[string]string{"HERDGUARD_BROKER": "tcp://b:1883", "HERDGUARD_CLIENT_ID": "env-dev", "HERDGUARD_HEARTBEAT": "1m"}
	o, err := parse(nil, func(k string) string { return env[k] }, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "tcp://b:1883", o.broker)
	assert.Equal(t, "env-dev", o.clientID)
	assert.Equal(t, time.Minute, o.heartbeat)
	o, err = parse([]string{"-client-id", "flag-dev"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "flag-dev", o.clientID, "a flag beats the environment")
}

// The formula's flags set the agent's policy, within the bounds a remote
// configuration is held to: neither a flag nor the environment can turn
// the jitter, or the backoff, off.
func TestTheFormulasFlagsSetThePolicyWithinTheFirmwaresBounds(t *testing.T) {
	base := []string{"-broker", "tcp://x:1", "-client-id", "a"}
	o, err := parse(append(base, "-reconnect-base", "2s", "-reconnect-jitter", "4s", "-max-backoff", "2m"), noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	_, cfg, err := newAgent(o, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Equal(t, reconnect.IoTCore{Base: 2 * time.Second, Jitter: 4 * time.Second, MaxBackoff: 2 * time.Minute}, cfg.Timing.Policy.Shape())
	assert.Equal(t, reconnect.RetryForever, cfg.Timing.Policy.Limits().MaxRetries)

	for _, args := range [][]string{{"-reconnect-jitter", "0s"}, {"-reconnect-base", "0s"}, {"-max-backoff", "1s"}, {"-reconnect-base", "1h"}} {
		_, err := parse(append(base, args...), noEnv, &bytes.Buffer{})
		assert.ErrorContains(t, err, "outside", "%v", args)
	}
	_, err = parse(base, envOf(map[string]string{"HERDGUARD_RECONNECT_JITTER": "0s"}), &bytes.Buffer{})
	assert.ErrorContains(t, err, "reconnect.jitter 0s outside")
}

func TestUsageGolden(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, noEnv, &out))
	golden := filepath.Join("testdata", "usage.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out.String())
}

// TestSIGTERMExitsCleanly runs the real main in a child process and stops it
// the way an init system does.
func TestSIGTERMExitsCleanly(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	// no arguments: TestMain runs main, configured by the environment
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DEVICEAGENT_RUN_MAIN=1", "HERDGUARD_BROKER="+b.URL(),
		"HERDGUARD_CLIENT_ID=dev-term", "HERDGUARD_HEARTBEAT=20ms", "HERDGUARD_BOOT_SPREAD=1ms")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 1 }))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		require.NoError(t, err, "exit status; stderr:\n%s", stderr.String())
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		t.Fatal("deviceagent ignored SIGTERM")
	}
	assert.True(t, strings.Contains(stderr.String(), "stopping"), stderr.String())
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Connected == 0 }))
}

// TestHeartbeatsQueuedDuringOutageSurviveRestart: the first run starts while
// the broker is down and is stopped; the second run, on the same -data-dir,
// delivers what the first one queued.
func TestHeartbeatsQueuedDuringOutageSurviveRestart(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	b.Faults().BeginOutage()
	dir := t.TempDir()
	args := []string{"-broker", b.URL(), "-client-id", "dev-q", "-heartbeat", "20ms", "-boot-spread", "1ms", "-data-dir", dir}
	stop, logs := startRun(t, args)
	logs.await(t, "connect failed") // the first heartbeat was queued before the first attempt
	require.NoError(t, stop())
	assert.Zero(t, b.Recorder().Counts().Publishes)

	require.NoError(t, b.Faults().EndOutage())
	stop, _ = startRun(t, args)
	defer func() { require.NoError(t, stop()) }()
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 1 }))
	env, err := publisher.DecodeEnvelope(b.Recorder().Publishes()[0].Payload)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), env.Seq, "the heartbeat queued while the broker was down came first")
}

// TestDamagedQueueIsMovedAsideAndReported: a queue file that is not a store
// is moved aside, said so in the log and in an event message, and the agent
// goes on with an empty queue.
func TestDamagedQueueIsMovedAsideAndReported(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("not a queue "), 3000)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queue.db"), garbage, 0o600))
	stop, logs := startRun(t, []string{"-broker", b.URL(), "-client-id", "dev-d", "-heartbeat", "1h", "-boot-spread", "1ms",
		"-data-dir", dir})
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 2 }))
	require.NoError(t, stop())
	assert.Contains(t, logs.String(), "telemetry queue was damaged")

	var event map[string]string
	for _, p := range b.Recorder().Publishes() {
		if p.Topic == "devices/dev-d/events" {
			env, err := publisher.DecodeEnvelope(p.Payload)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(env.Payload, &event))
		}
	}
	require.Equal(t, "telemetry-queue-damaged", event["event"], "the damage is reported to the fleet")
	kept, err := os.ReadFile(event["moved_to"])
	require.NoError(t, err)
	assert.Equal(t, garbage, kept, "moved aside, byte for byte")
}

// TestSharedDataDirIsAClearError: a second agent on a data directory one
// already uses fails at once with a clear error and changes nothing.
func TestSharedDataDirIsAClearError(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	args := []string{"-broker", b.URL(), "-client-id", "dev-s", "-heartbeat", "1h", "-boot-spread", "1ms", "-data-dir", dir}
	stop, _ := startRun(t, args)
	require.NoError(t, b.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Publishes >= 1 }))
	err = run(context.Background(), args, noEnv, &bytes.Buffer{})
	require.ErrorIs(t, err, publisher.ErrStoreInUse)
	assert.Contains(t, err.Error(), "in use by another process")
	require.NoError(t, stop())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "corrupt", "nothing moved aside")
	}
}

// startMain runs the real main in a child process (this test binary, which
// runs main when DEVICEAGENT_RUN_MAIN is set), configured by env. Under
// qemu-user without binfmt_misc an ARM test binary cannot exec itself, so it
// goes through qemu-arm-static explicitly. HERDGUARD_AGENT_UNDER, if set,
// is the command that runs the main instead (make arm-test: qemu-arm-static
// and the ARM build of this test binary), so that this test stays native
// and never forks inside the emulator, whose forks of a many-threaded
// program can hang before their exec (seen once in some fifteen CI runs).
func startMain(t *testing.T, stderr io.Writer, env ...string) *exec.Cmd {
	env = append(os.Environ(), append([]string{"DEVICEAGENT_RUN_MAIN=1"}, env...)...)
	cmd := exec.Command(os.Args[0])
	if under := strings.Fields(os.Getenv("HERDGUARD_AGENT_UNDER")); len(under) > 0 {
		cmd = exec.Command(under[0], under[1:]...)
	}
	cmd.Env, cmd.Stderr = env, stderr
	err := cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		qemu, lerr := exec.LookPath("qemu-arm-static")
		if lerr != nil {
			t.Skip("cannot re-exec the emulated test binary and qemu-arm-static is not on PATH")
		}
		cmd = exec.Command(qemu, os.Args[0])
		cmd.Env, cmd.Stderr = env, stderr
		err = cmd.Start()
	}
	require.NoError(t, err)
	return cmd
}

// TestSIGTERMMidConnectExitsZero: the broker accepts the TCP connection and
// never answers the CONNECT; SIGTERM must still end the agent cleanly
// (exit 0) within 5 s, not after the 10 s connect timeout.
func TestSIGTERMMidConnectExitsZero(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	var stderr syncBuffer
	cmd := startMain(t, &stderr, "HERDGUARD_BROKER=tcp://"+ln.Addr().String(), "HERDGUARD_CLIENT_ID=dev-silent",
		"HERDGUARD_BOOT_SPREAD=1ms")
	select {
	case c := <-accepted: // dialled: the CONNECT waits for a CONNACK that never comes
		defer c.Close()
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		t.Fatal("the agent never reached the silent broker")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	signalled := time.Now()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		require.NoError(t, err, "exit status; stderr:\n%s", stderr.String())
		t.Logf("exited %v after SIGTERM", time.Since(signalled))
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-waited
		t.Fatalf("deviceagent still running 5 s after SIGTERM mid-connect; stderr:\n%s", stderr.String())
	}
}
