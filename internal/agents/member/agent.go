package member

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
)

// Agent is a real device.Agent, with a store-and-forward publisher when
// the fleet has telemetry. Its zero value is not usable: use NewAgent.
// Start and Stop are called from one goroutine; Stats and StopTelemetry
// may be called from any.
type Agent struct {
	a        *device.Agent
	pub      *publisher.Publisher // nil without telemetry
	id       string
	every    time.Duration
	phase    time.Duration
	produce  context.CancelFunc
	produced chan struct{} // closed when the generator has returned
	running  sync.WaitGroup
}

// NewAgent builds device i's agent (client ID dev-<i>) from c, its jitter
// and its telemetry's phase drawn from c.Seed and i.
func NewAgent(i int, c Config) (*Agent, error) {
	cfg := device.Config{Broker: c.Broker, Failover: c.Failover, ClientID: attempt.ClientID(i), Timing: c.Timing, Protocol: c.Protocol,
		Source: rand.NewPCG(c.Seed, uint64(i)), KeepAlive: c.KeepAlive, PingTimeout: c.PingTimeout,
		ConnectTimeout: c.ConnectTimeout, OnEvent: tellLog(c.Log, i, c.NodeOf)}
	if c.Dial != nil {
		cfg.Dial = c.Dial(i)
	}
	if c.TLS != nil {
		t, err := c.TLS(i)
		if err != nil {
			return nil, err
		}
		cfg.TLS = t
	}
	if c.Metrics != nil {
		cfg.Metrics = c.Metrics(i)
	}
	a, err := device.New(cfg)
	if err != nil {
		return nil, err
	}
	m := &Agent{a: a, id: cfg.ClientID, every: c.Telemetry.Every}
	if t := c.Telemetry; t.Every > 0 {
		src := rand.NewPCG(c.Seed, uint64(i)|1<<62)
		m.phase = time.Duration(jitter.Float64(src) * float64(t.Every))
		m.pub, err = publisher.New(publisher.Config{Session: a, Retry: t.Retry, DrainRate: t.DrainRate,
			PublishTimeout: t.PublishTimeout, Source: src})
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// tellLog is device i's event hook, telling l of its attempts and losses
// (nil: none), and of the node each went to (nodeOf; nil: node 0). Events
// come from the agent's one loop, in order.
func tellLog(l Log, i int, nodeOf func(endpoint string) int) func(device.Event) {
	if l == nil {
		return nil
	}
	node := func(endpoint string) int {
		if nodeOf == nil {
			return 0
		}
		return nodeOf(endpoint)
	}
	var due time.Time // when the wait before the next attempt ends
	return func(e device.Event) {
		switch e.Kind {
		case device.EventBackingOff:
			due = e.Time.Add(e.Delay)
		case device.EventConnecting:
			l.Begin(e.Time, i, e.Time.Sub(due))
		case device.EventConnected:
			l.End(e.Time, i, fault.Accepted, 0, node(e.Endpoint))
		case device.EventAttemptFailed:
			o, code := fault.Dropped, 0
			if e.Code != device.NoConnack {
				o, code = fault.Refused, e.Code
			}
			l.End(e.Time, i, o, code, node(e.Endpoint))
		case device.EventLost:
			l.Lost(e.Time, i)
		}
	}
}

// Start starts the agent and, with telemetry, its publisher and the
// readings it enqueues; they run until ctx ends or Stop.
func (m *Agent) Start(ctx context.Context) error {
	if err := m.a.Start(ctx); err != nil {
		return err
	}
	if m.pub == nil {
		return nil
	}
	gen, cancel := context.WithCancel(ctx)
	m.produce, m.produced = cancel, make(chan struct{})
	m.running.Add(1)
	go func() {
		defer m.running.Done()
		_ = m.pub.Run(ctx) // ends with the run's context; what it left queued is counted
	}()
	go func() {
		defer close(m.produced)
		m.generate(gen)
	}()
	return nil
}

// generate enqueues one small reading every m.every, whatever the session
// is doing: the publisher keeps them through outages.
func (m *Agent) generate(ctx context.Context) {
	if reconnect.Sleep(ctx, nil, m.phase) != nil {
		return
	}
	tick := time.NewTicker(m.every)
	defer tick.Stop()
	topic := "telemetry/" + m.id
	for {
		_, _ = m.pub.Publish(topic, []byte(`{"temp":21.5}`)) // counted by the publisher's Stats
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// StopTelemetry stops producing readings and returns once nothing more
// can be enqueued; what is queued still drains.
func (m *Agent) StopTelemetry() {
	if m.produce != nil {
		m.produce()
		<-m.produced
	}
}

// Stats is the publisher's (the zero Stats without telemetry).
func (m *Agent) Stats() publisher.Stats {
	if m.pub == nil {
		return publisher.Stats{}
	}
	return m.pub.Stats()
}

// Stop stops the readings, the agent and its publisher.
func (m *Agent) Stop(ctx context.Context) error {
	m.StopTelemetry()
	err := m.a.Stop(ctx)
	m.running.Wait()
	if m.pub != nil {
		_ = m.pub.Close()
	}
	return err
}
