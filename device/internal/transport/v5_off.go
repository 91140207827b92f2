//go:build nomqtt5

package transport

// newV5 refuses MQTT 5 in a build that leaves it out (the nomqtt5 tag):
// firmware that speaks only 3.1.1 does not carry paho.golang.
func newV5(Settings, Host) (Client, error) { return nil, ErrNoMQTT5 }
