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
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/certs"
	"github.com/herdguard/herdguard/internal/plan"
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
		cert, err := ca.Issue(deviceID(i), x509.ExtKeyUsageClientAuth)
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
func (f *Fleet) setupProxy(mc *member.Config) error {
	cfg := faultproxy.Config{DialTimeout: f.scale(plan.ConnectTimeout), Seed: f.p.Seed}
	inMemory := len(f.nodes) > 0 && f.p.Transport == plan.Mem
	switch {
	case inMemory:
		b := f.nodes[0]
		cfg.Upstream = func(ctx context.Context) (net.Conn, error) {
			return b.Dial(nil, paho.ClientOptions{ConnectTimeout: cfg.DialTimeout})
		}
	case len(f.nodes) > 0:
		u, err := url.Parse(f.nodes[0].URL())
		if err != nil {
			return err
		}
		cfg.Upstream, cfg.Listen = faultproxy.Upstream(u.Host), "127.0.0.1:0"
	default:
		u, err := url.Parse(f.p.Broker)
		if err != nil {
			return fmt.Errorf("broker URL %q: %w", f.p.Broker, err)
		}
		cfg.Upstream, cfg.Listen = faultproxy.Upstream(u.Host), "127.0.0.1:0"
	}
	p, err := faultproxy.New(cfg)
	if err != nil {
		return err
	}
	f.proxy = p
	// Devices know when they are connected: a broker behind a silent path
	// still counts its sessions until its own keepalive gives up on them.
	f.obs = f.devlog
	switch {
	case inMemory:
		mc.Dial = func(int) device.DialFunc {
			return func(ctx context.Context, _ *url.URL) (net.Conn, error) { return p.Dial(ctx) }
		}
	case f.p.Transport == plan.TLS && len(f.nodes) > 0:
		mc.Broker = "ssl://" + p.Addr() // TLS passes through; the devices keep their TLS dialer
	case f.externalTLS != nil:
		t := f.externalTLS
		mc.Broker, mc.TLS = "ssl://"+p.Addr(), nil
		mc.Dial = func(i int) device.DialFunc { return member.LoopbackTLSDialer(i, t) }
	default:
		mc.Broker, mc.Dial = "tcp://"+p.Addr(), member.LoopbackDialer
	}
	return nil
}

// proxySaw is what the proxy let through or refused since t, as attempts:
// what the broker behind it was asked for.
func proxySaw(p *faultproxy.Proxy, t time.Time) []observer.Sighting {
	var out []observer.Sighting
	for _, a := range p.Recorder().Attempts() {
		if !a.Accept.Before(t) {
			out = append(out, observer.Sighting{At: a.Accept, ClientID: a.ClientID, Outcome: a.Outcome, Lag: -1})
		}
	}
	return out
}
