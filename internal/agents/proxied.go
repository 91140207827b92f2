package agents

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/certs"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// externalTLS is what each device presents to and trusts of an external
// broker at ssl://, or nil for a plain one: one certificate for every
// device (TLSCert), or one a device issued from the CA's key (TLSCAKey,
// with the client ID as its name). ServerName is the broker's own host, so
// that the devices verify it through the proxy too.
func externalTLS(c plan.Plan) (func(i int) (*tls.Config, error), error) {
	u, err := url.Parse(c.Broker)
	if err != nil || !plan.IsTLSScheme(u.Scheme) {
		return nil, err
	}
	base, err := device.LoadTLS(c.TLSCA, c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, err
	}
	base.ServerName = u.Hostname()
	if c.TLSCAKey == "" {
		return func(int) (*tls.Config, error) { return base, nil }, nil
	}
	ca, err := certs.LoadCA(c.TLSCA, c.TLSCAKey)
	if err != nil {
		return nil, err
	}
	return func(i int) (*tls.Config, error) {
		cert, err := ca.Issue(clientID(i), x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		cfg := base.Clone()
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil
	}, nil
}

// setupProxy starts the fault proxy in front of the broker and points the
// members at it. In memory (the in-process broker's mem transport) the
// members dial it directly; otherwise it listens on loopback TCP.
func (r *run) setupProxy(mc *memberConfig) error {
	cfg := faultproxy.Config{DialTimeout: r.scale(plan.ConnectTimeout), Seed: r.c.Seed}
	inMemory := r.broker != nil && r.c.Transport == plan.Mem
	switch {
	case inMemory:
		b := r.broker
		cfg.Upstream = func(ctx context.Context) (net.Conn, error) {
			return b.Dial(nil, paho.ClientOptions{ConnectTimeout: cfg.DialTimeout})
		}
	case r.broker != nil:
		u, err := url.Parse(r.broker.URL())
		if err != nil {
			return err
		}
		cfg.Upstream, cfg.Listen = faultproxy.Upstream(u.Host), "127.0.0.1:0"
	default:
		u, err := url.Parse(r.c.Broker)
		if err != nil {
			return fmt.Errorf("broker URL %q: %w", r.c.Broker, err)
		}
		cfg.Upstream, cfg.Listen = faultproxy.Upstream(u.Host), "127.0.0.1:0"
	}
	p, err := faultproxy.New(cfg)
	if err != nil {
		return err
	}
	r.proxy = p
	// Devices know when they are connected: a broker behind a silent path
	// still counts its sessions until its own keepalive gives up on them.
	r.obs = deviceObserver{r.devlog}
	if inMemory {
		mc.dial = func(int) device.DialFunc {
			return func(ctx context.Context, _ *url.URL) (net.Conn, error) { return p.Dial(ctx) }
		}
		return nil
	}
	if r.c.Transport == plan.TLS && r.broker != nil {
		mc.broker = "ssl://" + p.Addr() // TLS passes through; the devices keep their TLS dialer
		return nil
	}
	if t := r.externalTLS; t != nil {
		mc.broker, mc.tls = "ssl://"+p.Addr(), nil
		mc.dial = func(i int) device.DialFunc { return tlsDialerFor(i, t) }
		return nil
	}
	mc.broker, mc.dial = "tcp://"+p.Addr(), loopbackDialer
	return nil
}

// setAdmission applies the run's admission limit where the run can: the
// in-process broker's own, or the proxy in front of an external one.
func (r *run) setAdmission() error {
	if r.broker != nil {
		return r.broker.SetAdmission(r.admission)
	}
	return r.proxy.SetAdmission(r.admission)
}

// breaker is what the run's disruption acts on: the fault proxy when one
// stands in the devices' path, else the in-process broker.
func (r *run) breaker() fault.Breaker {
	if r.proxy != nil {
		return r.proxy
	}
	return r.broker
}

// breakPath is the disruption of the path's own faults, through the proxy.
func (r *run) breakPath(ctx context.Context) error {
	p := r.proxy
	switch r.c.Scenario {
	case plan.Blackhole:
		p.BeginBlackhole()
		if err := reconnect.Sleep(ctx, nil, r.scale(r.c.Outage)); err != nil {
			return err
		}
		p.EndBlackhole()
	case plan.Latency:
		if err := p.SetLatency(r.scale(r.c.Latency), r.scale(r.c.LatencyJitter)); err != nil {
			return err
		}
		p.DropAll()
		// The path stays slow for the outage, in the background: the fleet
		// is measured coming back through it.
		stop := time.AfterFunc(r.scale(r.c.Outage), func() { _ = p.SetLatency(0, 0) })
		r.cleanups = append(r.cleanups, func() { stop.Stop() })
	}
	return nil
}

// proxySaw is what the proxy let through or refused since t, as attempts:
// what the broker behind it was asked for.
func proxySaw(p *faultproxy.Proxy, t time.Time) []sighting {
	var out []sighting
	for _, a := range p.Recorder().Attempts() {
		if !a.Accept.Before(t) {
			out = append(out, sighting{at: a.Accept, clientID: a.ClientID, outcome: a.Outcome, lag: -1})
		}
	}
	return out
}
