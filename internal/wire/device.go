package wire

import (
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/devicecore"
	"github.com/herdguard/herdguard/internal/endpoint"
	"github.com/herdguard/herdguard/publisher"
)

// profile is what the devices of one group (and, in a cluster, one list of
// endpoints) share: their timing, protocol and endpoints. A device points
// at its profile, so that what a fleet shares is kept once.
type profile struct {
	timing                                 devicecore.Timing
	v5                                     bool
	keepAlive, pingTimeout, connectTimeout time.Duration
	endpoints                              []*url.URL // the broker, then the failover ones, in turn
	nodes                                  []int      // the cluster's node each endpoint reaches
	maxRedirects                           int
	telemetry                              time.Duration // a reading this often, QoS 1 (0: none)
}

// state is where a device stands between its steps.
type state uint8

const (
	idle      state = iota // not started, or stopped
	waiting                // a wait of the core's: the timer ends it with Due
	dialing                // a connect attempt's socket is connecting
	connected              // its CONNECT is sent: a CONNACK is awaited
	online                 // a session: the timer pings or, a ping out, notices silence
)

// dev is one device: the firmware's reconnect core, its random source
// (seeded as device i's agent's is, so both draw the same waits), and the
// connection it drives. It is owned by one loop.
type dev struct {
	core     devicecore.Core
	src      rand.PCG
	prof     *profile
	in       []byte        // a packet begun and not yet whole; nil between packets
	due      time.Duration // when the current wait ends: an attempt's lag is counted from it
	sock     int32         // the driver's handle of the connection, noSock if none
	id       int32         // the device's index in the fleet
	place    int32         // its index in its loop's devices
	gen      uint32        // the timer's generation: an older timer event is stale
	state    state
	endpoint uint8 // the endpoint of the next attempt, an index of prof.endpoints
	hops     uint8 // redirects followed in a row without a session
	pingOut  bool  // a PINGREQ is unanswered
	// Telemetry, store-and-forward as counts: readings made, and those
	// the broker acknowledged; reading acked+1 is the next sent, with DUP
	// once a session ended with it unacknowledged.
	produced, acked uint32
	inflight        uint16 // the packet ID of the PUBLISH in flight, 0 if none
	redeliver       bool
}

const noSock = -1

// step does what the core's step s asks, at now.
func (l *loop) step(d *dev, s devicecore.Step, now time.Duration) {
	switch s.Kind {
	case devicecore.KindWait:
		d.state, d.due = waiting, now+s.Wait
		l.schedule(d, d.due)
	case devicecore.KindConnect:
		l.attempt(d, now)
	case devicecore.KindOnline:
		d.state, d.hops, d.pingOut = online, 0, false
		l.schedule(d, now+d.prof.keepAlive)
		l.publish(d)
	case devicecore.KindStop:
		l.drop(d)
		d.state = idle
	}
}

// attempt begins a connect attempt: a socket to the device's endpoint, or
// its redirect, bounded by the connect timeout from now on.
func (l *loop) attempt(d *dev, now time.Duration) {
	l.log.Begin(time.Now(), int(d.id), now-d.due)
	sock, err := l.drv.dial(d.place, d.id, l.target(d))
	if err != nil {
		d.state = dialing
		l.failed(d, now)
		return
	}
	d.sock, d.state = sock, dialing
	l.schedule(d, now+d.prof.connectTimeout)
}

// target is where d's next attempt goes: where a broker redirected it, or
// its endpoint in turn.
func (l *loop) target(d *dev) *url.URL {
	if u, ok := l.redirects[d.id]; ok {
		return u
	}
	return d.prof.endpoints[d.endpoint]
}

// node is the cluster's node d's current target reaches.
func (l *loop) node(d *dev) int {
	if _, ok := l.redirects[d.id]; ok {
		return 0
	}
	return d.prof.nodes[d.endpoint]
}

