package experiment_test

import (
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

// TestMain quiets paho's loggers (the agents' own reconnect makes paho log a
// spurious error on every loss) and holds the package to no leaked
// goroutine: the soak and the calibration start and stop whole fleets.
func TestMain(m *testing.M) {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	goleak.VerifyTestMain(m)
}
