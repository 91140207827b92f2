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
// that the devices verify it through the proxy too; a cluster's devices
// verify each node by its own (see setupProxies).
func externalTLS(c plan.Plan) (func(i int) (*tls.Config, error), error) {
	u, err := url.Parse(c.Broker)
	if err != nil || !plan.IsTLSScheme(u.Scheme) {
		return nil, err
	}
	base, err := device.LoadTLS(c.TLSCA, c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, err
	}
	if len(c.Peers) == 0 {
		base.ServerName = u.Hostname()
	}
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

// setupProxies starts a fault proxy in front of each node (the broker, a
// cluster's nodes, or the external brokers) and points the members at
// them. In memory (the in-process broker's mem transport) the members dial
// them directly, each node's proxy by the node's own URL; otherwise each
// listens on loopback TCP.
func (f *Fleet) setupProxies(mc *member.Config) error {
	inMemory := len(f.nodes) > 0 && f.p.Transport == plan.Mem
	upstream := f.p.Brokers()
	for _, b := range f.nodes {
		upstream = append(upstream, b.URL())
	}
	for k, raw := range upstream {
		// Each proxy's latency jitter a source of its own: the run's seed,
		// the node in its upper half.
		cfg := faultproxy.Config{DialTimeout: f.scale(plan.ConnectTimeout), Seed: f.p.Seed + uint64(k)<<32}
		if inMemory {
			b := f.nodes[k]
			cfg.Upstream = func(ctx context.Context) (net.Conn, error) {
				return b.Dial(nil, paho.ClientOptions{ConnectTimeout: cfg.DialTimeout})
			}
		} else {
			u, err := url.Parse(raw)
			if err != nil {
				return fmt.Errorf("broker URL %q: %w", raw, err)
			}
			cfg.Upstream, cfg.Listen = faultproxy.Upstream(u.Host), "127.0.0.1:0"
		}
		p, err := faultproxy.New(cfg)
		if err != nil {
			return err
		}
		f.proxies = append(f.proxies, p)
	}
	// Devices know when they are connected: a broker behind a silent path
	// still counts its sessions until its own keepalive gives up on them.
	f.obs = f.devlog
	if inMemory {
		mc.Dial = dialProxies(f.urls, f.proxies)
		return nil
	}
	return f.dialProxiesOverTCP(mc, upstream)
}

// dialProxiesOverTCP points the members at the proxies' loopback
// addresses, in place of the brokers (upstream, by node) behind them.
func (f *Fleet) dialProxiesOverTCP(mc *member.Config, upstream []string) error {
	names := map[string]string{} // by a proxy's URL: the name its node's TLS certificate bears
	for k, p := range f.proxies {
		scheme := "tcp://"
		if f.p.Transport == plan.TLS && len(f.nodes) > 0 || f.externalTLS != nil {
			scheme = "ssl://" // TLS passes through
		}
		f.urls[k] = scheme + p.Addr()
		if u, err := url.Parse(upstream[k]); err == nil {
			names[f.urls[k]] = u.Hostname()
		}
	}
	mc.Broker = f.urls[0]
	switch {
	case f.p.Transport == plan.TLS && len(f.nodes) > 0: // the devices keep their TLS dialer: the broker's name is the loopback address
	case f.externalTLS != nil:
		t := f.externalTLS
		mc.TLS = nil
		mc.Dial = func(i int) device.DialFunc { return member.LoopbackTLSDialerByName(i, t, names) }
	default:
		mc.Dial = member.LoopbackDialer
	}
	return nil
}

// dialProxies is the dialer of devices that reach in-memory nodes through
// their proxies: a dial to node k's URL (urls, by node) goes to proxy k.
func dialProxies(urls []string, proxies []*faultproxy.Proxy) func(int) device.DialFunc {
	byURL := map[string]*faultproxy.Proxy{}
	for k, u := range urls {
		byURL[u] = proxies[k]
	}
	dial := func(ctx context.Context, u *url.URL) (net.Conn, error) {
		p, ok := byURL[u.String()]
		if !ok {
			return nil, fmt.Errorf("no fault proxy for %s", u.Redacted())
		}
		return p.Dial(ctx)
	}
	return func(int) device.DialFunc { return dial }
}

// proxiesSaw is what the proxies let through or refused since t, as
// attempts, each at its node: what the brokers behind them were asked for.
func proxiesSaw(proxies []*faultproxy.Proxy, t time.Time) []observer.Sighting {
	var out []observer.Sighting
	for k, p := range proxies {
		for _, a := range p.Recorder().Attempts() {
			if !a.Accept.Before(t) {
				out = append(out, observer.Sighting{At: a.Accept, ClientID: a.ClientID, Outcome: a.Outcome, Lag: -1, Node: uint8(k)})
			}
		}
	}
	return observer.InOrder(out)
}
