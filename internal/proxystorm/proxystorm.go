// Package proxystorm storms a fleet someone else wrote: any firmware, any
// language, a lab rack of real devices. The fleet connects to its broker
// through fault proxies (one a broker node), and proxystorm breaks the
// path on the storm's schedule, or when asked through Storm's methods (the
// control API calls them). It watches the fleet come back from what the
// proxies saw: every connection, its time, and the client ID where the
// CONNECT passes in the clear. The report is the one devicesim run writes,
// with the fleet's side as every attempt the proxies saw and the broker's
// as what they let through.
//
// A Storm knows the fleet only from outside. A device is its client ID,
// read from the CONNECT; with Identify a refused attempt is read too.
// Under TLS nothing names a device: the fleet is its sessions, and each
// session that came back and stayed counts as a device back.
package proxystorm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/agents/timedfault"
	"github.com/herdguard/herdguard/internal/plan"
)

// ErrInvalid is wrapped by the error of a Config a Storm cannot run, and
// of a disruption it cannot make.
var ErrInvalid = errors.New("proxystorm: invalid")

// ErrNotRecovered is wrapped by Run's error when devices were still not
// back when the watch ended.
var ErrNotRecovered = errors.New("proxystorm: not every device came back")

// Config is a Storm's setup. The zero Config is invalid: Brokers (or
// Upstreams) and a trigger (AwaitSessions, DisruptAt or Manual) are
// required.
type Config struct {
	// Plan is the storm: its scenario or timeline, the admission limit a
	// throttled restart brings back, and the seed. The fleet is not the
	// plan's: its Devices and Policy are not read.
	Plan plan.Plan
	// Brokers are the broker's nodes, host:port each.
	Brokers []string
	// Upstreams, in place of Brokers, dial each node in this process (an
	// embedded broker's in-memory transport): the proxies then listen on
	// no address, and the fleet reaches node k through Dial(ctx, k). A
	// fleet of real agents and its broker in one synctest bubble, storm
	// as devicesim proxy makes it, in exact virtual time.
	Upstreams []func(context.Context) (net.Conn, error)
	// Listen is the address each node's proxy listens on, by node; "" (or
	// a shorter list) picks a free port on loopback.
	Listen []string
	// Identify reads the CONNECT of an attempt the proxies refuse, so that
	// every attempt carries its client ID (faultproxy.Config.Identify).
	Identify bool
	// AwaitSessions begins the plan's storm once this many sessions are
	// open across the nodes; DisruptAt begins it at that instant. Manual
	// makes no storm of the plan's: the disruptions are those Strike
	// makes, and the watch ends when Finish is called (or its bound
	// passes). One of them must be set; a Strike may begin the storm
	// before its trigger anyway.
	AwaitSessions int
	DisruptAt     time.Time
	Manual        bool
	// Watch is the longest the storm watches for the fleet's return after
	// its last disruption (0: the plan's recovery bound for the fleet).
	Watch time.Duration
	// MaxConns bounds each proxy's connections (faultproxy.Config.MaxConns).
	MaxConns int
	// Logger hears of the proxies' refusals for their own protection and
	// of the storm's steps; nil discards.
	Logger *slog.Logger
	// Events, if set, receives the report's events.csv as the report is
	// built; nil keeps them for the report's files.
	Events io.Writer
}

// Storm is a storm of someone else's fleet through fault proxies. New
// starts the proxies; Run waits for the trigger, makes the storm, watches
// the fleet come back and reports it. Its methods are safe for concurrent
// use.
type Storm struct {
	cfg     Config
	proxies []*faultproxy.Proxy
	started time.Time

	mu      sync.Mutex
	state   State
	trigger chan struct{} // closed when a Strike comes before the trigger
	t0      time.Time     // the first disruption
	// returned is when an open first disruption was ended (End); zero
	// for a timed one, whose return is the plan's
	returned time.Time
	fleet    *fleet   // who was connected at t0
	strikes  []struck // every disruption so far, in order
	faults   []*timedfault.Faults
	open     *openFault        // a disruption Strike began without an end
	ends     []<-chan struct{} // closed as each timed disruption is over
	finish   chan struct{}
	// written is where the report went, and reportJSON what it says
	// (Wrote), for the control API
	written    string
	reportJSON []byte
	done       bool
}

// State is where a Storm is.
type State string

const (
	Waiting  State = "waiting"  // for the trigger
	Striking State = "striking" // the disruptions are under way
	Watching State = "watching" // for the fleet's return
	Done     State = "done"     // reported
)

// struck is one disruption made: when, and what.
type struck struct {
	at    time.Time
	event plan.Event
}

