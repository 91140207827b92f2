//go:build nomqtt5

package device_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/device"
)

// Firmware built without MQTT 5 says so rather than speaking 3.1.1 to a
// broker it was told speaks 5.
func TestMQTT5IsRefusedWhenBuiltWithout(t *testing.T) {
	_, err := device.New(device.Config{Broker: "tcp://b:1883", ClientID: "x", Protocol: device.MQTT5})
	assert.ErrorIs(t, err, device.ErrInvalid)
	assert.ErrorContains(t, err, "built without it (nomqtt5)")
}
