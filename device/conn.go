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

// DefaultMaxIncomingPacket is Config.MaxIncomingPacket's default: far above
// any command or configuration a device is sent, far below what would starve
// a device of memory.
const DefaultMaxIncomingPacket = 256 << 10

// MinIncomingPacket is the least Config.MaxIncomingPacket: below it even a
// CONNACK or a SUBACK would not fit, and the device could never connect.
const MinIncomingPacket = 64

// maxRemainingLength is MQTT's largest remaining length (four length bytes).
const maxRemainingLength = 1<<28 - 1

// PacketTooLargeError is why the agent closed a connection whose next
// packet declared more bytes than Config.MaxIncomingPacket, or whose length
// was malformed. The agent closes the connection before paho reads the
// packet: paho v1.5.1 allocates whatever length a header declares, then
// copies the payload again, so one hostile header could take a device's
// memory. The zero value is not meaningful: the agent makes them. Once made
// it is not changed, so it is safe to share.
type PacketTooLargeError struct {
	Type   byte // the MQTT control packet type (2 CONNACK, 3 PUBLISH, 9 SUBACK, ...)
	Length int  // the remaining length declared; -1 for a malformed length
	Limit  int
}

func (e *PacketTooLargeError) Error() string {
	if e.Length < 0 {
		return fmt.Sprintf("device: incoming MQTT packet (type %d) has a malformed length", e.Type)
	}
	return fmt.Sprintf("device: incoming MQTT packet (type %d) declares %d bytes, over the %d-byte limit (Config.MaxIncomingPacket)",
		e.Type, e.Length, e.Limit)
}

// guardConn is the agent's view of every connection: it follows the MQTT
// frames paho reads, so that it can
//   - refuse a packet over the limit before paho allocates it (paho reads
//     the fixed header and the length a byte at a time, then the body in
//     one read of the declared size);
//   - read the CONNACK return code off the wire. paho v1.5.1 turns a code it
//     does not know (an MQTT 5 code such as 0x87 sent to a 3.1.1 client)
//     into a successful connect with ReturnCode 0 and a closed socket; the
//     byte on the wire is the only reliable answer.
//
// Read is called by one paho goroutine at a time (the connect, then the
// incoming loop); what other goroutines read is atomic.
type guardConn struct {
	net.Conn
	limit int

	// frame state, only touched by Read
	state   frameState
	typ     byte // the current packet's type
	length  int  // remaining length, as decoded so far
	lenByte int  // length bytes read of the current packet
	left    int  // body bytes still to pass
	packets int  // packets whose header was read

	code     atomic.Int32 // the first packet's CONNACK code, or NoConnack
	tooLarge atomic.Pointer[PacketTooLargeError]
	reported atomic.Bool // the agent has reported tooLarge
}

type frameState uint8

const (
	inHeader frameState = iota
	inLength
	inBody
)

func newGuardConn(c net.Conn, limit int) *guardConn {
	g := &guardConn{Conn: c, limit: limit}
	g.code.Store(NoConnack)
	return g
}

func (c *guardConn) Read(p []byte) (int, error) {
	if err := c.tooLarge.Load(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if bad := c.follow(p[:n]); bad != nil {
		c.tooLarge.Store(bad)
		_ = c.Conn.Close() // the rest of the packet is never read
		return 0, bad      // none of these bytes reach paho
	}
	return n, err
}

// follow advances the frame state over b, returning the violation if a
// header in it declares too much.
func (c *guardConn) follow(b []byte) *PacketTooLargeError {
	for i := 0; i < len(b); {
		switch c.state {
		case inHeader:
			c.typ, c.length, c.lenByte = b[i]>>4, 0, 0
			c.packets++
			c.state = inLength
			i++
		case inLength:
			d := b[i]
			i++
			c.length |= int(d&0x7f) << (7 * c.lenByte)
			c.lenByte++
			if d&0x80 != 0 {
				if c.lenByte == 4 { // a fifth length byte: paho would take the next byte as body
					return &PacketTooLargeError{Type: c.typ, Length: -1, Limit: c.limit}
				}
				continue
			}
			// The length is complete; paho allocates it on its next read.
			if c.length > c.limit {
				return &PacketTooLargeError{Type: c.typ, Length: c.length, Limit: c.limit}
			}
			c.left = c.length
			c.state = inBody
			if c.left == 0 {
				c.state = inHeader
			}
		case inBody:
			k := min(c.left, len(b)-i)
			if c.packets == 1 && c.typ == 2 && c.length == 2 { // CONNACK: flags, then the code
				if off := 1 - (c.length - c.left); off >= 0 && off < k {
					c.code.Store(int32(b[i+off]))
				}
			}
			c.left -= k
			i += k
			if c.left == 0 {
				c.state = inHeader
			}
		}
	}
	return nil
}

// connackCode returns the code read, or NoConnack.
func (c *guardConn) connackCode() int { return int(c.code.Load()) }

// violation returns the packet that closed the connection, if one did.
func (c *guardConn) violation() *PacketTooLargeError { return c.tooLarge.Load() }

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
