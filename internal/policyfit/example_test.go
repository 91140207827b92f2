package policyfit_test

import (
	"fmt"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/policyfit"
)

// A fleet on two firmware versions behind a proxy that refused every
// connection for 20 s: 40 devices on paho.mqtt.golang's reconnect (at
// once, then after 1, 2, 4 ... s), 40 on MQTT.js's (after 1 s, every 1 s).
// Each device reaches the proxy its own few ms late, and each refusal
// costs it a round trip before its next wait: the constant's 1 s is seen
// with it.
func Example() {
	var devices []policyfit.Device
	add := func(id string, rtt, first time.Duration, waits func(n int) time.Duration) {
		d := policyfit.Device{ID: id}
		for t, n := rtt/2+first, 0; ; n++ {
			if t >= 20*time.Second { // admitted: passed on to the broker
				d.Attempts = append(d.Attempts, attempt.Record{T: t, Outcome: fault.Accepted})
				break
			}
			d.Attempts = append(d.Attempts, attempt.Record{T: t, Outcome: fault.Refused})
			t += rtt + waits(n)
		}
		devices = append(devices, d)
	}
	for i := range 40 {
		rtt := time.Duration(20+3*i) * time.Millisecond
		add(fmt.Sprintf("paho-%d", i), rtt, 0, func(n int) time.Duration { return time.Second << n })
		add(fmt.Sprintf("mqttjs-%d", i), rtt, time.Second, func(int) time.Duration { return time.Second })
	}
	r, err := policyfit.Infer(devices, policyfit.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("fleet:", r.Fleet.Err)
	for _, g := range r.Groups {
		f := g.Fit
		fmt.Printf("%d devices (%s...): %s, base %v, x%.1f, first attempt at once on %.0f %%, spec %q\n",
			len(g.IDs), g.IDs[0], f.Family, f.Base.Round(100*time.Millisecond), f.Factor, 100*f.FirstImmediate, f.Spec)
	}
	// Output:
	// fleet: policyfit: the fleet runs more than one policy: 2 groups
	// 40 devices (mqttjs-0...): constant, base 1.1s, x0.0, first attempt at once on 0 %, spec "constant"
	// 40 devices (paho-0...): exponential, base 1s, x2.0, first attempt at once on 100 %, spec "exponential:base=1s"
}
