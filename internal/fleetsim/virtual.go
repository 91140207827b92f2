package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/reconnect"
)

// Engines a run can name.
const (
	Agents  = "agents"  // real device.Agents, paho clients and the in-process broker, in (scaled) real time
	Virtual = "virtual" // each device's device.Machine against a model of the broker, in virtual time
)

// The virtual engine drives every device's reconnect state machine (the
// same device.Machine the Agent runs) against a model of the broker in
// virtual time: no goroutine, socket or timer per device, so millions of
// devices fit in one process and a synchronised wave is measured as the
// devices make it, not as the host manages to serve it. The model: the
// broker refuses dials while down, answers instantly when up, and applies
// admission (refuse, pause or accept-then-disconnect) and flapping as the
// test broker does; a paused attempt waits for a token up to the connect
// timeout, unseen by the broker if it gives up. What it leaves out is the
// broker's own speed: it admits whatever the admission limit allows,
// however many arrive at once.

// connectTimeout is how long a device waits for a CONNACK (the agents'
// Config.ConnectTimeout default, which a run scales).
const connectTimeout = 10 * time.Second

// vevent is something due at a virtual time.
type vevent struct {
	at   time.Duration // since the engine's epoch
	key  uint32        // a random tie-break: devices due at one instant go in no fixed order
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

func (e vevent) before(f vevent) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	if e.key != f.key {
		return e.key < f.key
	}
	return e.dev < f.dev
}

// vqueue is a 4-ary min-heap of events: shallower than a binary one, its
// children share cache lines, and it needs no interface calls.
type vqueue []vevent

