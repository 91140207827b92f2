package testbroker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/fault"
)

// Faults are what a test or a storm breaks a Broker with: drops, outages,
// refusals, throttled admission, flapping sessions, slow CONNACKs, lost or
// held PUBACKs. Every one may be applied while clients are connected, and
// all are safe for concurrent use. Faults is a fault.Breaker, as the fault
// proxy is. Get a Broker's with its Faults method.
type Faults struct {
	b *Broker

	admission atomic.Pointer[activeLimit]
	// > 0: the reason code every CONNECT is refused with (BeginBusy)
	busy          atomic.Int32
	flapAfter     atomic.Int64                  // time.Duration
	latency       atomic.Int64                  // time.Duration
	dropPublishes atomic.Bool                   // drop QoS 1+ PUBLISHes without a PUBACK
	holdAcks      atomic.Pointer[chan struct{}] // while set, PUBACKs wait for it to close

	mu      sync.Mutex
	refuse  map[string]refusal
	timers  map[*time.Timer]struct{} // flap and outage timers, stopped by Close
	outages int                      // BeginOutage calls not yet ended
}

// A Broker's Faults are a fault.Breaker: a run breaks it with the same
// calls as the fault proxy.
var _ fault.Breaker = (*Faults)(nil)

// Faults returns what breaks b on command.
func (b *Broker) Faults() *Faults { return &b.faults }

// Drain ends every session with an MQTT 5 DISCONNECT of code. If reference
// is not empty, the DISCONNECT carries it as a Server Reference. The code
// may be 0x9C (use another server), to send the fleet to another node. It
// may be 0x8B (server shutting down) or 0x89 (server busy). A 3.1.1
// session, which has no such packet, is closed. The broker stays up. It
// returns how many sessions it ended, once each end is recorded.
func (f *Faults) Drain(code byte, reference string) int {
	return f.b.dropAllWith(CauseDrain, func(cl *mqtt.Client) {
		if cl.Properties.ProtocolVersion < 5 {
			cl.Stop(fmt.Errorf("testbroker: %s", CauseDrain))
			return
		}
		// a peer that stops reading must not block us
		_ = cl.Net.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ReasonCode: code,
			Properties: packets.Properties{ServerReference: reference, ReasonString: "drained"}}
		_ = cl.WritePacket(pk)
		cl.Stop(packets.Code{Code: code, Reason: "drained"})
	})
}

// BeginOutage takes the broker down: every client is dropped and new
// connections are refused (TCP: connection refused; in-memory: the dial
// fails) until EndOutage. It returns the number of clients dropped, once
// their ends are recorded.
func (f *Faults) BeginOutage() int {
	f.mu.Lock()
	f.outages++
	f.mu.Unlock()
	f.b.ln.down()
	return f.b.dropAll(CauseOutage)
}

// EndOutage brings the listener back on the same address. It fails only if
// the address was taken meanwhile or the broker is closed.
func (f *Faults) EndOutage() error {
	f.mu.Lock()
	f.outages = 0
	f.mu.Unlock()
	return f.b.ln.up()
}

// OutageFor is BeginOutage now and EndOutage after d (real time).
func (f *Faults) OutageFor(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: outage duration must be > 0, got %v", ErrInvalid, d)
	}
	f.BeginOutage()
	f.afterFunc(d, func() {
		if err := f.EndOutage(); err != nil && f.b.ctx.Err() == nil {
			f.b.log.Error("outage did not end", "error", err)
		}
	})
	return nil
}

// Down reports whether an outage is in force.
func (f *Faults) Down() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outages > 0
}

func (f *Faults) afterFunc(d time.Duration, do func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.timers == nil { // closed
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		f.mu.Lock()
		if f.timers != nil {
			delete(f.timers, t)
		}
		f.mu.Unlock()
		do()
	})
	f.timers[t] = struct{}{}
}

// SetFlapping makes the broker drop every session d after its CONNACK, as a
// broker with a duplicate client ID or a crashing backend does. 0 turns it off.
func (f *Faults) SetFlapping(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: flapping interval must be >= 0, got %v", ErrInvalid, d)
	}
	f.flapAfter.Store(int64(d))
	return nil
}

// SetConnackLatency delays every CONNACK by d. 0 turns it off.
func (f *Faults) SetConnackLatency(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: latency must be >= 0, got %v", ErrInvalid, d)
	}
	f.latency.Store(int64(d))
	return nil
}

// DropPublishes makes the broker drop every QoS 1 or 2 PUBLISH it reads,
// until called again with false. A dropped PUBLISH is unacknowledged and
// out of the record (Counts.DroppedPublishes counts them). A broker that
// fails before storing one does the same. A client keeps such a message in
// flight. With a persistent session it resends it on its next connection.
func (f *Faults) DropPublishes(on bool) { f.dropPublishes.Store(on) }

// DelayPubacks makes the broker record each QoS 1 or 2 PUBLISH as usual but
// hold back its PUBACK until DelayPubacks(false) (or Close). A client's
// message thus stays in flight, already received, for as long as a test
// needs.
func (f *Faults) DelayPubacks(on bool) {
	if on {
		ch := make(chan struct{})
		f.holdAcks.CompareAndSwap(nil, &ch) // already holding: nothing to do
		return
	}
	if ch := f.holdAcks.Swap(nil); ch != nil {
		close(*ch)
	}
}

