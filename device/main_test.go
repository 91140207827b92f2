package device_test

import (
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

type quiet struct{}

func (quiet) Println(...any)        {}
func (quiet) Printf(string, ...any) {}

func TestMain(m *testing.M) {
	paho.ERROR, paho.CRITICAL, paho.WARN = quiet{}, quiet{}, quiet{}
	goleak.VerifyTestMain(m)
}