func (q *vqueue) push(e vevent) {
	*q = append(*q, e)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *vqueue) pop() vevent {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		least := i
		for c := 4*i + 1; c <= 4*i+4 && c < len(h); c++ {
			if h[c].before(h[least]) {
				least = c
			}
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*q = h
	return top
}

// virtualFleet is the engine's state.
type virtualFleet struct {
	c       Config
	epoch   time.Time
	machine []device.Machine
	online  []bool
	up      int
	q       vqueue
	order   *rand.Rand // tie-breaks, seeded: runs repeat exactly
	b       *builder   // every attempt from t0, as it is made
	now     time.Duration
	t0      time.Duration
	down    [2]time.Duration // the outage [from, until)
	flap    [2]time.Duration // the flapping window
	lim     *rate.Limiter
	limFrom time.Duration
}

var (
	errDialRefused    = errors.New("connection refused")
	errConnectTimeout = errors.New("connect timeout")
)

func (c Config) validateVirtual() error {
	switch {
	case c.Policy == PahoDefault:
		return fmt.Errorf("paho-default runs real paho clients: use -engine agents")
	case c.Scenario == ConfigOutage || c.Scenario == Observe:
		return fmt.Errorf("scenario %s needs real devices: use -engine agents", c.Scenario)
	case c.Broker != "" || c.Shard.Count > 0 || c.Telemetry > 0 || c.Transport != Mem:
		return fmt.Errorf("-broker, -shard, -telemetry and -transport tcp or tls need real devices: use -engine agents")
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
	timing.Policy, timing.BootSpread = policy, c.bootSpread()
	if err := timing.Validate(); err != nil {
		return nil, err
	}
	before := memInUse()
	v := &virtualFleet{c: c, epoch: start.Truncate(time.Millisecond), machine: make([]device.Machine, c.Devices),
		online: make([]bool, c.Devices), order: rand.New(rand.NewPCG(c.Seed, 1<<63)),
		q: make(vqueue, 0, c.Devices+c.Devices/8)} // about one event a device: sized once, not doubled

	for i := range v.machine {
		if err := v.machine[i].Init(&timing, rand.NewPCG(c.Seed, uint64(i))); err != nil {
			return nil, err
		}
	}
	returned := v.setup()
	v.b = newBuilder(c.Devices, v.at(v.t0), v.at(returned), 1, "devices", "broker", c.Events)
	bound := c.Bound
	if bound == 0 {
		bound = c.Outage + 20*c.MaxBackoff + time.Minute
		if c.AdmitRate > 0 {
			bound += time.Duration(3 * float64(c.Devices) / c.AdmitRate * float64(time.Second))
		}
	}
	finished, err := v.run(ctx, v.t0+bound)
	if err != nil {
		return nil, err
	}
	until := max(v.now, v.t0)
	if finished {
		until += c.MaxBackoff // everyone back: nobody left to retry
	}
	v.b.watchedUntil(v.at(until))
	memPerDevice := float64(memInUse()-before) / float64(c.Devices) / 1024 // machines, queue and the report's state
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
		for i := range v.machine {
			v.schedule(i, 0, v.machine[i].Start(v.at(0)))
		}
		if c.AdmitRate > 0 {
			v.limit(0)
		}
		return 0
	}
	for i := range v.machine { // booted before the disruption: setup, not measurement
		m := &v.machine[i]
		m.Start(v.at(0))
		m.Due(v.at(0))
		m.Result(v.at(0), device.Result{})
		v.online[i] = true
	}
	v.up = len(v.machine)
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
	for i := range v.machine { // the disruption ends every session at once
		v.lose(i, v.t0)
	}
	return returned
}

func (v *virtualFleet) limit(from time.Duration) {
	v.lim = rate.NewLimiter(rate.Limit(v.c.AdmitRate), max(v.c.AdmitBurst, 1))
	v.limFrom = from
}

func (v *virtualFleet) push(e vevent) {
	e.key = v.order.Uint32()
	v.q.push(e)
}

func (v *virtualFleet) lose(i int, now time.Duration) {
	if !v.online[i] {
		return
	}
	v.online[i] = false
	v.up--
	v.schedule(i, now, v.machine[i].Lost(v.at(now), errDialRefused))
}

// schedule carries out a Step at now.
func (v *virtualFleet) schedule(i int, now time.Duration, s device.Step) {
	switch s.Kind {
	case device.KindWait:
		v.push(vevent{at: now + s.Wait, dev: int32(i), kind: vDue})
	case device.KindConnect:
		v.connect(i, now)
	case device.KindOnline:
		v.online[i] = true
		v.up++
	}
}

// record notes an attempt device i made at now as the device made it and,
// if it reached the broker, as the broker saw it (seen: when it took it).
func (v *virtualFleet) record(i int, now time.Duration, o fault.Outcome, code int, seen time.Duration) {
	if now < v.t0 {
		return // the boot before the disruption is setup, not measurement
	}
	v.b.attempt(i, now-v.t0, o, code, -1) // virtual time is exact: no lag
	if seen >= 0 {
		v.b.reached(i, seen-v.t0, o)
	}
}

// connect is one attempt reaching the modelled broker at now.
func (v *virtualFleet) connect(i int, now time.Duration) {
	m := &v.machine[i]
	at := v.at(now)
	if now >= v.down[0] && now < v.down[1] {
		v.record(i, now, fault.Dropped, 0, -1)
		v.schedule(i, now, m.Result(at, device.Result{Code: device.NoConnack, Err: errDialRefused}))
		return
	}
	if v.lim != nil && now >= v.limFrom {
		switch v.c.AdmitMode {
		case fault.RefuseOverLimit:
			if !v.lim.AllowN(at, 1) {
				v.record(i, now, fault.Refused, 3, now)
				v.schedule(i, now, m.Result(at, device.Result{Code: 3}))
				return
			}
		case fault.PauseOverLimit: // the socket waits for a token, up to the connect timeout
			res := v.lim.ReserveN(at, 1)
			if wait := res.DelayFrom(at); wait > 0 {
				if wait > connectTimeout {
					// The device gives up first; the broker never took the
					// socket off its backlog, so it never saw it.
					res.CancelAt(at)
					v.record(i, now, fault.Dropped, 0, -1)
					v.push(vevent{at: now + connectTimeout, dev: int32(i), kind: vResult, code: device.NoConnack})
					return
				}
				v.record(i, now, fault.Accepted, 0, now+wait) // taken off the backlog when a token frees
				v.push(vevent{at: now + wait, dev: int32(i), kind: vResult})
				return
			}
		case fault.DisconnectOverLimit:
			if !v.lim.AllowN(at, 1) {
				v.record(i, now, fault.Throttled, 0, now)
				v.schedule(i, now, m.Result(at, device.Result{}))
				v.lose(i, now)
				return
			}
		}
	}
	v.record(i, now, fault.Accepted, 0, now)
	if now >= v.flap[0] && now < v.flap[1] {
		v.push(vevent{at: now + v.c.Flap, dev: int32(i), kind: vLost})
	}
	v.schedule(i, now, m.Result(at, device.Result{}))
}

// failed reports whether a grid cell has failed for certain by virtual
// time at: too many attempts since the return, or fewer than 99 % of the
// devices back by the time the 99th percentile was due.
func (v *virtualFleet) failed(at time.Duration) bool {
	f := v.c.failFast
	if f == nil {
		return false
	}
	return v.b.afterReturn > f.maxAfterReturn || (at-v.t0 > f.p99By && v.up < f.p99Count)
}

// run processes events until every device is back (and no flapping drop is
// still due), the queue empties, or the bound passes.
func (v *virtualFleet) run(ctx context.Context, bound time.Duration) (bool, error) {
	for n := 0; ; n++ {
		if n%65536 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		if v.up == len(v.machine) && (len(v.q) == 0 || v.q[0].at >= v.flap[1]+v.c.Flap) {
			return true, nil
		}
		if len(v.q) == 0 {
			return false, nil
		}
		if next := v.q[0].at; next > bound || v.failed(next) {
			v.now = max(v.now, min(next, bound)) // nothing happened before the next event
			return false, nil
		}
		e := v.q.pop()
		v.now = e.at
		i, m := int(e.dev), &v.machine[e.dev]
		switch e.kind {
		case vDue:
			v.schedule(i, e.at, m.Due(v.at(e.at)))
		case vResult:
			r := device.Result{Code: int(e.code)}
			if e.code == device.NoConnack {
				r.Err = errConnectTimeout
			}
			v.schedule(i, e.at, m.Result(v.at(e.at), r))
		case vLost:
			v.lose(i, e.at)
		}
	}
}
