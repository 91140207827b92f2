// Package rabbitmqtest runs RabbitMQ with its MQTT plugin, a second real
// third-party broker, for tests: a node of its own (its own name, data
// directory, log directory, Erlang cookie and ports, epmd included), so
// that it neither meets nor disturbs a RabbitMQ the machine runs.
package rabbitmqtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Options choose how the node logs.
type Options struct {
	// JSON writes the log with RabbitMQ's JSON formatter
	// (log.file.formatter = json) instead of its text one.
	JSON bool
}

// Broker is one RabbitMQ node. Start makes one and stops it when the test
// ends; its methods belong to the test's goroutine.
type Broker struct {
	tb       testing.TB
	dir      string
	node     string
	mqtt     string
	epmdPort int
	env      []string
	cmd      *exec.Cmd
	done     chan struct{}
}

// Server is where Debian's package (rabbitmq-server) installs the
// script that runs a node in the foreground as the user who calls it. The
// one on PATH (/usr/sbin) switches to the rabbitmq user, who could write
// nothing in a test's directory.
const Server = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// Start runs a node and returns once its MQTT listener serves. Without
// RabbitMQ installed the test is skipped, or fails where
// HERDGUARD_REQUIRE_RABBITMQ is set (CI).
func Start(tb testing.TB, o Options) *Broker {
	tb.Helper()
	if _, err := os.Stat(Server); err != nil {
		if os.Getenv("HERDGUARD_REQUIRE_RABBITMQ") != "" {
			tb.Fatal("RabbitMQ is required here (.ci/run installs the Debian package rabbitmq-server) but not installed")
		}
		tb.Skip("RabbitMQ not installed (apt-get install rabbitmq-server): skipping")
	}
	dir := tb.TempDir()
	b := &Broker{tb: tb, dir: dir, node: fmt.Sprintf("herdguard-%d@localhost", os.Getpid()), done: make(chan struct{})}
	mqttPort, distPort, epmdPort := freePort(tb), freePort(tb), freePort(tb)
	b.mqtt, b.epmdPort = fmt.Sprintf("127.0.0.1:%d", mqttPort), epmdPort
	formatter := ""
	if o.JSON {
		formatter = "log.file.formatter = json\n"
	}
	conf := fmt.Sprintf("listeners.tcp = none\nmqtt.listeners.tcp.default = %s\nmqtt.allow_anonymous = true\n"+
		"log.file.level = info\n%slog.console = true\nlog.console.level = info\n", b.mqtt, formatter)
	for name, text := range map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[rabbitmq_mqtt].\n", "rabbitmq-env.conf": ""} {
		require.NoError(tb, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	b.env = append(os.Environ(),
		"HOME="+dir, // the Erlang cookie
		"RABBITMQ_NODENAME="+b.node,
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "rabbitmq.pid"),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", distPort),
		fmt.Sprintf("ERL_EPMD_PORT=%d", epmdPort),
		// Erlang's schedulers busy-wait for work by default: on two cores
		// that takes one from everything else.
		"RABBITMQ_SCHEDULER_BUSY_WAIT_THRESHOLD=none",
	)
	tb.Cleanup(b.stop)
	b.start()
	return b
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// URL is the node's MQTT listener, tcp://host:port.
func (b *Broker) URL() string { return "tcp://" + b.mqtt }

// LogFile is the node's own log file, as RabbitMQ writes it: what a user
// would hand devicesim judge.
func (b *Broker) LogFile() string { return filepath.Join(b.dir, "log", b.node+".log") }

// start runs the node in the foreground and waits for its "Server startup
// complete" (rabbit.erl's log_broker_started), after its listeners serve.
func (b *Broker) start() {
	b.tb.Helper()
	cmd := exec.Command(Server)
	cmd.Env, cmd.Dir = b.env, b.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the node and its helpers, stopped together
	out, err := cmd.StdoutPipe()
	require.NoError(b.tb, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(b.tb, cmd.Start())
	b.cmd = cmd
	ready := make(chan struct{})
	var tail []string
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			tail = append(tail[max(0, len(tail)-20):], sc.Text())
			if !said && strings.Contains(sc.Text(), "Server startup complete") {
				close(ready)
				said = true
			}
		}
		_ = cmd.Wait()
		close(b.done)
	}()
	select {
	case <-ready:
	case <-b.done:
		b.tb.Fatalf("RabbitMQ exited at start:\n%s", strings.Join(tail, "\n"))
	case <-time.After(2 * time.Minute): // a node boots in 5-15 s; a loaded CI host is slower
		b.tb.Fatal("RabbitMQ did not start within 2 minutes")
	}
}

// stop ends the node (SIGTERM, which it takes as rabbitmqctl stop; its
// process group killed after 30 s) and the epmd it started.
func (b *Broker) stop() {
	if b.cmd == nil {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
	b.cmd = nil
	if epmd, err := exec.LookPath("epmd"); err == nil {
		_ = exec.Command(epmd, "-port", fmt.Sprint(b.epmdPort), "-kill").Run()
	}
}

// Stop ends the node now, its log written out; the test's end would.
func (b *Broker) Stop() { b.stop() }
