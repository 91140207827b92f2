// Package fault is the vocabulary of a storm's faults. The test broker
// (testbroker), the fault proxy in front of any broker (faultproxy) and the
// simulator that drives them share it. It has one Breaker interface both
// implement and one Admission limit both take. It has one Attempt record
// with its Outcome and Counts that both keep. A run says what it does to
// the fleet's broker once. The same words work whichever of the two stands
// in the path. An invalid Admission is an error wrapping [ErrInvalid].
package fault

import (
	"strconv"
	"time"
)

// Breaker is what a storm breaks on command: the broker itself, or the path
// to it. Implementations are safe for concurrent use, and every method may
// be called while clients are connected. A nil Breaker is not usable.
type Breaker interface {
	// DropAll ends every session now and returns how many it ended; new
	// connections are let in as before.
	DropAll() int
	// BeginOutage ends every session and refuses every new connection until
	// EndOutage; it returns how many sessions it ended.
	BeginOutage() int
	// EndOutage lets connections in again. Its error says why it could not
	// (the address taken meanwhile, the breaker closed).
	EndOutage() error
	// SetAdmission limits the connections admitted from now on, replacing
	// any earlier limit; the zero Admission lifts it.
	SetAdmission(Admission) error
	// SetFlapping ends each session admitted from now on after d; 0 stops
	// it.
	SetFlapping(d time.Duration) error
}

// Outcome is what became of one connection attempt. The zero Outcome is
// Pending. It is a plain value, safe to share.
type Outcome uint8

const (
	// Pending: accepted at the socket, no decision yet.
	Pending Outcome = iota
	// Accepted: the broker answered CONNACK 0 (the test broker), or the
	// connection was passed on to the broker (the fault proxy).
	Accepted
	// Refused: turned away at once: a CONNACK with a non-zero code
	// (Attempt.Code), or a reset (an outage, or over the limit with
	// RefuseOverLimit).
	Refused
	// Throttled: over the limit with DisconnectOverLimit: accepted, then
	// closed after its CONNECT, as AWS IoT does to clients over its connect
	// rate.
	Throttled
	// Dropped: the connection ended before any decision: no CONNECT sent,
	// the broker went down, or the client gave up while held.
	Dropped
	// Unreachable: let through by the fault proxy, but the broker behind it
	// could not be dialled.
	Unreachable
	// Overflowed: held by the fault proxy, it sent more than the proxy keeps
	// before its turn came; reset and never passed on.
	Overflowed
)

var outcomeNames = [...]string{"pending", "accepted", "refused", "throttled", "dropped", "unreachable", "overflowed"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// ParseOutcome reads an Outcome's String back.
func ParseOutcome(s string) (Outcome, bool) {
	for o, name := range outcomeNames {
		if name == s {
			return Outcome(o), true
		}
	}
	return 0, false
}

// Attempt is one connection attempt as a Breaker saw it. The zero Attempt
// records nothing; recorders make them. It is a plain value: the copies
// recorders hand out are safe to share.
type Attempt struct {
	Seq      int       // order of acceptance, from 0; a reset of the record does not restart it
	Accept   time.Time // when the socket was accepted: the arrival
	Connect  time.Time // when its MQTT CONNECT was read; zero if never (or not in the clear)
	Decided  time.Time // when its outcome was settled; zero while pending
	ClientID string    // from the CONNECT; empty if none was read
	Outcome  Outcome
	// Code is the CONNACK code sent with Refused (a 3.1.1 return code, or
	// an MQTT 5 reason code), else 0.
	Code byte
	// Protocol is its CONNECT's protocol level: 4 MQTT 3.1.1, 5 MQTT 5 (3
	// for 3.1); 0 if none was read.
	Protocol byte
	// Answered is when the broker first answered a connection let through
	// (its CONNACK, or under TLS its handshake), and Ended when that
	// connection ended; zero while not (yet). Only the fault proxy, which
	// sees connections rather than sessions, sets them.
	Answered, Ended time.Time
}

// Counts summarises attempts by outcome. The zero value counts nothing. It
// is a plain value with no lock: copies are safe to share, but one being
// counted into must be guarded by its owner.
type Counts struct {
	Attempts                                                                int
	Pending, Accepted, Refused, Throttled, Dropped, Unreachable, Overflowed int
}

// Of returns the counter of outcome o.
func (c *Counts) Of(o Outcome) *int {
	switch o {
	case Accepted:
		return &c.Accepted
	case Refused:
		return &c.Refused
	case Throttled:
		return &c.Throttled
	case Dropped:
		return &c.Dropped
	case Unreachable:
		return &c.Unreachable
	case Overflowed:
		return &c.Overflowed
	}
	return &c.Pending
}
