package testbroker

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/faultlog"
	"github.com/herdguard/herdguard/internal/waitfor"
)

// Cause says why a session ended. The zero Cause, "", is none of these. It
// is a plain value, safe to share.
type Cause string

const (
	CauseDropAll   Cause = "drop-all"  // Broker.DropAll
	CauseDrain     Cause = "drain"     // Broker.Drain
	CauseOutage    Cause = "outage"    // Broker.BeginOutage
	CauseFlap      Cause = "flap"      // Broker.SetFlapping
	CauseThrottled Cause = "throttled" // admission control, accept-then-disconnect
	CauseTakeover  Cause = "takeover"  // a new connection with the same client ID
	CauseClient    Cause = "client"    // the client sent DISCONNECT
	CauseError     Cause = "error"     // the connection failed (EOF, keepalive timeout, ...)
	CauseShutdown  Cause = "shutdown"  // Broker.Close
)

// Disconnect is the end of an established session. The zero Disconnect is
// not meaningful. Recorders hand out copies: plain values, safe to share.
type Disconnect struct {
	Time     time.Time
	ClientID string
	Cause    Cause
	Err      string // the underlying error, if any
}

// Publish is a PUBLISH the broker accepted from a client. It is recorded
// before the broker acknowledges it, so a client holding a PUBACK finds its
// message here without waiting. The zero Publish is not meaningful.
// Recorders hand out copies that share Payload with the record: safe to
// share as long as no one changes Payload.
type Publish struct {
	Time     time.Time
	ClientID string
	Topic    string
	QoS      byte
	Payload  []byte // the payload, or Config.PayloadDigest of it
}

// Recorder keeps every attempt, disconnect and publish a Broker sees. Its
// attempts are fault.Attempts: Accept when the socket was accepted, Connect
// when the CONNECT arrived (zero if it never did), Decided and Code when the
// broker answered. It is safe for concurrent use. Recording appends under a
// mutex that is never held across I/O; readers get copies. The zero Recorder
// is empty and stays so: only a Broker records, into the one Broker.Recorder
// returns.
type Recorder struct {
	mu          sync.Mutex
	log         faultlog.Log
	disconnects []Disconnect
	publishes   []Publish
	counts      Counts // all but the attempts' own, which log keeps
	changed     waitfor.Broadcast
}

func (r *Recorder) notifyLocked() { r.changed.Notify() }

// accept opens an attempt and returns its sequence number.
func (r *Recorder) accept(at time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.log.Accept(at)
	r.notifyLocked()
	return seq
}

func (r *Recorder) connect(seq int, at time.Time, clientID string, level byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.log.At(seq)
	if a == nil {
		return
	}
	a.Connect, a.ClientID, a.Protocol = at, clientID, level
	r.notifyLocked()
}

// decide sets an attempt's outcome once; later calls keep the first answer.
func (r *Recorder) decide(seq int, o fault.Outcome, code byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.log.Decide(seq, o, code, time.Now()) {
		return
	}
	if o == fault.Accepted || o == fault.Throttled {
		r.counts.Connected++
	}
	r.notifyLocked()
}

func (r *Recorder) disconnect(d Disconnect) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disconnects = append(r.disconnects, d)
	r.counts.Disconnects++
	r.counts.Connected--
	r.notifyLocked()
}

func (r *Recorder) publish(p Publish) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.publishes = append(r.publishes, p)
	r.counts.Publishes++
	r.notifyLocked()
}

func (r *Recorder) withheld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts.DroppedPublishes++
	r.notifyLocked()
}

// Attempts returns a copy of every attempt so far, in order of acceptance.
func (r *Recorder) Attempts() []fault.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.All()
}

// Disconnects returns a copy of every session end so far.
func (r *Recorder) Disconnects() []Disconnect {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Disconnect(nil), r.disconnects...)
}

// Publishes returns a copy of every accepted PUBLISH so far.
func (r *Recorder) Publishes() []Publish {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Publish(nil), r.publishes...)
}

