package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/certs"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// externalTLS is what each device presents to and trusts of an external
// broker at ssl://, or nil for a plain one. Either every device has one
// certificate (TLSCert), or each device has one issued from the CA's key
// (TLSCAKey, with the client ID as its name). ServerName is the broker's
// own host, so that the devices verify it through the proxy too. A
// cluster's devices verify each node by its own (see proxiesOverTCP).
func externalTLS(p plan.Plan) (func(i int) (*tls.Config, error), error) {
	u, err := url.Parse(p.Broker)
	if err != nil || !plan.IsTLSScheme(u.Scheme) {
		return nil, err
	}
	base, err := device.LoadTLS(p.TLSCA, p.TLSCert, p.TLSKey)
	if err != nil {
		return nil, err
	}
	if len(p.Peers) == 0 {
		base.ServerName = u.Hostname()
	}
	if p.TLSCAKey == "" {
		return func(int) (*tls.Config, error) { return base, nil }, nil
	}
	ca, err := certs.LoadCA(p.TLSCA, p.TLSCAKey)
	if err != nil {
		return nil, err
	}
	return func(i int) (*tls.Config, error) {
		cert, err := ca.Issue(attempt.ClientID(i), x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		cfg := base.Clone()
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil
	}, nil
}

// proxies starts a fault proxy in front of each node and points the
// members at them. In memory (the in-process broker's mem transport) the
// members dial them directly, each node's proxy by the node's own URL;
// otherwise each listens on loopback TCP.
func (c *Cluster) proxies(p plan.Plan, dialTimeout time.Duration, mc *member.Config) error {
	inMemory := len(c.Brokers) > 0 && p.Transport == plan.Mem
	upstream := append([]string(nil), c.URLs...)
	for k, raw := range upstream {
		// Each proxy's latency jitter a source of its own: the run's seed,
		// the node in its upper half.
		// Room to hold the whole fleet at once, each with a TLS hello or
		// a CONNECT (2 KiB is ample): the caps are for clients the run
		// does not know.
		cfg := faultproxy.Config{DialTimeout: dialTimeout, Seed: p.Seed + uint64(k)<<32,
			MaxHeld: max(p.Devices, faultproxy.DefaultMaxHeld), MaxHeldTotal: max(p.Devices<<11, faultproxy.DefaultMaxHeldTotal)}
		if inMemory {
			b := c.Brokers[k]
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
		proxy, err := faultproxy.New(cfg)
		if err != nil {
			return err
		}
		c.Proxies = append(c.Proxies, proxy)
	}
	if inMemory {
		dials := make([]device.DialFunc, len(c.Proxies))
		for k, proxy := range c.Proxies {
			dials[k] = func(ctx context.Context, _ *url.URL) (net.Conn, error) { return proxy.Dial(ctx) }
		}
		mc.Dial = dialByURL(c.URLs, dials)
		return nil
	}
	c.proxiesOverTCP(p, mc, upstream)
	return nil
}

// proxiesOverTCP points the members at the proxies' loopback addresses,
// in place of the brokers (upstream, by node) behind them.
func (c *Cluster) proxiesOverTCP(p plan.Plan, mc *member.Config, upstream []string) {
	inProcessTLS := p.Transport == plan.TLS && len(c.Brokers) > 0
	names := map[string]string{} // by a proxy's URL: the name its node's certificate bears
	for k, proxy := range c.Proxies {
		scheme := "tcp://"
		if inProcessTLS || c.externalTLS != nil {
			scheme = "ssl://" // TLS passes through
		}
		c.URLs[k] = scheme + proxy.Addr()
		if u, err := url.Parse(upstream[k]); err == nil {
			names[c.URLs[k]] = u.Hostname()
		}
	}
	mc.Broker = c.URLs[0]
	switch t := c.externalTLS; {
	// the devices keep their TLS dialer: the broker's name is the loopback address
	case inProcessTLS:
	case t != nil:
		mc.TLS = nil
		mc.Dial = func(i int) device.DialFunc { return member.LoopbackTLSDialerByName(i, t, names) }
	default:
		mc.Dial, mc.PlainTCP = member.LoopbackDialer, true
	}
}

// Settle waits until every proxy's connections have their outcome, for at
// most timeout each. A connection may still have a dial to the broker
// under way when the devices were done. Once settled, the proxies' counts
// are what reached the brokers.
func (c *Cluster) Settle(ctx context.Context, timeout time.Duration) {
	for _, p := range c.Proxies {
		_ = p.Recorder().Await(ctx, timeout, func(k fault.Counts) bool { return k.Pending == 0 })
	}
}

// AddPassed adds to b what the proxies let through since t, as the
// broker's side, each at its node: a dial a proxy refused, held or cut off
// never reached the broker. One let through is at when the proxy passed
// it on, which is when its broker saw it: after its hold, where the proxy
// held it for a token.
func (c *Cluster) AddPassed(b *report.Builder, t time.Time) {
	type passed struct {
		a    fault.Attempt
		node uint8
	}
	var out []passed
	for k, p := range c.Proxies {
		for _, a := range p.Recorder().Attempts() {
			if !a.Accept.Before(t) && a.Outcome == fault.Accepted {
				out = append(out, passed{a, uint8(k)})
			}
		}
	}
	slices.SortStableFunc(out, func(x, y passed) int { return attempt.Order(x.a.Decided, x.a.ClientID, y.a.Decided, y.a.ClientID) })
	for _, x := range out {
		b.Add(observer.BrokerRecord(b, x.a.Decided, x.a.ClientID, x.a.Outcome, x.node))
	}
}

// ProxyCounts is what the proxies counted, all of them together and each
// node's own; nil without proxies.
func (c *Cluster) ProxyCounts() (total *report.ProxyCounts, byNode []report.ProxyCounts) {
	if len(c.Proxies) == 0 {
		return nil, nil
	}
	total = &report.ProxyCounts{}
	for _, p := range c.Proxies {
		k := p.Recorder().Counts()
		pc := report.ProxyCounts{Admitted: k.Accepted, Answered: p.Recorder().Answered(), Refused: k.Refused, Throttled: k.Throttled,
			Dropped: k.Dropped, Unreachable: k.Unreachable, Overflowed: k.Overflowed}
		total.Add(pc)
		byNode = append(byNode, pc)
	}
	return total, byNode
}
