package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdguard/herdguard/internal/endpoint"
)

// MaxRemainingLength is MQTT's largest remaining length (four length
// bytes): the largest packet the device's MaxIncomingPacket may allow.
const MaxRemainingLength = 1<<28 - 1

// Conn is the agent's view of every connection. It follows the MQTT frames
// paho reads, so that it can
//   - refuse a packet over the limit before paho allocates it. paho reads
//     the fixed header and the length a byte at a time, then the body in
//     one read of the declared size.
//   - read the CONNACK return code off the wire, and refuse a CONNACK or a
//     SUBACK paho would misread (ProtocolError). paho v1.5.1 turns a code it does
//     not know into a successful connect. An MQTT 5 code such as 0x87 sent
//     to a 3.1.1 client is one. paho does the same with a CONNACK longer
//     than two bytes. The bytes on the wire are the only reliable answer.
//
// Read is called by one paho goroutine at a time (the connect, then the
// incoming loop). What other goroutines read is atomic.
type Conn struct {
	net.Conn
	limit int
	v5    bool // MQTT 5: a CONNACK has properties, a SUBACK too
	// maxQoS is the highest QoS any of the agent's subscriptions may
	// receive. A PUBLISH above it is refused before paho stores it: paho
	// v1.5.1 keeps every QoS 1 and 2 message it has not acknowledged, and a
	// QoS 2 one until a PUBREL that a hostile broker never sends.
	maxQoS *atomic.Uint32
	// receiveMax is the MQTT 5 Receive Maximum the device asked for (0 for
	// none). paho.golang keeps every QoS 1 message it has read until its
	// acknowledgement is flushed, so a broker past it is refused.
	receiveMax atomic.Int32
	// QoS 1 and 2 PUBLISHes read, less the PUBACKs and PUBRECs written:
	// what the broker has in flight, or more.
	unacked atomic.Int32
	written struct {
		sync.Mutex
		headers headerCounter
	}

	frameAt // only touched by Read

	code     atomic.Int32 // the first packet's CONNACK code, or NoConnack
	tooLarge atomic.Pointer[PacketTooLargeError]
	broken   atomic.Pointer[ProtocolError]
	reported atomic.Bool // the agent has reported tooLarge or broken

	closed    chan struct{} // closed by Close: a message waiting for the inbox gives up
	closeOnce sync.Once
}

// frameAt is where Read stands in the MQTT frames paho reads.
type frameAt struct {
	state   frameState
	typ     byte   // the current packet's type
	flags   byte   // its fixed header's flags
	length  int    // remaining length, as decoded so far
	lenByte int    // length bytes read of the current packet
	left    int    // body bytes still to pass
	packets int    // packets whose header was read
	connack []byte // an MQTT 5 CONNACK's body, checked once whole
}

type frameState uint8

const (
	inHeader frameState = iota
	inLength
	inBody
)

// NewConn guards c: no packet over limit bytes reaches the client, nor a
// PUBLISH at a QoS above what maxQoS holds when it arrives (0 if maxQoS is
// nil). v5 reads CONNACKs and SUBACKs as MQTT 5 has them.
func NewConn(c net.Conn, limit int, v5 bool, maxQoS *atomic.Uint32) *Conn {
	if maxQoS == nil {
		maxQoS = new(atomic.Uint32)
	}
	g := &Conn{Conn: c, limit: limit, v5: v5, maxQoS: maxQoS, closed: make(chan struct{})}
	g.code.Store(NoConnack)
	return g
}

// Close closes the connection and tells whatever waits on it. paho closes
// a connection it has lost before it waits for its goroutines, so a
// message held back for a full inbox is let go rather than holding paho.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *Conn) Read(p []byte) (int, error) {
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
			v.Protocol = c.protocol()
			c.broken.Store(v)
		}
		_ = c.Close() // the rest of the packet is never read
		return 0, bad // none of these bytes reach paho
	}
	return n, err
}

// Break ends the connection for a breach found above the frames (an MQTT 5
// SUBACK or DISCONNECT code). If a breach was found already, the session's
// loss is reported as that one. It returns the breach.
func (c *Conn) Break(typ byte, reason string) *ProtocolError {
	c.broken.CompareAndSwap(nil, &ProtocolError{Type: typ, Reason: reason, Protocol: c.protocol()})
	_ = c.Close()
	return c.broken.Load()
}

