package fleetsim_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
)

// mosquitto is a real third-party broker on a loopback port.
type mosquitto struct {
	t    *testing.T
	bin  string
	conf string
	cmd  *exec.Cmd
	done chan struct{}
}

func startMosquitto(t *testing.T) (*mosquitto, string) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/mosquitto")
	}
	if err != nil {
		if os.Getenv("HERDGUARD_REQUIRE_MOSQUITTO") != "" {
			t.Fatal("mosquitto is required here (.ci/run installs the Debian package) but not installed")
		}
		t.Skip("mosquitto not installed (apt-get install mosquitto): skipping the interop test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
		"listener %d 127.0.0.1\nallow_anonymous true\nmax_connections -1\nlog_dest stderr\nlog_type information\nlog_type notice\n", port)), 0o644))
	m := &mosquitto{t: t, bin: bin, conf: conf}
	m.start()
	t.Cleanup(m.stop)
	return m, fmt.Sprintf("tcp://127.0.0.1:%d", port)
}

// start runs mosquitto and returns once it says it is running.
func (m *mosquitto) start() {
	m.cmd = exec.Command(m.bin, "-c", m.conf)
	stderr, err := m.cmd.StderrPipe()
	require.NoError(m.t, err)
	require.NoError(m.t, m.cmd.Start())
	running := make(chan struct{})
	m.done = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "running") && !said {
				close(running)
				said = true
			}
		}
		_ = m.cmd.Wait()
		close(m.done)
	}()
	select {
	case <-running:
	case <-m.done:
		m.t.Fatal("mosquitto exited at start")
	case <-time.After(10 * time.Second):
		m.t.Fatal("mosquitto did not start within 10 s")
	}
}

func (m *mosquitto) stop() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	m.cmd = nil
}

// A fleet of real agents against mosquitto, which the test restarts: the
// observe run records the loss and the fleet's return from the devices' side.
func TestObserveMosquittoRestart(t *testing.T) {
	m, url := startMosquitto(t)
	c := fleetsim.Default()
	c.Devices, c.Scenario, c.TimeScale, c.Broker, c.Duration = 50, fleetsim.Observe, 1, url, 30*time.Second
	c.Ready = func() {
		m.stop()
		m.start() // same port: the fleet's retries find it back
	}
	r, err := fleetsim.Run(context.Background(), c)
	require.NoError(t, err)
	assert.Equal(t, "observe", r.Scenario)
	assert.Equal(t, "devices", r.Fleet.MeasuredAt)
	assert.Nil(t, r.Broker, "an external broker's side is not seen")
	assert.True(t, r.RecoveryJSON.AllRecovered)
	assert.GreaterOrEqual(t, r.RecoveryJSON.P50S, 1.0, "IoTCore's first retry is 1 s + U[0, 1 s) after the loss")
	assert.Less(t, r.RecoveryJSON.MaxS, 30.0)
	assert.GreaterOrEqual(t, r.Attempts.PerDeviceMean, 1.0)
	assert.Equal(t, 50, int(r.Fleet.Arrivals.Count-r.Attempts.Refused), "one successful attempt per device")
	assert.NotEmpty(t, r.Verdict)
}
