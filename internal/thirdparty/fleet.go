package thirdparty

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herdguard/herdguard/internal/waitfor"
)

// ErrExited is wrapped by Await's error when the fleet's process has ended:
// the clients are gone, and the condition can no longer come true.
var ErrExited = errors.New("thirdparty: fleet process exited")

// Jitter replaces a client's own reconnect waits with full jitter: the wait
// before the n-th reconnect attempt since the client's last CONNACK 0 (n
// from 0) is U(0, min(Cap, Base·2^n)). Client i draws from its own generator,
// seeded by Seed and i. The zero Jitter leaves each client its own schedule.
// A Jitter is a plain value, safe to share.
type Jitter struct {
	Base, Cap time.Duration // Base > 0 and Cap >= Base, or both zero
	Seed      uint64        // below 2^53: node reads it as a double
}

// FullJitter is the jitter the storm tests add: 1 s doubling to a 30 s cap,
// the ceilings paho-mqtt for Python would wait, up to 30 s.
var FullJitter = Jitter{Base: time.Second, Cap: 30 * time.Second, Seed: 1}

// Options are what a fleet may be told besides its broker and size. The
// zero Options give each client its own reconnect and the library's
// prefix.
type Options struct {
	Jitter Jitter
	// Prefix starts each client ID, the client's index following it; ""
	// is the library's own: "py-", "js-" or "go-". Two fleets of one library
	// against one broker need two prefixes, or the broker takes each
	// session over from its namesake.
	Prefix string
}

// Spec is what a fleet process is told, as JSON in its first argument: the
// contract between this package and the scripts in testdata and
// ./pahogofleet. Durations travel as nanoseconds.
type Spec struct {
	Host       string        `json:"host"`
	Port       int           `json:"port"`
	N          int           `json:"n"`
	Prefix     string        `json:"prefix"`
	Keepalive  time.Duration `json:"keepalive_ns"`
	JitterBase time.Duration `json:"jitter_base_ns"` // 0: the client's own reconnect
	JitterCap  time.Duration `json:"jitter_cap_ns"`
	Seed       uint64        `json:"seed"`
}

// Keepalive is every client's MQTT keepalive.
const Keepalive = 30 * time.Second

// Counts are a fleet's sessions as its clients reported them. The zero
// value counts nothing; it is a plain value.
type Counts struct {
	Connected int // clients in a session now
	Connects  int // sessions begun (CONNACK 0) since the start
	Losses    int // sessions ended since the start
}

// Fleet is a running fleet of one third-party client library: one process,
// n clients. Its methods are safe for concurrent use. Make one with
// StartPahoPython, StartMQTTJS or StartPahoGo; the test's cleanup stops it.
type Fleet struct {
	tb     testing.TB
	client string
	prefix string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{} // closed once the process ended and its output was read
	stop   sync.Once

	mu      sync.Mutex
	net     map[string]int // per client: connects - losses
	counts  Counts
	ended   bool  // the process has exited
	exitErr error // its exit, nil for status 0
	killed  bool
	stderr  []string // its last lines
	changed waitfor.Broadcast
}

//go:embed testdata/pahopython_fleet.py
var pahoPythonScript []byte

//go:embed testdata/mqttjs_fleet.js
var mqttJSScript []byte

// python is the interpreter that sees Debian's python3-paho-mqtt.
const python = "/usr/bin/python3"

// StartPahoPython starts n paho-mqtt 1.6.1 clients in one Python process
// against broker (host:port). Each reconnects on its own, 1, 2, 4 ... s
// doubling to 120 s (reconnect_delay_set(1, 120)): its k-th attempt after a
// loss comes 2^k - 1 s after it, k from 1. With o.Jitter each wait is
// instead drawn below paho's own: reconnect_delay_set(Base, Cap), and
// _reconnect_wait overridden to sleep U(0, d).
func StartPahoPython(tb testing.TB, broker string, n int, o Options) *Fleet {
	tb.Helper()
	spec := newSpec(tb, "py-", broker, n, o)
	out, err := exec.Command(python, "-c", "import paho.mqtt; print(paho.mqtt.__version__)").Output()
	if v := strings.TrimSpace(string(out)); err != nil || !strings.HasPrefix(v, "1.6.") {
		missing(tb, fmt.Sprintf("paho-mqtt 1.6 for %s (found %q, %v)", python, v, err), "apt-get install python3-paho-mqtt")
	}
	script := filepath.Join(tb.TempDir(), "pahopython_fleet.py")
	if err := os.WriteFile(script, pahoPythonScript, 0o644); err != nil {
		tb.Fatal(err)
	}
	return start(tb, "paho-mqtt 1.6 (Python)", spec, func(spec string) *exec.Cmd {
		return exec.Command(python, script, spec)
	})
}

