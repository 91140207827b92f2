package fleetsim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// Engines a run can name.
const (
	Agents  = "agents"  // real device.Agents, paho clients and the in-process broker, in (scaled) real time
	Virtual = "virtual" // each device's device.Machine against a model of the broker, in virtual time
)

// The virtual engine drives every device's reconnect state machine (the
// same device.Machine the Agent runs) against a model of the broker in
// virtual time: no goroutine, socket or timer per device, so a million
// devices fit in one process and a synchronised wave is measured as the
// devices make it, not as the host manages to serve it. The model: the
// broker refuses dials while down, answers instantly when up, and applies
// admission (refuse, pause or accept-then-disconnect) and flapping as the
// test broker does. What it leaves out is the broker's own speed: it admits
// whatever the admission limit allows, however many arrive at once.

// vdev is one device in the virtual engine.
type vdev struct {
	m      *device.Machine
	online bool
}

// vevent is something due at a virtual time.
type vevent struct {
	at   time.Duration // since the engine's epoch
	dev  int32
	kind vkind
	code int16 // vResult: the CONNACK code, or NoConnack
}

type vkind uint8

const (
	vDue    vkind = iota // the device's wait is over
	vResult              // a paused attempt's answer arrives
	vLost                // the broker drops the device's session
)

type vqueue []vevent

func (q vqueue) Len() int { return len(q) }
func (q vqueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].dev < q[j].dev // a fixed order for equal times: runs repeat exactly
}
func (q vqueue) Swap(i, j int)  { q[i], q[j] = q[j], q[i] }
func (q *vqueue) Push(x any)    { *q = append(*q, x.(vevent)) }
func (q *vqueue) Pop() (x any)  { x, *q = (*q)[len(*q)-1], (*q)[:len(*q)-1]; return x }
func (q *vqueue) push(e vevent) { heap.Push(q, e) }

// virtualFleet is the engine's state.
type virtualFleet struct {
	c       Config
	epoch   time.Time
	devs    []vdev
	ids     []string
	q       vqueue
	online  int
	b       *builder // every attempt from t0, as it is made
	now     time.Duration
	t0      time.Duration
	down    [2]time.Duration // the outage [from, until)
	flap    [2]time.Duration // the flapping window
	lim     *rate.Limiter
	limFrom time.Duration
}

var errDialRefused = errors.New("connection refused")

func (c Config) validateVirtual() error {
	switch {
	case c.Policy == PahoDefault:
		return fmt.Errorf("paho-default runs real paho clients: use -engine agents")
	case c.Scenario == ConfigOutage || c.Scenario == Observe:
		return fmt.Errorf("scenario %s needs real devices: use -engine agents", c.Scenario)
	case c.Broker != "" || c.Shard.Count > 0 || c.Telemetry > 0 || c.Transport == TCP:
		return fmt.Errorf("-broker, -shard, -telemetry and -transport tcp need real devices: use -engine agents")
	}
	return nil
}

// runVirtual is Run for the virtual engine.
func runVirtual(ctx context.Context, c Config) (*Report, error) {
	start := time.Now()
	c.TimeScale = 1 // virtual time costs nothing to run at full length
	if c.Scenario == ThrottledRestart && c.AdmitRate == 0 {
		c.AdmitRate = 100
	}
	shape, _ := Shape(c.Policy, c.MaxBackoff)
	policy, err := reconnect.New(shape, reconnect.Limits{MaxRetries: c.RetryCap})
	if err != nil {
		return nil, err
	}
	timing := device.DefaultTiming()
	timing.Policy = policy
	before := memInUse()
	v := &virtualFleet{c: c, epoch: start.Truncate(time.Millisecond), devs: make([]vdev, c.Devices), ids: make([]string, c.Devices)}
	for i := range v.devs {
		m, err := device.NewMachine(&timing, rand.NewPCG(c.Seed, uint64(i)))
		if err != nil {
			return nil, err
		}
		v.devs[i].m, v.ids[i] = m, clientID(i)
	}
	returned := v.setup()
	v.b = newBuilder(c.Devices, v.at(v.t0), v.at(returned), 1, "devices", "broker")
	bound := c.Outage + 20*c.MaxBackoff + time.Minute
	if c.AdmitRate > 0 {
		bound += time.Duration(3 * float64(c.Devices) / c.AdmitRate * float64(time.Second))
	}
	finished, err := v.run(ctx, v.t0+bound)
	if err != nil {
		return nil, err
	}
	until := v.now
	if finished {
		until += c.MaxBackoff // everyone back: nobody left to retry
	}
	v.b.watchedUntil(v.at(until))
	memPerDevice := float64(memInUse()-before) / float64(c.Devices) / 1024 // machines, queue and the report's events
	rep := &Report{Scenario: c.Scenario, Policy: c.Policy, Engine: Virtual, Transport: "model", Devices: c.Devices,
		Seed: c.Seed, TimeScale: 1, DisruptionUnixMS: v.at(v.t0).UnixMilli()}
	if err := v.b.fill(rep); err != nil {
		return nil, err
	}
	rep.Limit, rep.BrokerBackS = c.limit(c.Devices), v.b.back.Seconds()
	rep.Host.WallS, rep.Host.MemoryPerDeviceKB = time.Since(start).Seconds(), memPerDevice
	rep.RecoveryJSON.AllRecovered = finished && rep.recovered == c.Devices
	if !rep.RecoveryJSON.AllRecovered {
		return rep, fmt.Errorf("%w: %d of %d within %v (virtual)", ErrNotRecovered, rep.recovered, c.Devices, bound)
	}
	return rep, nil
}

func (v *virtualFleet) at(d time.Duration) time.Time { return v.epoch.Add(d) }