// TakePublishes returns every accepted PUBLISH recorded since the last take
// (or reset) and forgets them, in one step. A long run thus counts its
// messages as it goes instead of holding them all.
func (r *Recorder) TakePublishes() []Publish {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.publishes
	r.publishes = nil
	return ps
}

// Counts is a summary of what the broker saw: its attempts by outcome, and
// its sessions and messages. The zero Counts counts nothing. It is a copy
// taken by Recorder.Counts: a plain value, safe to share.
type Counts struct {
	fault.Counts
	Disconnects, Publishes int
	// DroppedPublishes counts the PUBLISHes dropped unacknowledged (DropPublishes).
	DroppedPublishes int
	// Connected is sessions established and not yet ended: a state, which
	// Reset keeps, rather than a count of events.
	Connected int
}

// Counts summarises what was recorded so far.
func (r *Recorder) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countsLocked()
}

func (r *Recorder) countsLocked() Counts {
	k := r.counts
	k.Counts = r.log.Counts()
	return k
}

// Await blocks until cond returns true for the current counts, ctx ends
// (ctx.Err()), or the real-time bound timeout passes. cond is called after
// every new record, with the recorder locked: it must be quick and must not
// call the Recorder.
func (r *Recorder) Await(ctx context.Context, timeout time.Duration, cond func(Counts) bool) error {
	err := waitfor.UntilContext(ctx, &r.mu, &r.changed, timeout, func() bool { return cond(r.countsLocked()) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("testbroker: condition not met after %v; counts %+v", timeout, r.Counts())
}

// Reset forgets everything recorded so far (attempts still open keep being
// tracked by their connections, but are no longer reported).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetConnectionsLocked()
	r.publishes = nil
	r.counts.Publishes, r.counts.DroppedPublishes = 0, 0
	r.notifyLocked()
}

// ResetConnections forgets the attempts and disconnects recorded so far and
// keeps the publishes, in one step. A run may measure a disruption's
// connections while counting messages over the whole run. It then loses
// none to a gap between reading and resetting.
func (r *Recorder) ResetConnections() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetConnectionsLocked()
	r.notifyLocked()
}

func (r *Recorder) resetConnectionsLocked() {
	r.log.Reset()
	r.disconnects = nil
	r.counts = Counts{Connected: r.counts.Connected, Publishes: r.counts.Publishes}
}

// TimeOf chooses which timestamp of an attempt counts as its arrival. The
// zero TimeOf is AtConnect. It is a plain value, safe to share.
type TimeOf int

const (
	AtConnect TimeOf = iota // the CONNECT packet (attempts that sent none fall back to accept)
	AtAccept                // the socket accept
)

func timeOf(a fault.Attempt, by TimeOf) time.Time {
	if by == AtConnect && !a.Connect.IsZero() {
		return a.Connect
	}
	return a.Accept
}

// Arrivals counts attempts per bucket of width bucket, starting at from; the
// last bucket holds the latest arrival. Arrivals before from are left out.
func (r *Recorder) Arrivals(from time.Time, bucket time.Duration, by TimeOf) []int {
	if bucket <= 0 {
		return nil
	}
	var counts []int
	for _, a := range r.Attempts() {
		d := timeOf(a, by).Sub(from)
		if d < 0 {
			continue
		}
		i := int(d / bucket)
		for len(counts) <= i {
			counts = append(counts, 0)
		}
		counts[i]++
	}
	return counts
}

// WriteCSV writes one row per attempt: seq, accept and connect times in
// seconds since from, client ID, outcome, CONNACK code.
func (r *Recorder) WriteCSV(w io.Writer, from time.Time) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seq", "accept_s", "connect_s", "client_id", "outcome", "code"})
	secs := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatFloat(t.Sub(from).Seconds(), 'f', 6, 64)
	}
	for _, a := range r.Attempts() {
		_ = cw.Write([]string{strconv.Itoa(a.Seq), secs(a.Accept), secs(a.Connect), a.ClientID,
			a.Outcome.String(), strconv.Itoa(int(a.Code))})
	}
	cw.Flush()
	return cw.Error()
}
