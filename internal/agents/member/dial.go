package member

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"

	"github.com/herdguard/herdguard/device"
)

// LoopbackDialer is device i's TCP dialer. A fleet's devices spread over
// four loopback source addresses. A large fleet's reconnect churn thus
// does not run one (source, destination) pair out of its ~28,000
// ephemeral ports.
func LoopbackDialer(i int) device.DialFunc {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%4))}
	return func(ctx context.Context, uri *url.URL) (net.Conn, error) {
		d := net.Dialer{LocalAddr: local}
		return d.DialContext(ctx, "tcp", uri.Host)
	}
}

// LoopbackTLSDialer is LoopbackDialer with TLS on top, as device i's
// configuration (cfgFor(i)) says. A configuration that cannot be made
// fails every dial with the reason, and the run says so.
func LoopbackTLSDialer(i int, cfgFor func(i int) (*tls.Config, error)) device.DialFunc {
	return LoopbackTLSDialerByName(i, cfgFor, nil)
}

// LoopbackTLSDialerByName is LoopbackTLSDialer to endpoints that each
// stand for a broker of its own name (a cluster's nodes behind their
// proxies). A dial to a URL in names verifies the broker by the name it
// maps to, whatever the configuration's ServerName.
func LoopbackTLSDialerByName(i int, cfgFor func(i int) (*tls.Config, error), names map[string]string) device.DialFunc {
	cfg, err := cfgFor(i)
	if err != nil {
		return func(context.Context, *url.URL) (net.Conn, error) { return nil, err }
	}
	byURL := map[string]*tls.Config{}
	for u, name := range names {
		byURL[u] = cfg.Clone()
		byURL[u].ServerName = name
	}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%4))}
	return func(ctx context.Context, uri *url.URL) (net.Conn, error) {
		c, ok := byURL[uri.String()]
		if !ok {
			c = cfg
		}
		d := tls.Dialer{NetDialer: &net.Dialer{LocalAddr: local}, Config: c}
		return d.DialContext(ctx, "tcp", uri.Host)
	}
}