// StartMQTTJS starts n MQTT.js 5 clients in one node process against broker
// (host:port). Each reconnects on its own, every 1 s (reconnectPeriod 1000):
// its k-th attempt after a loss comes about k s after it. With o.Jitter,
// client.options.reconnectPeriod, which MQTT.js reads as it sets up each
// reconnect, holds a fresh draw.
func StartMQTTJS(tb testing.TB, broker string, n int, o Options) *Fleet {
	tb.Helper()
	spec := newSpec(tb, "js-", broker, n, o)
	dir := os.Getenv("HERDGUARD_MQTTJS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "herdguard", "mqttjs")
	}
	pkg := filepath.Join(dir, "node_modules", "mqtt")
	install := "npm ci --prefix " + dir + " with internal/thirdparty/testdata/mqttjs's package files in it"
	node, err := exec.LookPath("node")
	if err != nil {
		missing(tb, "node", "apt-get install nodejs npm")
	}
	var manifest struct{ Version string }
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &manifest)
	}
	if err != nil || !strings.HasPrefix(manifest.Version, "5.") {
		missing(tb, fmt.Sprintf("MQTT.js 5 in %s (found %q, %v)", pkg, manifest.Version, err), install)
	}
	script := filepath.Join(tb.TempDir(), "mqttjs_fleet.js")
	if err := os.WriteFile(script, mqttJSScript, 0o644); err != nil {
		tb.Fatal(err)
	}
	return start(tb, "MQTT.js "+manifest.Version, spec, func(spec string) *exec.Cmd {
		return exec.Command(node, script, spec, pkg)
	})
}

// StartPahoGo starts n paho.mqtt.golang v1.5.1 clients in one process (go
// run ./pahogofleet: cached after the first build) against broker
// (host:port). Each reconnects on its own (AutoReconnect, ConnectRetry,
// MaxReconnectInterval 10 min): its first attempt after a loss at once,
// then 1, 2, 4 ... s apart, so 0, 1, 3, 7, 15 ... s after the loss. With
// o.Jitter paho's own sleeps are off (MaxReconnectInterval 0) and each
// attempt waits its draw first.
func StartPahoGo(tb testing.TB, broker string, n int, o Options) *Fleet {
	tb.Helper()
	spec := newSpec(tb, "go-", broker, n, o)
	goTool, err := exec.LookPath("go")
	if err != nil {
		missing(tb, "the go command", "a Go toolchain on PATH")
	}
	return start(tb, "paho.mqtt.golang v1.5.1", spec, func(spec string) *exec.Cmd {
		return exec.Command(goTool, "run", "github.com/herdguard/herdguard/internal/thirdparty/pahogofleet", spec)
	})
}

// missing skips the test, or fails it where HERDGUARD_REQUIRE_THIRDPARTY is
// set (CI).
func missing(tb testing.TB, what, install string) {
	tb.Helper()
	if os.Getenv("HERDGUARD_REQUIRE_THIRDPARTY") != "" {
		tb.Fatalf("%s is required here (.ci/run installs it: %s) but missing", what, install)
	}
	tb.Skipf("%s missing (%s): skipping", what, install)
}

// newSpec checks a fleet's broker, size and options before anything starts.
func newSpec(tb testing.TB, prefix, broker string, n int, o Options) Spec {
	tb.Helper()
	j := o.Jitter
	if j.Base < 0 || j.Cap < j.Base || (j.Base == 0 && j.Cap != 0) {
		tb.Fatalf("thirdparty: invalid jitter %+v: Base > 0 and Cap >= Base, or both zero", j)
	}
	host, port, err := net.SplitHostPort(broker)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1 {
		tb.Fatalf("thirdparty: broker %q, %d clients: a host:port and at least one client", broker, n)
	}
	if o.Prefix != "" {
		prefix = o.Prefix
	}
	return Spec{Host: host, Port: p, N: n, Prefix: prefix, Keepalive: Keepalive,
		JitterBase: j.Base, JitterCap: j.Cap, Seed: j.Seed}
}

