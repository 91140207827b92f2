package publisher_test

import (
	"os"
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

type quiet struct{}

func (quiet) Println(...any)        {}
func (quiet) Printf(string, ...any) {}

func TestMain(m *testing.M) {
	if os.Getenv("PUBLISHER_CHILD") != "" { // the SIGKILL test's child process
		os.Exit(childMain())
	}
	paho.ERROR, paho.CRITICAL, paho.WARN = quiet{}, quiet{}, quiet{}
	goleak.VerifyTestMain(m)
}
