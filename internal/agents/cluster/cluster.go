// Package cluster is what a fleet of real agents connects to. That is the
// in-process broker or a cluster of its nodes, or external brokers. When
// the storm needs them, it adds a standby for failover and a fault proxy
// in front of each node. It also says how each device reaches them: its
// endpoints, home node first (its index modulo the nodes), and the dialer
// that takes it to each. A fleet's disruptions act on a node's breaker:
// its proxy, or the in-process broker itself.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/testbroker"
)

// Cluster is the nodes a fleet connects to, and what stands in front of
// them. Its fields are set by Start and read-only after; Admit and
// AdmitUnlessLimited may be called from any goroutine (a throttled
// restart's nodes come back on timers of their own). The zero Cluster has
// no node: use Start.
type Cluster struct {
	// Brokers are the in-process broker, or a cluster's nodes, by node;
	// none against external brokers.
	Brokers []*testbroker.Broker
	// Standby is failover's: where the fleet goes when the broker dies.
	Standby *testbroker.Broker
	// Proxies stand in the devices' path, one in front of each node, when
	// the storm breaks the path or the brokers are external.
	Proxies []*faultproxy.Proxy
	// URLs are what the devices dial to reach each node, by node.
	URLs []string
	// HandshakeCPU is the in-process TLS broker's CPU for one handshake,
	// measured at Start (0 when not known).
	HandshakeCPU time.Duration

	externalTLS func(i int) (*tls.Config, error)
	admitMu     sync.Mutex
	admitting   bool // an admission limit is in force
}

// Start makes plan p's nodes and what stands in front of them. p is at the
// time scale the run allows, and dialTimeout is its scaled connect
// timeout. Start wires mc, what every member shares, to reach the nodes:
// the first node's URL, the standby's as failover, the dialer, and the
// node each endpoint is. What it started before an error, Close stops.
func Start(p plan.Plan, dialTimeout time.Duration, mc *member.Config) (*Cluster, error) {
	c := &Cluster{}
	var err error
	switch {
	case p.Broker != "":
		err = c.external(p, mc)
	default:
		err = c.inProcess(p, mc)
	}
	if err == nil && p.Scenario == plan.Failover {
		err = c.standby(mc)
	}
	if err == nil && p.Proxied() {
		err = c.proxies(p, dialTimeout, mc)
	}
	if len(c.URLs) > 1 {
		mc.NodeOf = nodeOf(c.URLs)
	}
	return c, err
}

// inProcess starts the in-process broker on the run's transport, or a
// cluster's nodes, each a broker of its own (in memory, each by its own
// name). Each node applies the admission limit on its own.
func (c *Cluster) inProcess(p plan.Plan, mc *member.Config) error {
	cfg := testbroker.Config{Transport: testbroker.Memory}
	switch p.Transport {
	case plan.TCP:
		cfg.Transport = testbroker.TCP
	case plan.TLS:
		cfg.Transport, cfg.MutualTLS = testbroker.TLS, true
	}
	for k := range p.ClusterNodes() {
		if cfg.Transport == testbroker.Memory && p.ClusterNodes() > 1 {
			cfg.Addr = fmt.Sprintf("node-%d", k)
		}
		b, err := testbroker.New(cfg)
		if err != nil {
			return err
		}
		c.Brokers, c.URLs = append(c.Brokers, b), append(c.URLs, b.URL())
	}
	mc.Broker = c.URLs[0]
	switch b := c.Brokers[0]; {
	case cfg.Transport == testbroker.Memory:
		mc.Dial = dialByURL(c.URLs, brokerDials(c.Brokers))
	case cfg.Transport == testbroker.TCP:
		mc.Dial, mc.PlainTCP = member.LoopbackDialer, true
	default:
		var err error
		if c.HandshakeCPU, err = b.HandshakeCPU(200); err != nil && !errors.Is(err, testbroker.ErrNoThreadCPU) {
			return err
		}
		certFor := func(i int) (*tls.Config, error) { return b.ClientTLSConfig(attempt.ClientID(i)) }
		mc.Dial = func(i int) device.DialFunc { return member.LoopbackTLSDialer(i, certFor) }
	}
	return nil
}

// external points the members at external brokers, node 0 first.
func (c *Cluster) external(p plan.Plan, mc *member.Config) error {
	mc.Broker, c.URLs = p.Broker, p.Brokers()
	tlsCfg, err := externalTLS(p)
	if err != nil {
		return err
	}
	c.externalTLS = tlsCfg
	switch {
	case !isLoopback(p.Broker):
		mc.TLS = tlsCfg
	case tlsCfg != nil:
		mc.Dial = func(i int) device.DialFunc { return member.LoopbackTLSDialer(i, tlsCfg) }
	default:
		mc.Dial, mc.PlainTCP = member.LoopbackDialer, true
	}
	return nil
}

