package agents

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/jitter"
	"github.com/herdguard/herdguard/publisher"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// member is one simulated device.
type member interface {
	start(ctx context.Context) error
	stop(ctx context.Context) error
}

// memberConfig is what every member of a run shares.
type memberConfig struct {
	broker                 string
	failover               []string                         // more endpoints, in turn (failover)
	metrics                func(i int) device.Metrics       // nil: none
	tls                    func(i int) (*tls.Config, error) // an external broker's TLS, when dial is the agent's own
	dial                   func(i int) device.DialFunc      // nil: the agent's own dialer
	timing                 *device.Timing
	keepAlive, pingTimeout time.Duration
	// connectTimeout bounds one connect attempt, scaled as every duration.
	connectTimeout time.Duration
	seed           uint64
	log            *deviceLog // every attempt the devices make
	// paho-default only: paho's own reconnect with this cap.
	pahoMaxInterval time.Duration
	pahoBootSpread  time.Duration
	// telemetry, if > 0: each agent publishes a message this often
	// (scaled) through a publisher with these retry and drain settings.
	telemetry  time.Duration
	pubRetry   *reconnect.Policy
	drainRate  float64
	pubTimeout time.Duration
}

func clientID(i int) string { return "dev-" + strconv.Itoa(i) }

// agentMember is a real device.Agent, with a store-and-forward publisher
// when the run has telemetry.
type agentMember struct {
	a        *device.Agent
	pub      *publisher.Publisher
	id       string
	every    time.Duration
	phase    time.Duration
	produce  context.CancelFunc
	produced chan struct{} // closed when the generator has returned
	running  sync.WaitGroup
}

func newAgentMember(i int, mc memberConfig) (*agentMember, error) {
	cfg := device.Config{Broker: mc.broker, Failover: mc.failover, ClientID: clientID(i), Timing: mc.timing,
		Source: rand.NewPCG(mc.seed, uint64(i)), KeepAlive: mc.keepAlive, PingTimeout: mc.pingTimeout,
		ConnectTimeout: mc.connectTimeout}
	if mc.dial != nil {
		cfg.Dial = mc.dial(i)
	}
	if mc.tls != nil {
		t, err := mc.tls(i)
		if err != nil {
			return nil, err
		}
		cfg.TLS = t
	}
	if mc.metrics != nil {
		cfg.Metrics = mc.metrics(i)
	}
	if l := mc.log; l != nil {
		var due time.Time // when the wait before the next attempt ends; events come from the agent's one loop
		cfg.OnEvent = func(e device.Event) {
			switch e.Kind {
			case device.EventBackingOff:
				due = e.Time.Add(e.Delay)
			case device.EventConnecting:
				l.begin(e.Time, i, e.Time.Sub(due))
			case device.EventConnected:
				l.end(i, fault.Accepted, 0)
			case device.EventAttemptFailed:
				o, code := fault.Dropped, 0
				if e.Code != device.NoConnack {
					o, code = fault.Refused, e.Code
				}
				l.end(i, o, code)
			case device.EventLost:
				l.lost(e.Time, i)
			}
		}
	}
	a, err := device.New(cfg)
	if err != nil {
		return nil, err
	}
	m := &agentMember{a: a, id: cfg.ClientID, every: mc.telemetry}
	if mc.telemetry > 0 {
		src := rand.NewPCG(mc.seed, uint64(i)|1<<62)
		m.phase = time.Duration(jitter.Float64(src) * float64(mc.telemetry))
		m.pub, err = publisher.New(publisher.Config{Session: a, Retry: mc.pubRetry, DrainRate: mc.drainRate,
			PublishTimeout: mc.pubTimeout, Source: src})
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *agentMember) start(ctx context.Context) error {
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
func (m *agentMember) generate(ctx context.Context) {
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

// stopTelemetry stops producing and returns once nothing more can be
// enqueued; what is queued still drains.
func (m *agentMember) stopTelemetry() {
	if m.produce != nil {
		m.produce()
		<-m.produced
	}
}

func (m *agentMember) stop(ctx context.Context) error {
	m.stopTelemetry()
	err := m.a.Stop(ctx)
	m.running.Wait()
	if m.pub != nil {
		_ = m.pub.Close()
	}
	return err
}

// pahoMember is a bare paho client with paho's built-in reconnect: what a
// fleet gets without this project (the paho-default baseline). paho retries
// a lost connection at once, then after 1, 2, 4 s ... up to its
// MaxReconnectInterval, with no jitter; its 1 s start is a constant, so it
// runs in real time only.
type pahoMember struct {
	c      paho.Client
	boot   time.Duration
	cancel context.CancelFunc
	booted chan struct{}
}

func newPahoMember(i int, mc memberConfig) *pahoMember {
	m := &pahoMember{}
	r := rand.New(rand.NewPCG(mc.seed, uint64(i)))
	m.boot = time.Duration(r.Float64() * float64(mc.pahoBootSpread))
	opts := paho.NewClientOptions().AddBroker(mc.broker).SetClientID(clientID(i)).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetMaxReconnectInterval(mc.pahoMaxInterval).SetConnectTimeout(mc.connectTimeout).SetKeepAlive(mc.keepAlive)
	if mc.dial != nil {
		opts.SetCustomOpenConnectionFn(pahoDial(mc.dial(i)))
	}
	l := mc.log
	opts.SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
		switch n.(type) {
		case paho.ConnectionNotificationConnecting:
			if l != nil {
				l.begin(time.Now(), i, -1) // paho keeps its schedule to itself
			}
		case paho.ConnectionNotificationFailed:
			if l != nil {
				l.end(i, fault.Dropped, 0)
			}
		}
	})
	opts.SetOnConnectHandler(func(paho.Client) {
		if l != nil {
			l.end(i, fault.Accepted, 0)
		}
	})
	opts.SetConnectionLostHandler(func(paho.Client, error) {
		if l != nil {
			l.lost(time.Now(), i)
		}
	})
	m.c = paho.NewClient(opts)
	return m
}

func (m *pahoMember) start(ctx context.Context) error {
	ctx, m.cancel = context.WithCancel(ctx)
	m.booted = make(chan struct{})
	go func() {
		defer close(m.booted)
		if reconnect.Sleep(ctx, nil, m.boot) == nil {
			m.c.Connect() // with ConnectRetry, paho keeps trying in the background
		}
	}()
	return nil
}

func (m *pahoMember) stop(context.Context) error {
	m.cancel()
	<-m.booted
	m.c.Disconnect(100)
	return nil
}

// pahoDial is d as paho's own connection function, for paho-default's
// clients: each dial bounded by the client's connect timeout.
func pahoDial(d device.DialFunc) paho.OpenConnectionFunc {
	return func(u *url.URL, o paho.ClientOptions) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), o.ConnectTimeout)
		defer cancel()
		return d(ctx, u)
	}
}

