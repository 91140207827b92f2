// Package wire is the engine of real connections. Each device is the
// firmware's reconnect core (devicecore.Core, what device.Agent decides
// with) on a real connection that speaks MQTT itself: CONNECT and its
// CONNACK in 3.1.1 or 5, keepalive pings and a silent path noticed, an
// MQTT 5 DISCONNECT's reason code, the Server References the agent
// follows. A process's devices share a few event loops: no goroutine a
// device, a connection costing its socket and its device's fields. A
// device draws its waits from the source its agent would (seed, index),
// so both retry alike.
//
// A Fleet is a member of a fleet of package agents: the brokers, fault
// proxies, disruptions and the report are that engine's; what differs is
// what a device is.
package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/devicecore"
	"github.com/herdguard/herdguard/internal/endpoint"
	"github.com/herdguard/herdguard/publisher"
)

// Fleet is a process's wire devices on their loops. Its zero value is not
// usable: use New. Start and Stop are each called once, from one goroutine.
type Fleet struct {
	loops   []*loop
	running sync.WaitGroup
	stop    chan struct{}
	ended   sync.Once
	started bool
	unwatch func() bool
	produce atomic.Bool // readings are still made
	stats   telemetryCounts
}

// New builds the devices ids, device i as configFor(i) says: its timing,
// protocol, keepalive, endpoints, dialer and the log it tells its attempts
// to. Devices that share those share one profile. A device with no timing
// of the firmware's (paho-default's paho) cannot run here.
func New(ids []int, configFor func(i int) member.Config) (*Fleet, error) {
	n := max(1, min(runtime.GOMAXPROCS(0), len(ids)))
	f := &Fleet{stop: make(chan struct{})}
	f.produce.Store(true)
	epoch := fmt.Sprintf("wire-%x", time.Now().UnixNano()) // this run's: a reading's (client, epoch, seq) is unique
	profiles := map[string]*profile{}
	var c0 member.Config
	for k, i := range ids {
		c := configFor(i)
		if k == 0 {
			c0 = c
		}
		p, err := profileOf(c, profiles)
		if err != nil {
			return nil, err
		}
		if k < n {
			f.loops = append(f.loops, &loop{redirects: map[int32]*url.URL{}, stop: f.stop, log: logOrNone(c.Log),
				epoch: epoch, seed: c.Seed, produce: &f.produce, stats: &f.stats})
		}
		l := f.loops[k%n]
		l.devs = append(l.devs, dev{src: *rand.NewPCG(c.Seed, uint64(i)), prof: p, sock: noSock, id: int32(i),
			place: int32(len(l.devs))})
	}
	for _, l := range f.loops {
		var err error
		if l.drv, err = driverFor(c0); err != nil {
			f.shutDrivers()
			return nil, err
		}
	}
	return f, nil
}

// Devices is how many devices the fleet runs.
func (f *Fleet) Devices() int {
	n := 0
	for _, l := range f.loops {
		n += len(l.devs)
	}
	return n
}

// driverFor is how c's devices reach their brokers: sockets of the
// engine's own on plain TCP, net.Conns from c's dialer otherwise.
func driverFor(c member.Config) (driver, error) {
	if c.Dial == nil && c.TLS == nil || c.PlainTCP {
		return newEpoll()
	}
	dialer := func(dev int32) device.DialFunc { return c.Dial(int(dev)) }
	if c.Dial == nil {
		dialer = func(dev int32) device.DialFunc { return tlsDialer(c.TLS, int(dev)) }
	}
	return newConns(dialer, c.ConnectTimeout), nil
}

// tlsDialer dials device i's TLS connection as cfgFor(i) says.
func tlsDialer(cfgFor func(i int) (*tls.Config, error), i int) device.DialFunc {
	cfg, err := cfgFor(i)
	return func(ctx context.Context, u *url.URL) (net.Conn, error) {
		if err != nil {
			return nil, err
		}
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, "tcp", u.Host)
	}
}