// setup boots the fleet (online at once, outside boot-storm), arranges the
// scenario's disruption at t0, and returns when the broker is back.
func (v *virtualFleet) setup() (returned time.Duration) {
	c := v.c
	v.t0 = time.Second
	if c.Scenario == BootStorm {
		v.t0 = 0
		for i := range v.devs {
			s := v.devs[i].m.Start(v.at(0))
			v.schedule(i, 0, s)
		}
		if c.AdmitRate > 0 {
			v.limit(0)
		}
		return 0
	}
	for i := range v.devs { // booted before the disruption: setup, not measurement
		d := &v.devs[i]
		d.m.Start(v.at(0))
		d.m.Due(v.at(0))
		d.m.Result(v.at(0), device.Result{})
		d.online = true
	}
	v.online = len(v.devs)
	returned = v.t0
	switch c.Scenario {
	case BrokerRestart, ThrottledRestart:
		v.down = [2]time.Duration{v.t0, v.t0 + c.Outage}
		returned = v.down[1]
	case Flapping:
		v.flap = [2]time.Duration{v.t0, v.t0 + c.Outage}
		returned = v.flap[1]
	}
	if c.AdmitRate > 0 {
		from := v.t0
		if c.Scenario == ThrottledRestart {
			from = returned
		}
		v.limit(from)
	}
	for i := range v.devs { // the disruption ends every session at once
		v.lose(i, v.t0)
	}
	return returned
}

func (v *virtualFleet) limit(from time.Duration) {
	v.lim = rate.NewLimiter(rate.Limit(v.c.AdmitRate), max(v.c.AdmitBurst, 1))
	v.limFrom = from
}

func (v *virtualFleet) lose(i int, now time.Duration) {
	d := &v.devs[i]
	if !d.online {
		return
	}
	d.online = false
	v.online--
	v.schedule(i, now, d.m.Lost(v.at(now), errDialRefused))
}

// schedule carries out a Step at now.
func (v *virtualFleet) schedule(i int, now time.Duration, s device.Step) {
	switch s.Kind {
	case device.KindWait:
		v.q.push(vevent{at: now + s.Wait, dev: int32(i), kind: vDue})
	case device.KindConnect:
		v.connect(i, now)
	case device.KindOnline:
		v.devs[i].online = true
		v.online++
	}
}

// connect is one attempt reaching the modelled broker at now.
func (v *virtualFleet) connect(i int, now time.Duration) {
	d := &v.devs[i]
	at := v.at(now)
	// record notes the attempt as the device made it and, if it reached
	// the broker, as the broker saw it (seen: when it took it).
	record := func(o testbroker.Outcome, code int, seen time.Duration) {
		if now < v.t0 {
			return // the boot before the disruption is setup, not measurement
		}
		v.b.device(attempt{at: at, clientID: v.ids[i], outcome: o, code: code})
		if seen >= 0 {
			v.b.brokerSaw(attempt{at: v.at(seen), clientID: v.ids[i], outcome: o, code: code})
		}
	}
	if now >= v.down[0] && now < v.down[1] {
		record(testbroker.Dropped, 0, -1)
		v.schedule(i, now, d.m.Result(at, device.Result{Code: device.NoConnack, Err: errDialRefused}))
		return
	}
	if v.lim != nil && now >= v.limFrom {
		switch v.c.AdmitMode {
		case testbroker.RefuseOverLimit:
			if !v.lim.AllowN(at, 1) {
				record(testbroker.Refused, 3, now)
				v.schedule(i, now, d.m.Result(at, device.Result{Code: 3}))
				return
			}
		case testbroker.PauseAccepting: // the socket waits for a token, up to the connect timeout
			res := v.lim.ReserveN(at, 1)
			if wait := res.DelayFrom(at); wait > 0 {
				if wait > 10*time.Second {
					res.CancelAt(at)
					record(testbroker.Dropped, 0, now)
					v.q.push(vevent{at: now + 10*time.Second, dev: int32(i), kind: vResult, code: device.NoConnack})
					return
				}
				record(testbroker.Accepted, 0, now+wait) // accepted off the backlog when a token frees, as the broker records it
				v.q.push(vevent{at: now + wait, dev: int32(i), kind: vResult})
				return
			}
		case testbroker.DisconnectOverLimit:
			if !v.lim.AllowN(at, 1) {
				record(testbroker.Throttled, 0, now)
				v.schedule(i, now, d.m.Result(at, device.Result{}))
				v.lose(i, now)
				return
			}
		}
	}
	record(testbroker.Accepted, 0, now)
	if now >= v.flap[0] && now < v.flap[1] {
		v.q.push(vevent{at: now + v.c.Flap, dev: int32(i), kind: vLost})
	}
	v.schedule(i, now, d.m.Result(at, device.Result{}))
}

// run processes events until every device is back (and no flapping drop is
// still due), the queue empties, or the bound passes.
func (v *virtualFleet) run(ctx context.Context, bound time.Duration) (bool, error) {
	for n := 0; ; n++ {
		if n%65536 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		if v.online == len(v.devs) && (len(v.q) == 0 || v.q[0].at >= v.flap[1]+v.c.Flap) {
			return true, nil
		}
		if len(v.q) == 0 || v.q[0].at > bound {
			return false, nil
		}
		e := heap.Pop(&v.q).(vevent)
		v.now = e.at
		i, d := int(e.dev), &v.devs[e.dev]
		switch e.kind {
		case vDue:
			v.schedule(i, e.at, d.m.Due(v.at(e.at)))
		case vResult:
			r := device.Result{Code: int(e.code)}
			if e.code == device.NoConnack {
				r.Err = errors.New("connect timeout")
			}
			v.schedule(i, e.at, d.m.Result(v.at(e.at), r))
		case vLost:
			v.lose(i, e.at)
		}
	}
}