// standby starts failover's second in-process broker and gives every
// device both endpoints, the primary first.
func (c *Cluster) standby(mc *member.Config) error {
	cfg := testbroker.Config{Transport: c.Brokers[0].Transport()}
	if cfg.Transport == testbroker.Memory {
		cfg.Addr = "standby"
	}
	standby, err := testbroker.New(cfg)
	if err != nil {
		return err
	}
	c.Standby = standby
	mc.Failover = []string{standby.URL()}
	if cfg.Transport == testbroker.Memory {
		mc.Dial = dialByURL([]string{c.URLs[0], standby.URL()}, brokerDials([]*testbroker.Broker{c.Brokers[0], standby}))
	}
	return nil
}

// Nodes is how many nodes the fleet connects to.
func (c *Cluster) Nodes() int { return len(c.URLs) }

// Endpoints is device i's list of the nodes, as it dials them: its home
// node first, then the others in turn.
func (c *Cluster) Endpoints(i int) (home string, failover []string) {
	n := len(c.URLs)
	for k := 1; k < n; k++ {
		failover = append(failover, c.URLs[(i+k)%n])
	}
	return c.URLs[i%n], failover
}

// Reference is node k as an MQTT 5 Server Reference names it: the host
// (and port) its devices dial.
func (c *Cluster) Reference(k int) string {
	u, err := url.Parse(c.URLs[k])
	if err != nil {
		return ""
	}
	return u.Host
}

// Breaker is what the fleet's disruptions of node k act on: its fault
// proxy when one stands in the devices' path, else the in-process broker.
func (c *Cluster) Breaker(k int) fault.Breaker {
	if len(c.Proxies) > 0 {
		return c.Proxies[k]
	}
	return c.Brokers[k].Faults()
}

// Admit applies admission a (scaled) at every node, each on its own: the
// in-process brokers, or the proxies in front of external ones.
func (c *Cluster) Admit(a fault.Admission) error {
	c.admitMu.Lock()
	defer c.admitMu.Unlock()
	return c.admitLocked(a)
}

// AdmitUnlessLimited applies a unless a limit is in force already: a
// throttled restart's end, at each node it restarted.
func (c *Cluster) AdmitUnlessLimited(a fault.Admission) error {
	c.admitMu.Lock()
	defer c.admitMu.Unlock()
	if c.admitting {
		return nil
	}
	return c.admitLocked(a)
}

func (c *Cluster) admitLocked(a fault.Admission) error {
	c.admitting = a != (fault.Admission{})
	var breakers []fault.Breaker
	for _, b := range c.Brokers {
		breakers = append(breakers, b.Faults())
	}
	if len(c.Brokers) == 0 {
		for _, p := range c.Proxies {
			breakers = append(breakers, p)
		}
	}
	for _, b := range breakers {
		if err := b.SetAdmission(a); err != nil {
			return err
		}
	}
	return nil
}

// Forget lets go of the attempts the nodes and proxies recorded so far.
func (c *Cluster) Forget() {
	for _, p := range c.Proxies {
		p.Recorder().Reset()
	}
	for _, b := range append(c.Brokers, c.Standby) {
		if b != nil {
			b.Recorder().ResetConnections()
		}
	}
}

// Close stops the proxies and the brokers.
func (c *Cluster) Close() {
	for _, p := range c.Proxies {
		_ = p.Close()
	}
	for _, b := range append(c.Brokers, c.Standby) {
		if b != nil {
			b.Close()
		}
	}
}

// brokerDials is each in-process broker's in-memory dialer.
func brokerDials(brokers []*testbroker.Broker) []device.DialFunc {
	dials := make([]device.DialFunc, len(brokers))
	for k, b := range brokers {
		dials[k] = b.DialContext
	}
	return dials
}

// dialByURL is the dialer of devices that reach several in-memory nodes:
// a dial to urls[k] goes through dials[k].
func dialByURL(urls []string, dials []device.DialFunc) func(int) device.DialFunc {
	byURL := map[string]device.DialFunc{}
	for k, u := range urls {
		byURL[u] = dials[k]
	}
	dial := func(ctx context.Context, u *url.URL) (net.Conn, error) {
		d, ok := byURL[u.String()]
		if !ok {
			return nil, fmt.Errorf("no in-process node at %s", u.Redacted())
		}
		return d(ctx, u)
	}
	return func(int) device.DialFunc { return dial }
}

// nodeOf is which node each of urls (by node) is, as an agent names the
// endpoint it reached; -1 for one it does not know.
func nodeOf(urls []string) func(endpoint string) int {
	byURL := map[string]int{}
	for k, raw := range urls {
		if u, err := url.Parse(raw); err == nil {
			byURL[u.String()] = k
		}
	}
	return func(endpoint string) int {
		if k, ok := byURL[endpoint]; ok {
			return k
		}
		return -1
	}
}

// isLoopback reports whether a broker URL names this host's loopback
// address, which the devices reach from their own spread of source
// addresses.
func isLoopback(broker string) bool {
	u, err := url.Parse(broker)
	return err == nil && u.Hostname() == "127.0.0.1"
}
