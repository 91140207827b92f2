package device

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
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

// MaxKeepAlive is the longest Config.KeepAlive: MQTT sends it in two
// bytes of seconds.
const MaxKeepAlive = 65535 * time.Second

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

// ProtocolError is why the agent closed a connection on which the broker
// broke MQTT 3.1.1 in a way paho v1.5.1 would misread: a first packet that
// is not a CONNACK of exactly two bytes with its reserved bits clear and a
// return code 3.1.1 knows (paho takes a CONNACK of any length, and an
// unknown code, as a session), or a SUBACK with a return code other than
// 0, 1, 2 and 0x80. The attempt, or the session, does not count as
// connected, and the next attempt waits the policy's delay. It wraps
// ErrProtocol. The agent makes them; once made it is not changed, so it is
// safe to share.
type ProtocolError struct {
	Type     byte     // the MQTT control packet type (2 CONNACK, 9 SUBACK, 14 DISCONNECT, ...)
	Reason   string   // what was wrong, as a sentence's end
	Protocol Protocol // the version the agent spoke
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("device: the broker broke MQTT %s (packet type %d): %s", e.Protocol, e.Type, e.Reason)
}

// Unwrap returns ErrProtocol.
func (e *ProtocolError) Unwrap() error { return ErrProtocol }

// ErrProtocol is wrapped by every *ProtocolError.
var ErrProtocol = errors.New("device: MQTT protocol error")

// guardConn is the agent's view of every connection: it follows the MQTT
// frames paho reads, so that it can
//   - refuse a packet over the limit before paho allocates it (paho reads
//     the fixed header and the length a byte at a time, then the body in
//     one read of the declared size);
//   - read the CONNACK return code off the wire, and refuse a CONNACK or a
//     SUBACK paho would misread (ProtocolError). paho v1.5.1 turns a code
//     it does not know (an MQTT 5 code such as 0x87 sent to a 3.1.1
//     client), or a CONNACK longer than two bytes, into a successful
//     connect; the bytes on the wire are the only reliable answer.
//
// Read is called by one paho goroutine at a time (the connect, then the
// incoming loop); what other goroutines read is atomic.
type guardConn struct {
	net.Conn
	limit int
	v5    bool // MQTT 5: a CONNACK has properties, a SUBACK too

	// frame state, only touched by Read
	state   frameState
	typ     byte // the current packet's type
	flags   byte // its fixed header's flags
	length  int  // remaining length, as decoded so far
	lenByte int  // length bytes read of the current packet
	left    int  // body bytes still to pass
	packets int  // packets whose header was read

	code     atomic.Int32 // the first packet's CONNACK code, or NoConnack
	tooLarge atomic.Pointer[PacketTooLargeError]
	broken   atomic.Pointer[ProtocolError]
	reported atomic.Bool // the agent has reported tooLarge or broken

	closed    chan struct{} // closed by Close: a message waiting for the inbox gives up
	closeOnce sync.Once
}

type frameState uint8

const (
	inHeader frameState = iota
	inLength
	inBody
)

func newGuardConn(c net.Conn, limit int) *guardConn {
	g := &guardConn{Conn: c, limit: limit, closed: make(chan struct{})}
	g.code.Store(NoConnack)
	return g
}

