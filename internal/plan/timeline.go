package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// AllNodes is a Strike's Node when it strikes every node at once (the one
// broker, or every node of a cluster).
const AllNodes = -1

// Strike is one disruption as the engines make it, At after the first. It
// is an event of the timeline, or one node's restart of a rolling restart
// (a broker restart of that node alone). Each is a disruption whose
// recovery is judged on its own. It is a plain value.
type Strike struct {
	At    time.Duration
	Event Event // what it does: never a rolling restart, which is its nodes' restarts
	Node  int   // the node it strikes, or AllNodes
	Of    int   // the index in Timeline of the event it comes from
}

// Strikes is the timeline as the engines carry it out, in order of time.
// Strikes at one instant keep the timeline's order. Each event is one
// strike. A rolling restart is its nodes' restarts one gap apart, node 0
// first.
func (p Plan) Strikes() []Strike {
	var out []Strike
	for k, e := range p.Timeline() {
		if e.Scenario.Rolls() {
			each := BrokerRestart // a drain's nodes each drain, then restart
			if e.Scenario == RollingDrain {
				each = RollingDrain
			}
			for n := range p.ClusterNodes() {
				restart := Event{At: e.At + time.Duration(n)*e.Gap, Scenario: each, Outage: e.Outage}
				out = append(out, Strike{At: restart.At, Event: restart, Node: n, Of: k})
			}
			continue
		}
		node := AllNodes
		if e.Node != nil && p.ClusterNodes() > 1 {
			node = *e.Node
		}
		if e.Scenario == BusyNode && node == AllNodes && p.ClusterNodes() > 1 {
			node = 0 // one node is busy: the first, unless the event names one
		}
		out = append(out, Strike{At: e.At, Event: e, Node: node, Of: k})
	}
	slices.SortStableFunc(out, func(a, b Strike) int { return cmp.Compare(a.At, b.At) })
	return out
}

// FirstReturn is when the broker (every node of a cluster) was first back,
// since the first disruption. That is the end of the first event's outage,
// or of a rolling restart's last node's. It is 0 after a disruption that
// takes no broker down (a drop, a slow path, a boot).
func (p Plan) FirstReturn() time.Duration {
	switch e := p.Timeline()[0]; e.Scenario {
	case RollingRestart, RollingDrain:
		return time.Duration(p.ClusterNodes()-1)*e.Gap + e.Outage
	case DropAll, Latency, Failover, Observe, BootStorm, RateLimited:
		return 0
	default:
		return e.Outage
	}
}

// LastStrike is when the timeline's last disruption begins, since the
// first: a rolling restart's last node's restart, if it is the last.
func (p Plan) LastStrike() time.Duration {
	s := p.Strikes()
	return s[len(s)-1].At
}

// strikesANode reports whether a disruption can strike one node of a
// cluster alone: it breaks that node, or the path to it.
func strikesANode(s Scenario) bool {
	return s.BreaksBroker() || s.BreaksPath() || s == BusyNode || s == RateLimited
}

// validateCluster: a cluster is of in-process nodes that every device
// reaches from this process, or of external nodes each behind a fault proxy
// of its own. Any disruption of the timeline strikes every node at once, or
// the one it names. A rolling restart strikes them one a gap.
func (p Plan) validateCluster() error {
	nodes := p.ClusterNodes()
	switch {
	case p.Nodes < 0 || p.Nodes > 255:
		return fmt.Errorf("nodes must be 0 to 255, got %d", p.Nodes)
	case p.Nodes > 1 && p.Broker != "":
		return fmt.Errorf("nodes makes the in-process broker a cluster: an external cluster names each node's URL instead")
	case len(p.Peers) > 254:
		return fmt.Errorf("an external cluster of %d nodes: at most 255", nodes)
	case nodes > 1 && p.Broker == "" && p.Transport == TLS:
		return fmt.Errorf("a cluster over TLS needs its nodes under one CA: not yet; use transport mem or tcp")
	case nodes > 1 && p.Policy == PahoDefault:
		return fmt.Errorf("paho-default has no failover of ours to go from node to node: pick a reconnect policy")
	case nodes > 1 && p.NeedsChildren():
		return fmt.Errorf("a cluster's agents run in this process, where at most %d TCP devices fit: got %d",
			cmp.Or(p.TCPPerProcess, p.agentsHere()), p.SliceSize())
	case nodes > 1 && (p.Scenario == Failover || p.Scenario == ConfigOutage):
		return fmt.Errorf("%s is not a cluster's disruption: on a cluster, restart a node (node: k) or every node", p.Scenario)
	}
	for k, e := range p.Timeline() {
		switch {
		case e.Scenario.Rolls() && nodes < 2:
			return fmt.Errorf("a %s needs a cluster: nodes >= 2, got %d", e.Scenario, nodes)
		case e.Node == nil:
		case nodes < 2:
			return fmt.Errorf("timeline[%d]: node %d: one node's disruption needs a cluster (nodes >= 2)", k, *e.Node)
		case *e.Node < 0 || *e.Node >= nodes:
			return fmt.Errorf("timeline[%d]: node %d: the cluster's nodes are 0 to %d", k, *e.Node, nodes-1)
		case !strikesANode(e.Scenario):
			return fmt.Errorf("timeline[%d]: %s takes no node: broker-restart, throttled-restart, drop-all, flapping, blackhole and latency strike one", k, e.Scenario)
		}
	}
	return p.validateStrikes()
}

// agentsHere is how many TCP devices' agents this process holds.
func (p Plan) agentsHere() int {
	if p.Proxied() {
		return p.AgentsBesideProxy()
	}
	return p.MaxTCPDevices()
}

// validateStrikes: a timeline's disruptions, a rolling restart's counted
// node by node, are at most maxTimeline+1, and no two begin at one instant,
// where they would be one recovery, not two.
func (p Plan) validateStrikes() error {
	s := p.Strikes()
	if len(s) > maxTimeline+1 {
		return fmt.Errorf("a timeline of %d disruptions (a rolling restart's nodes counted one by one): at most %d", len(s), maxTimeline+1)
	}
	for k := 1; k < len(s); k++ {
		if a, b := s[k-1], s[k]; a.At == b.At {
			return fmt.Errorf("timeline[%d] and timeline[%d]: two disruptions begin at %v, which makes them one recovery: move one", a.Of, b.Of, b.At)
		}
	}
	return nil
}
