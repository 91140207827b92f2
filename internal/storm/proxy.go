package storm

import (
	"cmp"
	"fmt"
	"net"
	"net/url"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// ProxyPlan is the storm a file asks of devicesim proxy, whose fleet is
// whoever connects to it: the timeline, the broker's admission, the
// external broker's nodes (host:port each), disrupt_at and the
// expectations. A file that names a fleet, an engine, or devicesim's own
// broker is refused: those are devicesim run's.
func (f *File) ProxyPlan() (p plan.Plan, brokers []string, err error) {
	bad := func(format string, args ...any) (plan.Plan, []string, error) {
		return p, nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case len(f.Fleet) > 0:
		return bad("fleet: devicesim proxy storms whoever connects to it; a fleet is devicesim run's to launch: leave it out")
	case f.Engine != "" || len(f.Compare) > 0 || f.TCPPerProcess != 0 || f.Brokers.Nodes != 0 || f.TimeScale != (TimeScale{}):
		return bad("engine, compare, tcp_per_process, time_scale and brokers.nodes are devicesim run's: leave them out")
	}
	if err := f.checkTimeline(); err != nil {
		return bad("%v", err)
	}
	p = plan.Default()
	p.Seed, p.Policy, p.Engine = f.Seed, "the fleet's own", plan.Proxy
	if err := f.timelineOf(&p); err != nil {
		return bad("%v", err)
	}
	if a := f.Brokers.Admission; a != nil {
		mode, err := fault.ParseAdmissionMode(cmp.Or(a.Mode, "refuse"))
		if err != nil {
			return bad("brokers.admission.mode: %v", err)
		}
		p.AdmitRate, p.AdmitBurst, p.AdmitMode, p.AdmitCode = a.Rate, cmp.Or(a.Burst, 1), mode, byte(a.Code)
	}
	if x := f.Brokers.External; x != nil {
		if x.CA != "" || x.Cert != "" || x.Key != "" || x.CAKey != "" || x.Shard != "" {
			return bad("brokers.external: ca, cert, key, ca_key and shard are for devicesim's own agents; " +
				"TLS passes through the proxy between the devices' and the broker's own")
		}
		urls := x.URLs
		if x.URL != "" {
			urls = append([]string{x.URL}, urls...)
		}
		for _, u := range urls {
			addr, err := hostPort(u)
			if err != nil {
				return bad("brokers.external: %v", err)
			}
			brokers = append(brokers, addr)
		}
	}
	if f.DisruptAt != "" {
		at, err := plan.ParseDisruptAt(f.DisruptAt)
		if err != nil {
			return bad("disrupt_at: %v", err)
		}
		p.DisruptAt = at
	}
	p.Nodes = max(len(brokers), 1)
	return p, brokers, nil
}

// hostPort is the address a broker URL (or a bare host:port) is dialled on.
func hostPort(raw string) (string, error) {
	if _, _, err := net.SplitHostPort(raw); err == nil {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("%q is not a broker URL or host:port", raw)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "tcp", "mqtt", "ws":
			port = "1883"
		case "ssl", "tls", "mqtts", "tcps":
			port = "8883"
		default:
			return "", fmt.Errorf("%q names no port", raw)
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