// Close closes the connection and tells whatever waits on it. paho closes
// a connection it has lost before it waits for its goroutines, so a
// message held back for a full inbox is let go rather than holding paho.
func (c *guardConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *guardConn) Read(p []byte) (int, error) {
	if err := c.tooLarge.Load(); err != nil {
		return 0, err
	}
	if err := c.broken.Load(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if bad := c.follow(p[:n]); bad != nil {
		switch v := bad.(type) {
		case *PacketTooLargeError:
			c.tooLarge.Store(v)
		case *ProtocolError:
			if c.v5 {
				v.Protocol = MQTT5
			}
			c.broken.Store(v)
		}
		_ = c.Close() // the rest of the packet is never read
		return 0, bad // none of these bytes reach paho
	}
	return n, err
}

// breakWith ends the connection for a protocol error found above the
// frames (an MQTT 5 SUBACK or DISCONNECT code), unless one was found
// already: the session's loss is then reported as it.
func (c *guardConn) breakWith(pe *ProtocolError) {
	pe.Protocol = MQTT5
	c.broken.CompareAndSwap(nil, pe)
	_ = c.Close()
}

// follow advances the frame state over b, returning the violation if a
// header in it declares too much, or a CONNACK or SUBACK in it is not
// what MQTT 3.1.1 says.
func (c *guardConn) follow(b []byte) error {
	for i := 0; i < len(b); {
		switch c.state {
		case inHeader:
			c.typ, c.flags, c.length, c.lenByte = b[i]>>4, b[i]&0x0f, 0, 0
			c.packets++
			c.state = inLength
			i++
			if c.packets == 1 && (c.typ != 2 || c.flags != 0) {
				return &ProtocolError{Type: c.typ, Reason: fmt.Sprintf("the first packet is of type %d, flags %#x, not a CONNACK", c.typ, c.flags)}
			}
			if c.typ == 9 && c.flags != 0 {
				return &ProtocolError{Type: 9, Reason: fmt.Sprintf("a SUBACK with reserved flags %#x", c.flags)}
			}
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
			switch {
			case c.packets == 1 && !c.v5 && c.length != 2:
				return &ProtocolError{Type: 2, Reason: fmt.Sprintf("a CONNACK of %d bytes, not 2", c.length)}
			case c.packets == 1 && c.v5 && c.length < 2:
				return &ProtocolError{Type: 2, Reason: fmt.Sprintf("a CONNACK of %d bytes, not at least 2", c.length)}
			case c.typ == 9 && !c.v5 && c.length < 3:
				return &ProtocolError{Type: 9, Reason: fmt.Sprintf("a SUBACK of %d bytes, with no return code", c.length)}
			case c.typ == 9 && c.v5 && c.length < 3: // a packet ID and a properties length, at least
				return &ProtocolError{Type: 9, Reason: fmt.Sprintf("a SUBACK of %d bytes", c.length)}
			}
			c.left = c.length
			c.state = inBody
			if c.left == 0 {
				c.state = inHeader
			}
		case inBody:
			k := min(c.left, len(b)-i)
			if c.packets == 1 || c.typ == 9 { // only a CONNACK's and a SUBACK's bodies are read; a PUBLISH's is passed whole
				for j := 0; j < k; j++ {
					if bad := c.body(c.length-c.left+j, b[i+j]); bad != nil {
						return bad
					}
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

// body checks the byte at offset off of the current packet's body: the
// CONNACK's flags and code, a SUBACK's return codes (MQTT 3.1.1: an MQTT 5
// SUBACK's codes come after its properties, and the v5 protocol checks
// them as paho.golang reads them).
func (c *guardConn) body(off int, v byte) *ProtocolError {
	switch {
	case c.packets == 1 && off == 0 && v&0xfe != 0:
		return &ProtocolError{Type: 2, Reason: fmt.Sprintf("a CONNACK with reserved flags %#x", v)}
	case c.packets == 1 && off == 1 && c.v5:
		if !v5Known(v, 'c') {
			return &ProtocolError{Type: 2, Reason: fmt.Sprintf("CONNACK reason code %d (%#x), unknown to MQTT 5", v, v)}
		}
		c.code.Store(int32(v))
	case c.packets == 1 && off == 1:
		if v > 5 {
			return &ProtocolError{Type: 2, Reason: fmt.Sprintf("CONNACK return code %d (%#x), unknown to MQTT 3.1.1", v, v)}
		}
		c.code.Store(int32(v))
	case c.typ == 9 && !c.v5 && off >= 2 && v > 2 && v != 0x80:
		return &ProtocolError{Type: 9, Reason: fmt.Sprintf("SUBACK return code %d (%#x), unknown to MQTT 3.1.1", v, v)}
	}
	return nil
}

// connackCode returns the code read, or NoConnack.
func (c *guardConn) connackCode() int { return int(c.code.Load()) }

// violation returns the packet that closed the connection, if one did.
func (c *guardConn) violation() *PacketTooLargeError { return c.tooLarge.Load() }

// protocolError returns the CONNACK or SUBACK that closed the connection,
// if one did.
func (c *guardConn) protocolError() *ProtocolError { return c.broken.Load() }

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