// up is d's socket connected: it sends its CONNECT.
func (l *loop) up(d *dev, now time.Duration) {
	if d.state != dialing {
		return
	}
	d.state = connected
	if err := l.drv.send(d.sock, connectPacket(d.prof.v5, clientID(d.id), d.prof.keepAlive)); err != nil {
		l.failed(d, now)
	}
}

// failed ends an attempt that got no CONNACK: the path failed, timed out
// or broke MQTT. The next goes to the next endpoint, as the agent's does.
func (l *loop) failed(d *dev, now time.Duration) {
	l.log.End(time.Now(), int(d.id), fault.Dropped, 0, l.node(d))
	l.drop(d)
	l.nextEndpoint(d)
	l.step(d, d.core.Result(&d.prof.timing, &d.src, now, devicecore.Result{Code: devicecore.NoConnack, Failed: true}), now)
}

// refused ends an attempt the broker refused with code: the device follows
// the server it names (0x9C, 0x9D) where the agent would, or moves on to
// its next endpoint.
func (l *loop) refused(d *dev, c connack, now time.Duration) {
	l.log.End(time.Now(), int(d.id), fault.Refused, c.code, l.node(d))
	l.drop(d)
	if !l.redirect(d, c) {
		l.nextEndpoint(d)
	}
	l.step(d, d.core.Result(&d.prof.timing, &d.src, now, devicecore.Result{Code: c.code}), now)
}

// lost ends a session, with the code of the broker's DISCONNECT (0 for
// none, a silent path or a closed socket).
func (l *loop) lost(d *dev, c connack, now time.Duration) {
	l.log.Lost(time.Now(), int(d.id))
	l.drop(d)
	if !l.redirect(d, c) {
		l.nextEndpoint(d)
	}
	l.step(d, d.core.Disconnected(&d.prof.timing, &d.src, now, c.code), now)
}

// connack takes a CONNACK: a session, or a refusal.
func (l *loop) connack(d *dev, c connack, now time.Duration) {
	if c.code != 0 {
		l.refused(d, c, now)
		return
	}
	l.log.End(time.Now(), int(d.id), fault.Accepted, 0, l.node(d))
	l.step(d, d.core.Result(&d.prof.timing, &d.src, now, devicecore.Result{}), now)
}

// broken ends d's connection, whatever it was doing: an attempt fails, a
// session is lost.
func (l *loop) broken(d *dev, now time.Duration) {
	switch d.state {
	case dialing, connected:
		l.failed(d, now)
	case online:
		l.lost(d, connack{}, now)
	}
}

// redirect follows the Server Reference of a 0x9C or 0x9D under the
// agent's rules (device.Agent's followRedirect): the reference must be a
// configured endpoint's host, and at most Redirects.Max are followed in a
// row without a session. It reports whether it did.
func (l *loop) redirect(d *dev, c connack) bool {
	if c.code != device.CodeUseAnotherServer && c.code != device.CodeServerMoved || d.prof.timing.IgnoreServerSignals ||
		c.reference == "" || int(d.hops) >= d.prof.maxRedirects {
		return false
	}
	u, _ := endpoint.Redirect(c.reference, l.target(d), d.prof.endpoints, nil)
	if u == nil {
		return false
	}
	d.hops++
	l.redirects[d.id] = u
	return true
}

// nextEndpoint sends d's next attempt to its next endpoint in turn (and no
// longer where a broker redirected it).
func (l *loop) nextEndpoint(d *dev) {
	delete(l.redirects, d.id)
	d.endpoint = uint8((int(d.endpoint) + 1) % len(d.prof.endpoints))
}

// drop closes d's connection, if it has one, and forgets a partial packet.
// A reading in flight is sent again on the next session.
func (l *loop) drop(d *dev) {
	if d.sock != noSock {
		l.drv.close(d.sock)
		d.sock = noSock
	}
	d.in = nil
	if d.inflight != 0 {
		d.inflight, d.redeliver = 0, true
		l.stats.failures.Add(1)
	}
}