// awaitAck blocks a PUBACK while DelayPubacks is on.
func (f *Faults) awaitAck() {
	if ch := f.holdAcks.Load(); ch != nil {
		select {
		case <-*ch:
		case <-f.b.ctx.Done():
		}
	}
}

// Refuse makes the broker refuse the given client IDs with code until
// Unrefuse. Codes 1-5 are the 3.1.1 return codes; a code of 0x80 or more is
// sent as is (a non-conforming broker).
func (f *Faults) Refuse(code ConnackCode, clientIDs ...string) error {
	return f.RefuseTo(code, "", clientIDs...)
}

// RefuseTo is Refuse naming another server. An MQTT 5 client is refused
// with code (0x9C use another server, 0x9D server moved). reference goes as
// the CONNACK's Server Reference. A 3.1.1 client, which has no such field,
// is refused only with the code.
func (f *Faults) RefuseTo(code ConnackCode, reference string, clientIDs ...string) error {
	if code == 0 || (code > RefuseNotAuthorised && code < 0x80) {
		return fmt.Errorf("%w: %d is not a refusal code (1-5, or >= 0x80 to send raw)", ErrInvalid, code)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range clientIDs {
		f.refuse[id] = refusal{code, reference}
	}
	return nil
}

// Unrefuse lets the given client IDs connect again.
func (f *Faults) Unrefuse(clientIDs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range clientIDs {
		delete(f.refuse, id)
	}
}

func (f *Faults) refusal(clientID string) (refusal, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.refuse[clientID]
	return c, ok
}

// SetAdmission limits the connections admitted from now on, replacing any
// earlier limit. The zero Admission lifts it. Over the limit the broker
// does one of three things. RefuseOverLimit refuses with CONNACK 3.
// PauseOverLimit stops accepting sockets, which wait in the listen backlog.
// DisconnectOverLimit accepts and closes the session right after its
// CONNACK.
func (f *Faults) SetAdmission(a fault.Admission) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if a == (fault.Admission{}) {
		f.admission.Store(nil)
		return nil
	}
	a.Burst = max(a.Burst, 1)
	f.admission.Store(&activeLimit{Admission: a, lim: rate.NewLimiter(rate.Limit(a.Rate), a.Burst)})
	return nil
}

// admitSocket waits for a token before accepting, in fault.PauseOverLimit mode.
func (f *Faults) admitSocket(ctx context.Context) error {
	a := f.admission.Load()
	if a == nil || a.Mode != fault.PauseOverLimit {
		return ctx.Err()
	}
	return a.lim.Wait(ctx)
}

// admitConnect decides, at CONNECT, for the refuse and disconnect modes;
// code is the MQTT 5 reason code of a refusal.
func (f *Faults) admitConnect(now time.Time) (ok bool, mode fault.AdmissionMode, code byte) {
	a := f.admission.Load()
	if a == nil || a.Mode == fault.PauseOverLimit {
		return true, 0, 0
	}
	return a.lim.AllowN(now, 1), a.Mode, a.RefusalCode()
}

// BeginBusy refuses every CONNECT until EndBusy, as a broker node past
// its capacity does: an MQTT 5 client with code (0x89 server busy, say),
// a 3.1.1 client with CONNACK 3. Sessions already up stay: Drain ends
// them.
func (f *Faults) BeginBusy(code byte) error {
	if code < 0x80 {
		return fmt.Errorf("%w: an MQTT 5 refusal's code is 0x80 or more, got %#02x", ErrInvalid, code)
	}
	f.busy.Store(int32(code))
	return nil
}

// EndBusy admits CONNECTs again.
func (f *Faults) EndBusy() { f.busy.Store(0) }

// DropAll disconnects every connected client at once; the broker stays up
// and they may reconnect immediately. It returns how many were dropped, once
// the end of each of their sessions is recorded.
func (f *Faults) DropAll() int { return f.b.dropAll(CauseDropAll) }

// ConnackCode is an MQTT 3.1.1 CONNACK return code to refuse with. The zero
// ConnackCode, 0, is acceptance, which Refuse rejects. It is a plain value,
// safe to share.
type ConnackCode byte

const (
	RefuseProtocolVersion   ConnackCode = 1
	RefuseIdentifier        ConnackCode = 2 // identifier rejected
	RefuseServerUnavailable ConnackCode = 3
	RefuseBadCredentials    ConnackCode = 4
	RefuseNotAuthorised     ConnackCode = 5
)

// mochi speaks v5 codes and maps them down for 3.1.1 clients; these are the
// v5 codes that map to each 3.1.1 code. A code outside 1-5 is sent raw, which
// is how to reproduce brokers that send MQTT 5 codes to 3.1.1 clients.
var v5For = map[ConnackCode]packets.Code{
	RefuseProtocolVersion:   packets.ErrUnsupportedProtocolVersion,
	RefuseIdentifier:        packets.ErrClientIdentifierNotValid,
	RefuseServerUnavailable: packets.ErrServerUnavailable,
	RefuseBadCredentials:    packets.ErrMalformedUsername,
	RefuseNotAuthorised:     packets.ErrBadUsernameOrPassword,
}

// refusal is a CONNACK code to refuse a client with, and the Server
// Reference to name in it, if any.
type refusal struct {
	code      ConnackCode
	reference string
}

// activeLimit is the limit in force, with its token bucket.
type activeLimit struct {
	fault.Admission
	lim *rate.Limiter
}
