package policyfit_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/policyfit"
	"github.com/herdguard/herdguard/reconnect"
)

// truth is a synthetic fleet's policy: the shape its devices draw their
// waits from (reconnect.Shape.Delay), and what a fit should say of it.
type truth struct {
	name   string
	family policyfit.Family
	shape  reconnect.Shape // nil: no backoff, each retry after the refused one's round trip
	// immediate is the share of devices whose first attempt is immediate
	// (paho.mqtt.golang's, unless it lost a connection shortly before).
	immediate float64
	base      time.Duration
	cap       time.Duration // 0: none
}

// The policies of the field (as each client's source has it: internal/thirdparty
// says where), and ours.
var (
	pahoGo = truth{"paho Go (1 s x2, 10 min)", policyfit.Exponential,
		reconnect.Exponential{Base: time.Second, Multiplier: 2, Max: 10 * time.Minute}, 0.9, time.Second, 10 * time.Minute}
	pahoPython = truth{"paho Python (1 s x2, 120 s)", policyfit.Exponential,
		reconnect.Exponential{Base: time.Second, Multiplier: 2, Max: 2 * time.Minute}, 0, time.Second, 2 * time.Minute}
	grpcLike = truth{"exponential x1.6, 120 s", policyfit.Exponential,
		reconnect.Exponential{Base: time.Second, Multiplier: 1.6, Max: 2 * time.Minute}, 0, time.Second, 2 * time.Minute}
	mqttJS    = truth{"MQTT.js (constant 1 s)", policyfit.Constant, reconnect.Constant{Interval: time.Second}, 0, time.Second, time.Second}
	noBackoff = truth{"no backoff", policyfit.NoBackoff, nil, 1, 0, 0}
	linear    = truth{"linear 1 s +1 s, 30 s", policyfit.Linear,
		reconnect.Linear{Initial: time.Second, Step: time.Second, Max: 30 * time.Second}, 0, time.Second, 30 * time.Second}
	full = truth{"full jitter 1 s, 32 s", policyfit.FullJitter,
		reconnect.FullJitter{Base: time.Second, Max: 32 * time.Second}, 0, time.Second, 32 * time.Second}
	equal = truth{"equal jitter 1 s, 32 s", policyfit.EqualJitter,
		reconnect.EqualJitter{Base: time.Second, Max: 32 * time.Second}, 0, time.Second, 32 * time.Second}
	decorrelated = truth{"decorrelated 1 s, 32 s", policyfit.Decorrelated,
		reconnect.Decorrelated{Base: time.Second, Max: 32 * time.Second}, 0, time.Second, 32 * time.Second}
	iotCore   = truth{"IoT Core 1 s + U(0, 1 s), 32 s", policyfit.IoTCore, reconnect.DefaultIoTCore, 0, time.Second, 32 * time.Second}
	fleetSafe = truth{"fleet-safe 1 s, 32 s", policyfit.FleetSafe, reconnect.DefaultFleetSafe, 0, time.Second, 32 * time.Second}
)

// grpc is gRPC's connection backoff: 1 s x1.6 to 120 s, +-20 %.
var grpc = truth{"gRPC (1 s x1.6 +-20 %, 120 s)", policyfit.Proportional,
	proportional{time.Second, 1.6, 0.2, 2 * time.Minute}, 0, time.Second, 2 * time.Minute}

// hiveMQ is the HiveMQ Java client's: 1 s doubling to 120 s, +-25 %.
var hiveMQ = truth{"HiveMQ (1 s x2 +-25 %, 120 s)", policyfit.Proportional,
	proportional{time.Second, 2, 0.25, 2 * time.Minute}, 0, time.Second, 2 * time.Minute}

// Constants whose waits a client's timer makes differ by tens of ms:
// MQTT.js 5's 1 s with hundreds of clients in one event loop (lateTimer),
// and a uniform +-2.5 %. Either is a constant to name, not a jitter.
var (
	mqttJSLoop = truth{"MQTT.js in one event loop (1 s, late)", policyfit.Constant,
		lateTimer{time.Second, 40 * time.Millisecond, 5 * time.Millisecond, 8}, 0, time.Second, time.Second}
	constantJitter = truth{"constant 1 s +-2.5 %", policyfit.Constant, proportional{time.Second, 1, 0.025, time.Second}, 0,
		time.Second, time.Second}
)

var allTruths = []truth{noBackoff, mqttJS, linear, pahoGo, pahoPython, grpcLike, grpc, hiveMQ, full, equal, decorrelated,
	iotCore, fleetSafe}