// loopbackTLSDialer is loopbackDialer with device i's own client
// certificate, issued by the broker's CA (mutual TLS). A certificate that
// cannot be issued fails every dial, and the run says so.
func loopbackTLSDialer(i int, b *testbroker.Broker) device.DialFunc {
	cfg, err := b.ClientTLSConfig(clientID(i))
	if err != nil {
		return func(context.Context, *url.URL) (net.Conn, error) { return nil, err }
	}
	return loopbackDialerTLS(i, cfg)
}

// tlsDialerFor is loopbackDialerTLS with device i's configuration, or a
// dialer that fails with the reason it has none.
func tlsDialerFor(i int, cfgFor func(int) (*tls.Config, error)) device.DialFunc {
	cfg, err := cfgFor(i)
	if err != nil {
		return func(context.Context, *url.URL) (net.Conn, error) { return nil, err }
	}
	return loopbackDialerTLS(i, cfg)
}

// loopbackDialerTLS is loopbackDialer with TLS on top.
func loopbackDialerTLS(i int, cfg *tls.Config) device.DialFunc {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%4))}
	return func(ctx context.Context, uri *url.URL) (net.Conn, error) {
		d := tls.Dialer{NetDialer: &net.Dialer{LocalAddr: local}, Config: cfg}
		return d.DialContext(ctx, "tcp", uri.Host)
	}
}

// loopbackDialer spreads TCP devices over four loopback source addresses,
// so a large fleet's reconnect churn does not run one (source, destination)
// pair out of its ~28,000 ephemeral ports.
func loopbackDialer(i int) device.DialFunc {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%4))}
	return func(ctx context.Context, uri *url.URL) (net.Conn, error) {
		d := net.Dialer{LocalAddr: local}
		return d.DialContext(ctx, "tcp", uri.Host)
	}
}
