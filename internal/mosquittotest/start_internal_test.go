package mosquittotest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A port another process took between Start's look and mosquitto's bind
// makes mosquitto exit at once, saying why: start reports it, so that
// Start can try another port rather than fail the test.
func TestAPortTakenIsSaidAndTriedAgain(t *testing.T) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/mosquitto"); err != nil {
			t.Skip("mosquitto not installed")
		}
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	user := ""
	if os.Geteuid() == 0 {
		user = "user root\n"
	}
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "listener %d 127.0.0.1\n%slog_dest stderr\n",
		taken.Addr().(*net.TCPAddr).Port, user), 0o644))
	b := &Broker{tb: t, bin: bin, conf: conf}
	said, err := b.start()
	assert.EqualError(t, err, "mosquitto exited at start")
	assert.Contains(t, said, "Address already in use")

	again := Start(t, "") // a port of its own: it runs
	assert.NotEmpty(t, again.Addr())
}
