package member

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"

	"github.com/herdguard/herdguard/device"
)

// LoopbackDialer is device i's TCP dialer: a fleet's devices spread over
// four loopback source addresses, so that a large fleet's reconnect churn
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
	cfg, err := cfgFor(i)
	if err != nil {
		return func(context.Context, *url.URL) (net.Conn, error) { return nil, err }
	}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%4))}
	return func(ctx context.Context, uri *url.URL) (net.Conn, error) {
		d := tls.Dialer{NetDialer: &net.Dialer{LocalAddr: local}, Config: cfg}
		return d.DialContext(ctx, "tcp", uri.Host)
	}
}
