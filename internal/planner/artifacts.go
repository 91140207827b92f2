package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/remoteconfig"
)

// Remote says whether c is a formula a remote configuration can set: the
// mission's formula, with its base, jitter and cap within
// remoteconfig.DefaultBounds.
func Remote(c Candidate) bool {
	_, err := RemoteConfig(c)
	return err == nil
}

// RemoteConfig is the remote-configuration document that puts c in force
// on a fleet in the field, or why none can.
func RemoteConfig(c Candidate) ([]byte, error) {
	p, err := plan.ParsePolicy(c.Policy)
	if err != nil {
		return nil, err
	}
	switch {
	case p.Family != "iotcore":
		return nil, fmt.Errorf("a remote configuration sets only the mission's formula (iotcore), not %s: that takes new firmware", p.Family)
	case p.Guard != 0:
		return nil, fmt.Errorf("a remote configuration does not set the flood guard (%d a minute): that takes new firmware", p.Guard)
	}
	d := remoteconfig.Document{Reconnect: &remoteconfig.ReconnectTuning{Base: remoteconfig.Duration(or1s(p.Base)),
		Jitter: remoteconfig.Duration(or1s(p.Jitter)), MaxBackoff: remoteconfig.Duration(c.MaxBackoff)}}
	if err := remoteconfig.DefaultBounds.Check(d); err != nil {
		return nil, fmt.Errorf("outside the firmware's bounds: %v", err)
	}
	return json.MarshalIndent(d, "", "  ")
}

func or1s(d time.Duration) time.Duration {
	if d == 0 {
		return time.Second
	}
	return d
}

// AgentFlags are the deviceagent flags that run c, or why deviceagent
// cannot: it runs the mission's formula alone.
func AgentFlags(c Candidate) (string, error) {
	p, err := plan.ParsePolicy(c.Policy)
	if err != nil {
		return "", err
	}
	switch {
	case p.Family != "iotcore":
		return "", fmt.Errorf("deviceagent runs the mission's formula (iotcore); %s takes firmware built with the Go below", p.Family)
	case p.Guard != 0:
		return "", fmt.Errorf("deviceagent keeps the firmware's flood guard; %d a minute takes firmware built with the Go below", p.Guard)
	}
	return fmt.Sprintf("-reconnect-base %v -reconnect-jitter %v -max-backoff %v", or1s(p.Base), or1s(p.Jitter), c.MaxBackoff), nil
}

// GoSnippet is the firmware code that runs c with package device.
func GoSnippet(c Candidate) (string, error) {
	shape, err := plan.Shape(c.Policy, c.MaxBackoff)
	if err != nil {
		return "", err
	}
	lit, err := shapeLiteral(shape)
	if err != nil {
		return "", err
	}
	timing := "timing := device.DefaultTiming() // the boot spread, the flood guard and the rest stay the firmware's\n"
	if g := plan.Guard(c.Policy); g != nil {
		timing = fmt.Sprintf("timing := device.DefaultTiming() // the boot spread and the rest stay the firmware's\n"+
			"timing.Guard = &%#v\n", *g)
	}
	return fmt.Sprintf(`policy, err := reconnect.New(%s, reconnect.Limits{MaxRetries: reconnect.RetryForever})
if err != nil {
	return err
}
%stiming.Policy = policy
agent, err := device.New(device.Config{Broker: broker, ClientID: id, Timing: &timing})
`, lit, timing), nil
}

// shapeLiteral writes a shape as Go source: reconnect's shapes write
// their own (fmt.GoStringer).
func shapeLiteral(s reconnect.Shape) (string, error) {
	if g, ok := s.(fmt.GoStringer); ok {
		return g.GoString(), nil
	}
	return "", fmt.Errorf("no Go literal for %T", s)
}

// Check is the storm file that checks a recommendation on the owner's
// own broker: Devices real devices (the wire engine's: the firmware's
// reconnect core on real MQTT connections) through the fault proxy, which stands
// between them and the broker at ${MQTT_BROKER}, admits the question's
// rate scaled to them and refuses every connection for the outage.
// Predicted is the recommendation's outcome for exactly that storm.
type Check struct {
	Candidate Candidate
	Question  Question
	Devices   int
	Predicted Scorecard
}

// Margins the check's expectations add to the prediction: what the model
// leaves out of a real broker and network.
const (
	p99Margin      = 1.25
	attemptsMargin = 1.25
	peakMargin     = 1.5
)

