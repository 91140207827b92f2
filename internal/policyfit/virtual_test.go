package policyfit_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/policyfit"
	"github.com/herdguard/herdguard/internal/stormstatstest"
	"github.com/herdguard/herdguard/internal/virtual"
	"github.com/herdguard/herdguard/reconnect"
)

// virtualFleet runs a broker restart of outage on the virtual engine, its
// devices on policy spec with cap maxBackoff, and returns each device's
// attempts as the broker's side saw them. The firmware's flood guard is
// lifted (guard=600 attempts a minute) so that the policy alone sets the
// waits.
func virtualFleet(spec string, maxBackoff time.Duration, devices int, outage time.Duration, seed uint64) ([]policyfit.Device, error) {
	p := plan.Default()
	p.Engine, p.Scenario, p.Devices, p.Outage, p.Seed = plan.Virtual, plan.BrokerRestart, devices, outage, seed
	p.Policy, p.MaxBackoff = spec+":guard=600", maxBackoff
	if spec == "constant" {
		p.Policy = "constant:guard=600"
	}
	var events bytes.Buffer
	p.Events = &events
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if _, err := virtual.Run(context.Background(), p, virtual.Options{Inline: true, FleetVerdictOnly: true}); err != nil {
		return nil, err
	}
	records, err := attempt.ReadCSV(&events)
	if err != nil {
		return nil, err
	}
	out := make([]policyfit.Device, devices)
	for i := range out {
		out[i].ID = attempt.ClientID(i)
	}
	for _, r := range records {
		if r.Device >= 0 && int(r.Device) < devices {
			d := &out[r.Device]
			d.Attempts = append(d.Attempts, r)
		}
	}
	return out, nil
}

// virtualTruths are the simulator's policies, as plan specs, with the
// truth each stands for.
var virtualTruths = []struct {
	spec string
	truth
}{
	{"exponential", truth{"exponential 1 s x2, 120 s", policyfit.Exponential,
		reconnect.Exponential{Base: time.Second, Multiplier: 2, Max: 2 * time.Minute}, 0, time.Second, 2 * time.Minute}},
	{"constant", truth{"constant 1 s", policyfit.Constant, reconnect.Constant{Interval: time.Second}, 0, time.Second, time.Second}},
	{"linear", truth{"linear 1 s +1 s, 30 s", policyfit.Linear, linear.shape, 0, time.Second, 30 * time.Second}},
	{"full", full},
	{"equal", equal},
	{"decorrelated", decorrelated},
	{"iotcore", iotCore},
	{"iotcore-jitter-at-cap", truth{"IoT Core, jitter at the cap", policyfit.IoTCore,
		reconnect.IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: 32 * time.Second, JitterAtCap: true}, 0,
		time.Second, 32 * time.Second}},
	{"fleet-safe", fleetSafe},
}

func virtualCells() []cell {
	var cells []cell
	for _, v := range virtualTruths {
		for _, o := range []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute} {
			cells = append(cells, cell{truths: []truth{v.truth}, devices: 200, outage: o,
				fleet: func(seed uint64) ([]policyfit.Device, error) { return virtualFleet(v.spec, v.cap, 200, o, seed) }})
		}
	}
	return cells
}

// The measured error rates of Infer on the virtual engine's fleets: each
// of the simulator's policies, 200 devices, a broker restart of 10 s,
// 1 min and 5 min, seeds() seeds a cell, held to the same bounds as the
// synthetic fleets.
func TestInferenceAccuracyOnTheVirtualEngine(t *testing.T) {
	cells := virtualCells()
	if stormstatstest.RaceDetector && *accuracySeeds == 0 {
		cells = slices.DeleteFunc(cells, func(c cell) bool { return c.outage != time.Minute })
	}
	tallies := measure(cells, seeds())
	checkTallies(t, tallies, true)
	writeTable(t, "virtual", tallies)
}
