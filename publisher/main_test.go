package publisher_test

import (
	"os"
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	switch os.Getenv("PUBLISHER_CHILD") {
	case "": // the test binary itself
	case "hold": // TestStoreHeldByAnotherProcess's other process
		os.Exit(holdMain())
	default: // the SIGKILL test's child process
		os.Exit(childMain())
	}
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	goleak.VerifyTestMain(m)
}
