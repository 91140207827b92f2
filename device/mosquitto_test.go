//go:build !nomqtt5

package device_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/testbroker"
)

// The MQTT 5 agent against a real MQTT 5 broker, mosquitto 2, through the
// fault proxy: it connects as MQTT 5 (the proxy reads protocol level 5 in
// its CONNECT, mosquitto logs p5), subscribes and receives what it
// publishes at QoS 1, comes back after the proxy drops the path on the
// policy's wait, with its subscription restored.
func TestMQTT5AgentAgainstMosquittoThroughTheProxy(t *testing.T) {
	if runtime.GOARCH == "arm" {
		t.Skip("mosquitto is a host process: make test runs this natively (qemu-user's fork can hang)")
	}
	m := mosquittotest.Start(t, "")
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(m.Addr()), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	r := newRig(t, testbroker.Config{Transport: testbroker.Memory}, func(c *device.Config) {
		mqtt5(c)
		c.Broker, c.Dial = "tcp://"+p.Addr(), nil
	})
	r.bootAndConnect()
	got := make(chan string, 4)
	require.NoError(t, r.agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(_ string, b []byte) { got <- string(b) }))
	roundTrip := func(payload string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		require.NoError(t, r.agent.Publish(ctx, "cmd/dev-1", 1, false, []byte(payload)))
		select {
		case b := <-got:
			assert.Equal(t, payload, b)
		case <-time.After(bound):
			t.Fatalf("%q never came back from mosquitto", payload)
		}
	}
	roundTrip("first")

	require.Equal(t, 1, p.DropAll())
	r.next(device.EventLost)
	assert.GreaterOrEqual(t, r.advanceWait(), time.Second, "the policy's wait, not paho's")
	r.next(device.EventConnected)
	roundTrip("after the drop") // the subscription was restored

	require.NoError(t, p.Recorder().Await(context.Background(), bound, func(k fault.Counts) bool { return k.Accepted == 2 }))
	for _, a := range p.Recorder().Attempts() {
		assert.Equal(t, "dev-1", a.ClientID)
		assert.Equal(t, byte(5), a.Protocol, "an MQTT 5 CONNECT")
	}
	log, err := os.ReadFile(m.LogFile())
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "as dev-1 (p5,"), "mosquitto's own word:\n%s", log)
}