// follow advances the frame state over b. It returns the violation if a
// header in it declares too much, or if a CONNACK or SUBACK in it is not
// what MQTT 3.1.1 says.
func (c *Conn) follow(b []byte) error {
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
			if c.typ == 3 {
				if bad := c.publishQoS(); bad != nil {
					return bad
				}
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
			// a packet ID and a properties length, at least
			case c.typ == 9 && c.v5 && c.length < 3:
				return &ProtocolError{Type: 9, Reason: fmt.Sprintf("a SUBACK of %d bytes", c.length)}
			}
			c.left = c.length
			c.state = inBody
			if c.left == 0 {
				c.state = inHeader
			}
		case inBody:
			k := min(c.left, len(b)-i)
			// only a CONNACK's and a SUBACK's bodies are read; a PUBLISH's
			// is passed whole
			if c.packets == 1 || c.typ == 9 {
				for j := 0; j < k; j++ {
					if bad := c.body(c.length-c.left+j, b[i+j]); bad != nil {
						return bad
					}
				}
			}
			if c.packets == 1 && c.v5 {
				c.connack = append(c.connack, b[i:i+k]...)
			}
			c.left -= k
			i += k
			if c.left > 0 {
				continue
			}
			c.state = inHeader
			if c.packets == 1 && c.v5 {
				// whole now, and its last bytes not yet passed on
				bad := checkConnack5(c.connack)
				c.connack = nil
				if bad != nil {
					return bad
				}
			}
		}
	}
	return nil
}

// publishQoS refuses a PUBLISH whose fixed header names QoS 3, which MQTT
// does not have, or a QoS above what the agent's subscriptions may receive.
// A broker sends at most the QoS it granted.
func (c *Conn) publishQoS() *ProtocolError {
	qos := uint32(c.flags>>1) & 3
	switch limit := c.maxQoS.Load(); {
	case qos == 3:
		return &ProtocolError{Type: 3, Reason: "a PUBLISH with QoS 3, which MQTT does not have"}
	case qos > limit:
		return &ProtocolError{Type: 3, Reason: fmt.Sprintf("a PUBLISH at QoS %d, above the QoS %d the device's subscriptions were granted", qos, limit)}
	}
	if most := c.receiveMax.Load(); qos > 0 && most > 0 && c.unacked.Add(1) > most {
		return &ProtocolError{Type: 3, Reason: fmt.Sprintf("more than the Receive Maximum of %d QoS 1 PUBLISHes unacknowledged", most)}
	}
	return nil
}

// LimitUnacknowledged refuses a PUBLISH at QoS 1 or 2 that would make more
// than n unacknowledged on the wire: MQTT 5's Receive Maximum. A broker
// that keeps to it never meets the limit, as a PUBLISH read was sent and
// an acknowledgement written was not yet received.
func (c *Conn) LimitUnacknowledged(n int) { c.receiveMax.Store(int32(n)) }

// Write counts the acknowledgements the client writes, where a Receive
// Maximum needs them.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.receiveMax.Load() == 0 {
		return n, err
	}
	c.written.Lock()
	c.written.headers.follow(p[:n], func(typ byte) {
		if typ == 4 || typ == 5 { // PUBACK, PUBREC
			c.unacked.Add(-1)
		}
	})
	c.written.Unlock()
	return n, err
}

// body checks the byte at offset off of the current packet's body: the
// CONNACK's flags and code, and a SUBACK's return codes. The SUBACK check
// is MQTT 3.1.1's. An MQTT 5 SUBACK's codes come after its properties. The
// v5 protocol checks them as paho.golang reads them.
func (c *Conn) body(off int, v byte) *ProtocolError {
	switch {
	case c.packets == 1 && off == 0 && v&0xfe != 0:
		return &ProtocolError{Type: 2, Reason: fmt.Sprintf("a CONNACK with reserved flags %#x", v)}
	case c.packets == 1 && off == 1 && c.v5:
		if !known(v, 'c') {
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

// ConnackCode returns the code read, or NoConnack.
func (c *Conn) ConnackCode() int { return int(c.code.Load()) }

// Oversized returns the packet that closed the connection, if one did.
// protocol is the version the connection speaks.
func (c *Conn) protocol() Protocol {
	if c.v5 {
		return MQTT5
	}
	return MQTT311
}

func (c *Conn) Oversized() *PacketTooLargeError { return c.tooLarge.Load() }

// Broken returns the packet that broke MQTT and closed the connection, if
// one did.
func (c *Conn) Broken() *ProtocolError { return c.broken.Load() }

// FirstReport says whether this is the first call since the connection
// closed for a packet: the agent reports it once.
func (c *Conn) FirstReport() bool { return c.reported.CompareAndSwap(false, true) }

// Closed is closed when the connection is: a message it brought that
// waits for the agent's queue gives up then.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// DialURL opens a TCP or TLS connection for a broker URL, as paho would,
// giving up when ctx ends.
func DialURL(ctx context.Context, u *url.URL, timeout time.Duration, tlsCfg *tls.Config) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), endpoint.DefaultPort(u.Scheme))
	}
	switch u.Scheme {
	case "tcp", "mqtt":
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", host)
	case "ssl", "tls", "mqtts", "tcps":
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