// New checks cfg and starts a proxy in front of every broker node.
func New(cfg Config) (*Storm, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Plan = cfg.Plan.WithDefaults()
	cfg.Plan.Nodes = max(len(cfg.Brokers), len(cfg.Upstreams), 1)
	s := &Storm{cfg: cfg, state: Waiting, trigger: make(chan struct{}), finish: make(chan struct{}), started: time.Now()}
	for k := range cfg.Plan.Nodes {
		pc := faultproxy.Config{Seed: cfg.Plan.Seed + uint64(k)<<32, Identify: cfg.Identify, MaxConns: cfg.MaxConns,
			Logger: cfg.Logger.With("node", k)}
		name := fmt.Sprint("in-process node ", k)
		if k < len(cfg.Upstreams) {
			pc.Upstream = cfg.Upstreams[k]
		} else {
			name, pc.Upstream, pc.Listen = cfg.Brokers[k], faultproxy.Upstream(cfg.Brokers[k]), "127.0.0.1:0"
			if k < len(cfg.Listen) && cfg.Listen[k] != "" {
				pc.Listen = cfg.Listen[k]
			}
		}
		p, err := faultproxy.New(pc)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("node %d (%s): %w", k, name, err)
		}
		s.proxies = append(s.proxies, p)
		s.faults = append(s.faults, &timedfault.Faults{})
	}
	return s, nil
}

// check refuses a Config the storm cannot run, naming why.
func check(cfg Config) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
	}
	switch {
	case len(cfg.Brokers) == 0 && len(cfg.Upstreams) == 0:
		return bad("a broker to stand in front of is required (-broker HOST:PORT)")
	case len(cfg.Brokers) > 0 && len(cfg.Upstreams) > 0:
		return bad("brokers by address or in process, not both")
	case len(cfg.Listen) > len(cfg.Brokers):
		return bad("%d listen addresses for %d brokers: one a broker", len(cfg.Listen), len(cfg.Brokers))
	case cfg.AwaitSessions < 0 || cfg.Watch < 0 || cfg.MaxConns < 0:
		return bad("-await-sessions, -watch and the connection limit must be >= 0")
	case cfg.AwaitSessions == 0 && cfg.DisruptAt.IsZero() && !cfg.Manual:
		return bad("nothing would start the storm: -await-sessions N, -disrupt-at, or the control API (-control)")
	}
	for _, b := range cfg.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return bad("broker %q is not HOST:PORT", b)
		}
	}
	for _, s := range cfg.Plan.Strikes() {
		if err := Supported(s.Event.Scenario); err != nil {
			return err
		}
	}
	return nil
}

// Supported says why a proxy cannot make scenario, or nil if it can: the
// disruptions of the path, and the broker's own that a path can stand for
// (a restart is an outage of the path, a throttled one an admission
// limit).
func Supported(scenario plan.Scenario) error {
	switch scenario {
	case plan.BrokerRestart, plan.ThrottledRestart, plan.DropAll, plan.Flapping, plan.Blackhole, plan.Latency,
		plan.RateLimited, plan.RollingRestart:
		return nil
	case plan.BootStorm:
		return fmt.Errorf("%w: %s boots a fleet of devicesim's own agents; a proxy cannot boot someone else's "+
			"(start the fleet, and strike with -await-sessions)", ErrInvalid, scenario)
	case plan.RollingDrain, plan.BusyNode:
		return fmt.Errorf("%w: %s is the broker's own doing (a Server Reference, a busy CONNACK), which a proxy cannot speak for it",
			ErrInvalid, scenario)
	}
	return fmt.Errorf("%w: %s needs devicesim's own agents or broker; a proxy makes broker-restart, throttled-restart, "+
		"drop-all, flapping, blackhole, latency, rate-limited and rolling-restart", ErrInvalid, scenario)
}

// Addrs are where the fleet connects: each node's proxy, in order.
func (s *Storm) Addrs() []string {
	out := make([]string, len(s.proxies))
	for k, p := range s.proxies {
		out[k] = p.Addr()
	}
	return out
}

// Dial connects to node's proxy in this process, as a device of the
// fleet would through its address.
func (s *Storm) Dial(ctx context.Context, node int) (net.Conn, error) {
	if node < 0 || node >= len(s.proxies) {
		return nil, fmt.Errorf("%w: no node %d of %d", ErrInvalid, node, len(s.proxies))
	}
	return s.proxies[node].Dial(ctx)
}

// Sessions is how many sessions are open across the nodes now.
func (s *Storm) Sessions() int {
	n := 0
	for _, p := range s.proxies {
		n += p.Recorder().Sessions()
	}
	return n
}

// AwaitSessions waits until at least n sessions are open across the
// nodes, or ctx ends.
func (s *Storm) AwaitSessions(ctx context.Context, n int) error {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for s.Sessions() < n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops the proxies: every connection through them ends.
func (s *Storm) Close() error {
	var errs []error
	for k, p := range s.proxies {
		s.faults[k].Stop()
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Finish ends the watch now: Run reports what it has seen.
func (s *Storm) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.finish:
	default:
		close(s.finish)
	}
}

// Trigger says what the storm waits for, as a person reads it.
func (c Config) Trigger() string {
	switch {
	case c.Manual:
		return "waiting for the control API: POST /disruptions begins the storm"
	case !c.DisruptAt.IsZero():
		return "striking at " + c.DisruptAt.Format(time.RFC3339)
	}
	return fmt.Sprintf("striking once %d sessions are up", c.AwaitSessions)
}

// admission is what the broker admits after a throttled restart or under a
// rate limit: the plan's, or plan.DefaultThrottle where it names none (a
// disruption the control API asks for, of a plan that had none).
func (s *Storm) admission() fault.Admission {
	p := s.cfg.Plan
	if p.AdmitRate <= 0 {
		p.AdmitRate = plan.DefaultThrottle
	}
	return p.Admission()
}
