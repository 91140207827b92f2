// Package mosquittotest runs mosquitto, a real third-party broker, on a
// loopback port for tests and benchmarks, and counts the connections it
// logs: an independent count of what reached the broker.
package mosquittotest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/waitfor"
)

// Broker is one mosquitto process; Stop and Start restart it on its port.
// Start and Stop belong to the test's goroutine; Accepted and AwaitAccepted
// may be called from any. Make one with Start.
type Broker struct {
	tb   testing.TB
	bin  string
	conf string
	log  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}

	// connections counts mosquitto's own "New connection from" lines: every
	// TCP connection it accepted, across restarts.
	mu          sync.Mutex
	connections int
	changed     waitfor.Broadcast
}

// Start runs mosquitto with extra lines for its listener (TLS files, say)
// and stops it when the test ends. Without mosquitto installed the test is
// skipped, or fails where HERDGUARD_REQUIRE_MOSQUITTO is set (CI).
func Start(tb testing.TB, listener string) *Broker {
	tb.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/mosquitto")
	}
	if err != nil {
		if os.Getenv("HERDGUARD_REQUIRE_MOSQUITTO") != "" {
			tb.Fatal("mosquitto is required here (.ci/run installs the Debian package) but not installed")
		}
		tb.Skip("mosquitto not installed (apt-get install mosquitto): skipping")
	}
	dir := tb.TempDir()
	conf, logFile := filepath.Join(dir, "mosquitto.conf"), filepath.Join(dir, "mosquitto.log")
	if os.Geteuid() == 0 {
		// As root (CI) mosquitto drops to its own user, which could read
		// no key and write no log in the test's directory.
		listener += "user root\n"
	}
	b := &Broker{tb: tb, bin: bin, conf: conf, log: logFile}
	tb.Cleanup(b.Stop) // first: a start that fails part-way is stopped too
	// A free port, found by listening on it and letting go, may be taken
	// by another test before mosquitto binds it: then another port.
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		port := l.Addr().(*net.TCPAddr).Port
		require.NoError(tb, l.Close())
		// Its log as a package installs it (log_dest file, the default Unix
		// seconds prefix), and on stderr for the counts.
		require.NoError(tb, os.WriteFile(conf, []byte(fmt.Sprintf(
			"listener %d 127.0.0.1\n%sallow_anonymous true\nmax_connections -1\nlog_dest stderr\nlog_dest file %s\nlog_type information\nlog_type notice\n",
			port, listener, logFile)), 0o644))
		b.addr = fmt.Sprintf("127.0.0.1:%d", port)
		said, err := b.start()
		switch {
		case err == nil:
			return b
		case try < 5 && strings.Contains(said, "Address already in use"):
			continue
		}
		tb.Fatalf("%v: %s", err, said)
	}
}

// Addr is mosquitto's host:port.
func (b *Broker) Addr() string { return b.addr }

// LogFile is mosquitto's own log file, as it writes it: what a user would
// hand devicesim judge.
func (b *Broker) LogFile() string { return b.log }

// URL is mosquitto's tcp:// URL.
func (b *Broker) URL() string { return "tcp://" + b.addr }

// Accepted is how many connections mosquitto has logged so far.
func (b *Broker) Accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connections
}

// AwaitAccepted waits until mosquitto has logged n connections. The bound
// is generous. On a host busy with other work (CI running every package
// at once under -race), mosquitto's accept loop and its log can trail the
// proxy by well over 10 s. The wait ends as soon as the count is reached.
func (b *Broker) AwaitAccepted(n int) error {
	return waitfor.Until(&b.mu, &b.changed, time.Minute, func() bool { return b.connections >= n })
}

// Start runs mosquitto and returns once it says it is running.
func (b *Broker) Start() {
	b.tb.Helper()
	if said, err := b.start(); err != nil {
		b.tb.Fatalf("%v: %s", err, said)
	}
}

// start runs mosquitto and returns once it says it is running, or what it
// said before it exited.
func (b *Broker) start() (said string, err error) {
	cmd := exec.Command(b.bin, "-c", b.conf)
	stderr, err := cmd.StderrPipe()
	require.NoError(b.tb, err)
	require.NoError(b.tb, cmd.Start())
	done := make(chan struct{})
	b.cmd, b.done = cmd, done
	running := make(chan struct{})
	var early strings.Builder // what it says before it runs
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said {
				early.WriteString(sc.Text() + "\n")
			}
			if strings.Contains(sc.Text(), "New connection from") {
				b.mu.Lock()
				b.connections++
				b.changed.Notify()
				b.mu.Unlock()
			}
			if strings.Contains(sc.Text(), "running") && !said {
				close(running)
				said = true
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-running:
		return "", nil
	case <-done:
		b.cmd = nil
		return early.String(), errors.New("mosquitto exited at start")
	case <-time.After(10 * time.Second):
		return "", errors.New("mosquitto did not start within 10 s")
	}
}

// Stop ends mosquitto (SIGINT, then SIGKILL after 10 s).
func (b *Broker) Stop() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
}
