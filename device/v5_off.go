//go:build nomqtt5

package device

import "fmt"

// newV5 refuses MQTT 5 in a build that leaves it out (the nomqtt5 tag):
// firmware that speaks only 3.1.1 does not carry paho.golang.
func newV5(*Agent) (protocol, error) {
	return nil, fmt.Errorf("%w: Config.Protocol is MQTT 5, and this firmware was built without it (nomqtt5)", ErrInvalid)
}