// due is d's timer: the end of a wait, of the connect timeout, or of a
// keepalive interval (a PINGREQ) or a ping's timeout (a silent path).
func (l *loop) due(d *dev, now time.Duration) {
	switch d.state {
	case waiting:
		l.step(d, d.core.Due(&d.prof.timing, &d.src, now), now)
	case dialing, connected:
		l.failed(d, now)
	case online:
		if d.pingOut {
			l.lost(d, connack{}, now)
			return
		}
		if l.drv.send(d.sock, pingreq) != nil {
			l.lost(d, connack{}, now)
			return
		}
		d.pingOut = true
		l.schedule(d, now+d.prof.pingTimeout)
	}
}

// read takes bytes d's connection delivered: every whole packet in them,
// and keeps the start of the next.
func (l *loop) read(d *dev, b []byte, now time.Duration) {
	if d.in != nil {
		b = append(d.in, b...)
		d.in = nil
	}
	for len(b) > 0 && d.sock != noSock {
		f, n, err := nextFrame(b, defaultLimit)
		if err != nil {
			l.broken(d, now)
			return
		}
		if n == 0 {
			d.in = append([]byte(nil), b...)
			return
		}
		b = b[n:]
		l.packet(d, f, now)
	}
}

// packet takes one whole packet from the broker.
func (l *loop) packet(d *dev, f frame, now time.Duration) {
	switch {
	case d.state == connected && f.typ() == typeConnack:
		c, err := readConnack(d.prof.v5, f)
		if err != nil {
			l.failed(d, now)
			return
		}
		l.connack(d, c, now)
	case d.state == online && f.typ() == typePingresp:
		d.pingOut = false
		l.schedule(d, now+d.prof.keepAlive)
	case d.state == online && f.typ() == typePuback:
		l.puback(d, f)
	case d.state == online && f.typ() == typeDisconnect && d.prof.v5:
		c, err := readDisconnect(f)
		if err != nil {
			c = connack{}
		}
		l.lost(d, c, now)
	default: // a packet the device did not ask for, or out of turn: the broker broke MQTT
		l.broken(d, now)
	}
}

// reading is d's telemetry timer: one more reading, sent at once if the
// session is up and nothing is in flight.
func (l *loop) reading(d *dev) {
	if !l.produce.Load() {
		return
	}
	d.produced++
	l.stats.enqueued.Add(1)
	l.publish(d)
}

// publish sends d's next reading, if d is online, has one and has none in
// flight: QoS 1, one at a time, in order, as the store-and-forward
// publisher sends them, in its envelope (package publisher), so that the
// broker's side counts it by the same rule.
func (l *loop) publish(d *dev) {
	if d.state != online || d.inflight != 0 || d.acked == d.produced {
		return
	}
	seq := uint64(d.acked) + 1
	payload, err := publisher.Envelope{Epoch: l.epoch, Seq: seq, Time: time.Now(), Payload: readingPayload}.Marshal()
	if err != nil {
		return // a fixed envelope always marshals
	}
	id := uint16(seq%65535) + 1
	if l.drv.send(d.sock, publishPacket(d.prof.v5, "telemetry/"+clientID(d.id), id, d.redeliver, payload)) != nil {
		l.lost(d, connack{}, l.now())
		return
	}
	d.inflight = id
}

// readingPayload is every reading's payload, as the agents' generator's.
var readingPayload = []byte(`{"temp":21.5}`)

// puback takes a PUBACK: the reading in flight is delivered, and the next
// goes.
func (l *loop) puback(d *dev, f frame) {
	if len(f.body) < 2 || uint16(f.body[0])<<8|uint16(f.body[1]) != d.inflight || d.inflight == 0 {
		return // a late or stray acknowledgement
	}
	d.inflight, d.redeliver = 0, false
	d.acked++
	l.stats.delivered.Add(1)
	l.publish(d)
}