// start runs the fleet process command makes, given the spec as JSON.
func start(tb testing.TB, client string, spec Spec, command func(spec string) *exec.Cmd) *Fleet {
	tb.Helper()
	arg, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	f := &Fleet{tb: tb, client: client, prefix: spec.Prefix, exited: make(chan struct{}), net: make(map[string]int)}
	f.cmd = command(string(arg))
	// Its own group: go run's child is killed with it.
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	f.cmd.Stderr = stderrTail{f}
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		tb.Fatalf("thirdparty: starting %s: %v", client, err)
	}
	go f.read(stdout)
	tb.Cleanup(f.Stop)
	return f
}

// read takes the fleet's events until its process ends.
func (f *Fleet) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		event, id, ok := strings.Cut(sc.Text(), " ")
		if !ok || (event != "connected" && event != "lost") {
			continue
		}
		f.mu.Lock()
		// The Go fleet reports from goroutines of their own, so a loss can
		// come before the connect it ends: count, not toggle.
		was := f.net[id] > 0
		if event == "connected" {
			f.net[id]++
			f.counts.Connects++
		} else {
			f.net[id]--
			f.counts.Losses++
		}
		if now := f.net[id] > 0; now != was {
			if now {
				f.counts.Connected++
			} else {
				f.counts.Connected--
			}
		}
		f.changed.Notify()
		f.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, stdout)
	err := f.cmd.Wait()
	f.mu.Lock()
	f.ended, f.exitErr = true, err
	f.changed.Notify()
	f.mu.Unlock()
	close(f.exited)
}

// Client names the library the fleet runs, with its version.
func (f *Fleet) Client() string { return f.client }

// Prefix starts each of the fleet's client IDs; the index follows it.
func (f *Fleet) Prefix() string { return f.prefix }

// Counts returns the fleet's sessions so far.
func (f *Fleet) Counts() Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// Await blocks until cond holds for the fleet's counts, ctx ends
// (ctx.Err()), or the fleet's process ends (an error wrapping ErrExited).
// cond runs with the fleet locked after every event: it must be quick and
// must not call the Fleet.
func (f *Fleet) Await(ctx context.Context, cond func(Counts) bool) error {
	for {
		f.mu.Lock()
		if cond(f.counts) {
			f.mu.Unlock()
			return nil
		}
		if f.ended {
			err := fmt.Errorf("%w: %s (%v)\n%s", ErrExited, f.client, f.exitErr, strings.Join(f.stderr, "\n"))
			f.mu.Unlock()
			return err
		}
		next := f.changed.Next()
		f.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AwaitConnected is Await until n clients are in a session at once.
func (f *Fleet) AwaitConnected(ctx context.Context, n int) error {
	return f.Await(ctx, func(c Counts) bool { return c.Connected >= n })
}

// Stop disconnects the clients and ends the process: its stdin is closed,
// and it is killed if it has not exited 10 s later. A process that exited
// on its own before, or failed on the way out, fails the test. Stop runs at
// the test's cleanup; calling it earlier is allowed, and later calls do
// nothing.
func (f *Fleet) Stop() {
	f.stop.Do(func() {
		f.mu.Lock()
		early := f.ended
		f.mu.Unlock()
		_ = f.stdin.Close()
		select {
		case <-f.exited:
		case <-time.After(10 * time.Second):
			f.mu.Lock()
			f.killed = true
			f.mu.Unlock()
			_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
			<-f.exited
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case early:
			f.tb.Errorf("thirdparty: %s exited before its stop: %v\n%s", f.client, f.exitErr, strings.Join(f.stderr, "\n"))
		case f.killed:
			f.tb.Errorf("thirdparty: %s did not exit within 10 s of its stdin closing: killed\n%s",
				f.client, strings.Join(f.stderr, "\n"))
		case f.exitErr != nil:
			f.tb.Errorf("thirdparty: %s failed on its way out: %v\n%s", f.client, f.exitErr, strings.Join(f.stderr, "\n"))
		}
	})
}

// stderrTail keeps the last lines a fleet wrote on stderr for its errors.
type stderrTail struct{ f *Fleet }

const stderrLines = 40

func (s stderrTail) Write(b []byte) (int, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		s.f.stderr = append(s.f.stderr, line)
	}
	if over := len(s.f.stderr) - stderrLines; over > 0 {
		s.f.stderr = append(s.f.stderr[:0], s.f.stderr[over:]...)
	}
	return len(b), nil
}
