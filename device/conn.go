package device

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"time"
)

// sniffConn reads the CONNACK return code off the wire as paho reads it.
// paho v1.5.1 turns a code it does not know (an MQTT 5 code such as 0x87 sent
// to a 3.1.1 client) into a successful connect with ReturnCode 0 and a closed
// socket; the byte on the wire is the only reliable answer.
type sniffConn struct {
	net.Conn
	hdr  [4]byte // fixed header, remaining length, flags, return code
	seen int     // bytes of hdr filled; only written during the handshake
	code atomic.Int32
}

func newSniffConn(c net.Conn) *sniffConn {
	s := &sniffConn{Conn: c}
	s.code.Store(NoConnack)
	return s
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.seen < len(c.hdr) {
		for i := 0; i < n && c.seen < len(c.hdr); i++ {
			c.hdr[c.seen] = p[i]
			c.seen++
		}
		if c.seen == len(c.hdr) && c.hdr[0]>>4 == 2 && c.hdr[1] == 2 { // CONNACK, remaining length 2
			c.code.Store(int32(c.hdr[3]))
		}
	}
	return n, err
}

// connackCode returns the code read, or NoConnack.
func (c *sniffConn) connackCode() int { return int(c.code.Load()) }

// dialURL opens a TCP or TLS connection for a broker URL, as paho would,
// giving up when ctx ends.
func dialURL(ctx context.Context, u *url.URL, timeout time.Duration, tlsCfg *tls.Config) (net.Conn, error) {
	host := u.Host
	switch u.Scheme {
	case "tcp", "mqtt":
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "1883")
		}
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", host)
	case "ssl", "tls", "mqtts", "tcps":
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "8883")
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsCfg != nil {
			cfg = tlsCfg.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		return (&tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}).DialContext(ctx, "tcp", host)
	}
	return nil, fmt.Errorf("device: unsupported broker URL scheme %q (tcp, mqtt, ssl, tls, mqtts)", u.Scheme)
}