// Policies outside the families, which Infer must not name: a
// proportional jitter of +-50 % (wider than any family's), and a fixed
// table of waits (1, 5, 10, 60 s, then 60 s).
var (
	wide  = truth{"1 s x2 +-50 %, 120 s", "", proportional{time.Second, 2, 0.5, 2 * time.Minute}, 0, time.Second, 2 * time.Minute}
	table = truth{"table 1, 5, 10, 60 s", "", waitTable{time.Second, 5 * time.Second, 10 * time.Second, time.Minute}, 0,
		time.Second, time.Minute}
	foreignTruths = []truth{wide, table}
)

// proportional is min(max, base x factor^n) x (1 + U[-frac, frac)).
type proportional struct {
	base   time.Duration
	factor float64
	frac   float64
	max    time.Duration
}

func (p proportional) Delay(n int, _ time.Duration, u float64) time.Duration {
	v := min(float64(p.max), float64(p.base)*math.Pow(p.factor, float64(n)))
	return time.Duration(v * (1 + p.frac*(2*u-1)))
}

func (p proportional) Validate() error { return nil }
func (p proportional) String() string {
	return fmt.Sprintf("proportional(%v x%g +-%g, %v)", p.base, p.factor, p.frac, p.max)
}

// lateTimer is a constant interval whose timer fires late, as a node
// event loop shared by hundreds of clients fires MQTT.js's setInterval:
// while the storm's first rounds of reconnects crowd the loop, a device's
// timer keeps the lateness it drew first, U[0, busy); after them it is late
// by U[0, settled) (so 200 MQTT.js clients were through devicesim proxy).
type lateTimer struct {
	interval, busy, settled time.Duration
	rounds                  int
}

func (l lateTimer) Delay(n int, prev time.Duration, u float64) time.Duration {
	switch {
	case n == 0:
		return l.interval + time.Duration(u*float64(l.busy))
	case n < l.rounds:
		return prev
	}
	return l.interval + time.Duration(u*float64(l.settled))
}

func (l lateTimer) Validate() error { return nil }
func (l lateTimer) String() string {
	return fmt.Sprintf("late(%v, %v, %v)", l.interval, l.busy, l.settled)
}

// waitTable waits its entries in turn, then its last.
type waitTable []time.Duration

func (w waitTable) Delay(n int, _ time.Duration, _ float64) time.Duration { return w[min(n, len(w)-1)] }
func (w waitTable) Validate() error                                       { return nil }
func (w waitTable) String() string                                        { return fmt.Sprint([]time.Duration(w)) }

// network is what stands between a device and the proxy: the time a
// device takes to notice the loss (U[0, notice)), its one-way latency
// (U[latencyMin, latencyMax), fixed a device; a refused attempt costs a
// round trip, 2x that, before the device's timer starts), and each
// arrival's measurement noise (U[0, noise)).
type network struct {
	notice, latencyMin, latencyMax, noise time.Duration
}

var internet = network{notice: 50 * time.Millisecond, latencyMin: 5 * time.Millisecond, latencyMax: 100 * time.Millisecond,
	noise: 3 * time.Millisecond}

// maxSynthAttempts bounds a device's attempts: Infer reads 48.
const maxSynthAttempts = 100

// synth is a fleet of n devices on policy tr through a storm of outage,
// as the proxy sees it: every attempt's arrival, the first at or after
// the outage's end admitted. Device i is "<prefix><i>"; seed and i seed
// its draws.
func synth(tr truth, n int, outage time.Duration, nw network, seed uint64, prefix string) []policyfit.Device {
	devices := make([]policyfit.Device, n)
	for i := range devices {
		r := rand.New(rand.NewPCG(seed, uint64(i)+1<<32))
		d := policyfit.Device{ID: prefix + strconv.Itoa(i)}
		latency := nw.latencyMin + time.Duration(r.Float64()*float64(nw.latencyMax-nw.latencyMin))
		t := time.Duration(r.Float64() * float64(nw.notice))
		n, prev := 0, time.Duration(0)
		wait := func() time.Duration {
			if tr.shape == nil {
				return time.Duration(r.Float64() * float64(20*time.Millisecond)) // the client's own turnaround
			}
			w := tr.shape.Delay(n, prev, r.Float64())
			n, prev = n+1, w
			return w
		}
		if r.Float64() >= tr.immediate {
			t += wait()
		}
		for {
			at := t + latency + time.Duration(r.Float64()*float64(nw.noise))
			o := fault.Refused
			if at >= outage {
				o = fault.Accepted
			}
			d.Attempts = append(d.Attempts, attempt.Record{T: at, Outcome: o})
			if at >= outage || len(d.Attempts) == maxSynthAttempts {
				break
			}
			t += 2*latency + wait()
		}
		devices[i] = d
	}
	return devices
}
