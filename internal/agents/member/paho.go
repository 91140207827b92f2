package member

import (
	"context"
	"math/rand/v2"
	"net"
	"net/url"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/reconnect"
)

// PahoClient is a bare paho client with paho's built-in reconnect: what a fleet
// gets without this project (the paho-default baseline). paho retries a
// lost connection at once, then after 1, 2, 4 s ... up to its
// MaxReconnectInterval, with no jitter; its 1 s start is a constant, so it
// runs in real time only. Its zero value is not usable: use NewPaho.
type PahoClient struct {
	c      paho.Client
	boot   time.Duration
	cancel context.CancelFunc
	booted chan struct{}
}

// NewPaho builds device i's paho client from c (its Paho settings, its
// broker, dialer, keepalive and connect timeout; no failover).
func NewPaho(i int, c Config) *PahoClient {
	m := &PahoClient{}
	r := rand.New(rand.NewPCG(c.Seed, uint64(i)))
	m.boot = time.Duration(r.Float64() * float64(c.Paho.BootSpread))
	opts := paho.NewClientOptions().AddBroker(c.Broker).SetClientID(attempt.ClientID(i)).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetMaxReconnectInterval(c.Paho.MaxInterval).SetConnectTimeout(c.ConnectTimeout).SetKeepAlive(c.KeepAlive)
	if c.Dial != nil {
		opts.SetCustomOpenConnectionFn(pahoDial(c.Dial(i)))
	}
	if l := c.Log; l != nil {
		opts.SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			switch n.(type) {
			case paho.ConnectionNotificationConnecting:
				l.Begin(time.Now(), i, -1) // paho keeps its schedule to itself
			case paho.ConnectionNotificationFailed:
				l.End(time.Now(), i, fault.Dropped, 0, 0)
			}
		})
		opts.SetOnConnectHandler(func(paho.Client) { l.End(time.Now(), i, fault.Accepted, 0, 0) })
		opts.SetConnectionLostHandler(func(paho.Client, error) { l.Lost(time.Now(), i) })
	}
	m.c = paho.NewClient(opts)
	return m
}

// Start connects after the client's boot wait; paho keeps trying from
// then on, in the background.
func (m *PahoClient) Start(ctx context.Context) error {
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

// Stop disconnects the client.
func (m *PahoClient) Stop(context.Context) error {
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