// profileOf is c's profile: one already made for a config alike, or a new
// one, checked as device.New checks an agent's.
func profileOf(c member.Config, made map[string]*profile) (*profile, error) {
	if c.Timing == nil {
		return nil, errors.New("wire: a device needs the firmware's timing: paho-default's reconnect is paho's own, run it on the agents")
	}
	raw := append([]string{c.Broker}, c.Failover...)
	key := fmt.Sprintf("%p %v %v %v %v %v %s", c.Timing, c.Protocol, c.KeepAlive, c.PingTimeout, c.ConnectTimeout, c.Telemetry.Every,
		strings.Join(raw, " "))
	if p, ok := made[key]; ok {
		return p, nil
	}
	if err := c.Timing.Validate(); err != nil {
		return nil, err
	}
	p := &profile{timing: devicecore.Timing(*c.Timing), v5: c.Protocol == device.MQTT5, keepAlive: c.KeepAlive,
		pingTimeout: c.PingTimeout, connectTimeout: c.ConnectTimeout, maxRedirects: 3, telemetry: c.Telemetry.Every}
	for k, s := range raw {
		u, err := endpoint.ParseURL(fmt.Sprintf("Failover[%d]", k-1), s)
		if err != nil {
			return nil, err
		}
		node := 0
		if c.NodeOf != nil {
			node = c.NodeOf(s)
		}
		p.endpoints, p.nodes = append(p.endpoints, u), append(p.nodes, node)
	}
	if len(p.endpoints) > 255 {
		return nil, fmt.Errorf("wire: %d endpoints, at most 255", len(p.endpoints))
	}
	made[key] = p
	return p, nil
}

// Start starts the loops; the devices boot within their boot spread and
// run until ctx ends or Stop.
func (f *Fleet) Start(ctx context.Context) error {
	origin := time.Now()
	for _, l := range f.loops {
		l.origin = origin
		f.running.Go(l.run)
	}
	f.started = true
	f.unwatch = context.AfterFunc(ctx, f.endLoops)
	return nil
}

// endLoops ends the loops, once.
func (f *Fleet) endLoops() {
	f.ended.Do(func() {
		close(f.stop)
		for _, l := range f.loops {
			l.drv.wake()
		}
	})
}

// Stop ends every session with a DISCONNECT, closes every connection and
// waits for the loops. A fleet never started releases its drivers here.
func (f *Fleet) Stop(context.Context) error {
	if f.unwatch != nil {
		f.unwatch()
	}
	f.endLoops()
	f.running.Wait()
	if !f.started {
		f.shutDrivers()
	}
	return nil
}

// Stats is the fleet's telemetry so far, as a publisher counts its own:
// readings made, acknowledged, sent again, and not yet acknowledged.
func (f *Fleet) Stats() publisher.Stats {
	delivered := f.stats.delivered.Load() // before what was made, which only grows: Queued >= 0
	s := publisher.Stats{Delivered: delivered, Enqueued: f.stats.enqueued.Load(), Failures: f.stats.failures.Load()}
	s.Queued = int(s.Enqueued - s.Delivered)
	return s
}

// StopTelemetry makes no more readings; those made are still sent.
func (f *Fleet) StopTelemetry() { f.produce.Store(false) }

// shutDrivers releases the drivers of loops that never ran: those New
// made before it failed, or a fleet stopped before it started.
func (f *Fleet) shutDrivers() {
	for _, l := range f.loops {
		if l.drv != nil {
			l.drv.shut()
			l.drv = nil
		}
	}
}

// logOrNone is l, or a log that hears nothing.
func logOrNone(l member.Log) member.Log {
	if l == nil {
		return noLog{}
	}
	return l
}

type noLog struct{}

func (noLog) Begin(time.Time, int, time.Duration)         {}
func (noLog) End(time.Time, int, fault.Outcome, int, int) {}
func (noLog) Lost(time.Time, int)                         {}
