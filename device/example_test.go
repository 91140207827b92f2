package device_test

import (
	"context"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/testbroker"
)

// An agent against an in-process broker: it waits inside its boot spread,
// connects, and comes back after the broker drops it.
func ExampleAgent() {
	broker, _ := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	defer broker.Close()

	timing := device.DefaultTiming()
	timing.BootSpread = 50 * time.Millisecond // a real fleet spreads over seconds
	events := make(chan device.Event, 100)
	agent, err := device.New(device.Config{
		Broker:   broker.URL(),
		ClientID: "sensor-42",
		Dial:     broker.DialContext,
		Timing:   &timing,
		OnEvent:  func(e device.Event) { events <- e }, // must not block
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = agent.Start(ctx)
	defer agent.Stop(ctx)

	_ = agent.AwaitConnection(ctx)
	fmt.Println("connected:", agent.Connected())

	broker.Faults().DropAll()
	lost := false
	for e := range events {
		lost = lost || e.Kind == device.EventLost
		if lost && e.Kind == device.EventBackingOff {
			fmt.Println("first reconnect waits at least 1 s:", e.Delay >= time.Second)
			break
		}
	}
	// Output:
	// connected: true
	// first reconnect waits at least 1 s: true
}
