package cluster_test

import (
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

// The fleet-on-a-cluster tests run in a test binary of their own, apart
// from the agents package's: the two together outgrew what the race
// detector's runtime holds in one process (it crashed in its stack
// depot, one run in three).
func TestMain(m *testing.M) {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	goleak.VerifyTestMain(m)
}
