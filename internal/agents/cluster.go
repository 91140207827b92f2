package agents

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/agents/member"
	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/testbroker"
)

// setupCluster starts the plan's nodes of the in-process broker, each a
// broker of its own on the run's transport (in memory, each by its own
// name). Every device lists every node, its home node (index % nodes)
// first, and fails over to the next, as the virtual engine's model does;
// each node applies the admission limit on its own. The fleet is watched
// from the nodes' side: a device is connected when a node holds its
// session.
func (f *Fleet) setupCluster(mc *member.Config) error {
	transport := testbroker.Memory
	if f.p.Transport == plan.TCP {
		transport = testbroker.TCP
	}
	var recorders observer.Brokers
	for k := range f.p.Nodes {
		cfg := testbroker.Config{Transport: transport}
		if transport == testbroker.Memory {
			cfg.Addr = fmt.Sprintf("node-%d", k)
		}
		b, err := testbroker.New(cfg)
		if err != nil {
			return err
		}
		f.nodes = append(f.nodes, b)
		recorders = append(recorders, b.Recorder())
	}
	for _, b := range f.nodes {
		f.urls = append(f.urls, b.URL())
	}
	f.obs, mc.Broker = recorders, f.urls[0]
	mc.Dial = member.LoopbackDialer
	if transport == testbroker.Memory {
		mc.Dial = dialByURL(f.nodes)
	}
	return nil
}

// endpoints is device i's list of a cluster's nodes, as it dials them: its
// home node first, then the others in turn.
func (f *Fleet) endpoints(i int) (home string, failover []string) {
	n := len(f.urls)
	for k := 1; k < n; k++ {
		failover = append(failover, f.urls[(i+k)%n])
	}
	return f.urls[i%n], failover
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

// dialByURL is the dialer of devices that reach several in-memory brokers:
// each dial goes to the broker its URL names.
func dialByURL(brokers []*testbroker.Broker) func(int) device.DialFunc {
	byURL := map[string]*testbroker.Broker{}
	for _, b := range brokers {
		byURL[b.URL()] = b
	}
	dial := func(ctx context.Context, u *url.URL) (net.Conn, error) {
		b, ok := byURL[u.String()]
		if !ok {
			return nil, fmt.Errorf("no in-process broker at %s", u.Redacted())
		}
		return b.DialContext(ctx, u)
	}
	return func(int) device.DialFunc { return dial }
}

// RestartNode takes node k of the cluster down for outage (unscaled) and
// brings it back, one step of a rolling restart: Disrupt of a broker
// restart of node k alone. Its sessions end now and their devices fail
// over to the next node, on their policy's schedule; the fleet's return
// does not wait for the node's, since its devices go elsewhere.
func (f *Fleet) RestartNode(ctx context.Context, k int, outage time.Duration) error {
	return f.Disrupt(ctx, plan.Event{Scenario: plan.BrokerRestart, Outage: outage, Node: &k})
}
