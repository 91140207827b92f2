package publisher_test

import (
	"context"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/testbroker"
)

// Telemetry taken while the broker is away is kept, and delivered in order
// once the device is back: Publish never waits for the network.
func Example() {
	broker, _ := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
	defer broker.Close()
	broker.Faults().BeginOutage() // the device boots while its broker is down

	timing := device.DefaultTiming()
	timing.BootSpread = 50 * time.Millisecond // a real fleet spreads over seconds
	agent, err := device.New(device.Config{Broker: broker.URL(), ClientID: "sensor-42", Dial: broker.DialContext, Timing: &timing})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = agent.Start(ctx)
	defer agent.Stop(context.Background())

	// a MemoryStore; OpenBoltStore survives reboots
	pub, err := publisher.New(publisher.Config{Session: agent})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	go func() { _ = pub.Run(ctx) }()

	for i := range 3 {
		seq, _ := pub.Publish("telemetry/sensor-42", fmt.Appendf(nil, `{"reading":%d}`, i))
		fmt.Println("queued", seq)
	}
	fmt.Println("queued while the broker is down:", pub.Stats().Queued)

	broker.Faults().EndOutage()
	_ = pub.Flush(ctx) // until every message has its PUBACK
	s := pub.Stats()
	fmt.Println("delivered:", s.Delivered, "queued:", s.Queued)
	// Output:
	// queued 1
	// queued 2
	// queued 3
	// queued while the broker is down: 3
	// delivered: 3 queued: 0
}