// StormFile writes the check as a storm file (docs/storm.md).
func (c Check) StormFile() string {
	q := c.Question
	scale := float64(c.Devices) / float64(q.Devices)
	p := stormPlan(q, c.Candidate, c.Devices, q.Seed, q.Outage)
	var b strings.Builder
	fmt.Fprintf(&b, "# devicesim plan's check of %s on your broker: %d real devices through the\n", c.Candidate, c.Devices)
	fmt.Fprintf(&b, "# fault proxy, which admits %.4g connects/s (your %.0f/s scaled to %s of %s devices) and\n",
		p.AdmitRate, q.AdmitRate, plan.Thousands(c.Devices), plan.Thousands(q.Devices))
	fmt.Fprintf(&b, "# refuses every connection for %v. The expectations are the model's prediction for\n", q.Outage)
	fmt.Fprintf(&b, "# this storm (%d runs: p99 %.1f s from the disruption, %.2f attempts a device,\n", c.Predicted.Runs, c.maxFromStart(), c.maxTotal())
	fmt.Fprintf(&b, "# the fleet's busiest second %.0f dials) with margins of %.0f %%, %.0f %% and %.0f %%. The\n", c.maxDials()*scale, 100*(p99Margin-1), 100*(attemptsMargin-1), 100*(peakMargin-1))
	fmt.Fprintf(&b, "# proxy sees every dial, those it refuses too: the bound is on the fleet's side, as predicted.\n")
	fmt.Fprintf(&b, "# What reaches your broker once back is the planner's answer's busiest second.\n")
	fmt.Fprintf(&b, "# Run it: MQTT_BROKER=tcp://your-broker:1883 devicesim run -f check.yaml\n")
	fmt.Fprintf(&b, "engine: wire\ntime_scale: 1\nseed: %d\n", q.Seed)
	fmt.Fprintf(&b, "fleet:\n  - name: recommended\n    devices: %d\n    policy: %q\n    max_backoff: %v\n", c.Devices, c.Candidate.Policy, c.Candidate.MaxBackoff)
	if q.MQTT5 {
		fmt.Fprintf(&b, "    mqtt: \"5\"\n")
	}
	fmt.Fprintf(&b, "brokers:\n  external: {url: \"${MQTT_BROKER}\"}\n")
	fmt.Fprintf(&b, "  admission: {rate: %.4g, burst: %d, mode: %s}\n", p.AdmitRate, p.AdmitBurst, q.AdmitMode)
	fmt.Fprintf(&b, "timeline:\n  - at: 0s\n    disruption: throttled-restart\n    outage: %v\n", q.Outage)
	fmt.Fprintf(&b, "expect:\n  verdict: spread\n  recovery_p99: %v\n  attempts_per_device: %.3g\n  fleet_busiest_second: %.0f\n",
		time.Duration(math.Ceil(c.maxFromStart()*p99Margin))*time.Second, math.Ceil(c.maxTotal()*attemptsMargin*10)/10,
		math.Ceil(c.maxDials()*scale*peakMargin))
	return b.String()
}

func (c Check) maxFromStart() float64 {
	m := 0.0
	for _, r := range c.Predicted.runs {
		m = max(m, r.fromStart)
	}
	return m
}

func (c Check) maxDials() float64 {
	m := 0.0
	for _, r := range c.Predicted.runs {
		m = max(m, r.dials)
	}
	return m
}

func (c Check) maxTotal() float64 {
	m := 0.0
	for _, r := range c.Predicted.runs {
		m = max(m, r.total)
	}
	return m
}

// NewCheck predicts the storm that checks the recommendation with devices
// real devices, on every seed, at the question's outage.
func (a *Answer) NewCheck(ctx context.Context, devices int, o Options) (Check, error) {
	if a.Recommendation == nil {
		return Check{}, fmt.Errorf("%w: no recommendation to check", ErrNoPolicy)
	}
	q := a.Question
	devices = min(devices, q.Devices)
	out, err := o.runAll(ctx, q, []Candidate{a.Recommendation.Candidate}, devices, []time.Duration{q.Outage}, q.Seeds, "the check's prediction")
	if err != nil {
		return Check{}, err
	}
	return Check{Candidate: a.Recommendation.Candidate, Question: q, Devices: devices, Predicted: out[0]}, nil
}
