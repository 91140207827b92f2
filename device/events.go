// What an agent tells of itself: its events, metrics and counters.

package device

import (
	"fmt"
	"time"
)

// EventKind enumerates Events. The zero EventKind is none of them: the
// kinds start at EventConnecting. An EventKind is a plain value, safe to
// share.
type EventKind uint8

const (
	// EventConnecting: a connect attempt starts (Attempt).
	EventConnecting EventKind = iota + 1
	// EventConnected: the session is up (Attempt).
	EventConnected
	// EventAttemptFailed: a connect attempt failed (Attempt, Code, Err).
	EventAttemptFailed
	// EventLost: the session ended (Err).
	EventLost
	// EventBackingOff: waiting before the next attempt (Attempt, Delay).
	EventBackingOff
	// EventGaveUp: the agent stopped retrying (Err).
	EventGaveUp
	// EventConfigApplied: a new configuration is in force.
	EventConfigApplied
	// EventConfigRejected: a configuration was refused (Err). The last
	// good one stays.
	EventConfigRejected
	// EventHandlerPanic: a subscription handler panicked (Err). The agent
	// carries on.
	EventHandlerPanic
	// EventPacketTooLarge: a packet over Incoming.MaxPacket closed the
	// connection (Err: *PacketTooLargeError).
	EventPacketTooLarge
	// EventRedirected: an MQTT 5 broker named another server. The next
	// attempt goes there (Endpoint).
	EventRedirected
	// EventRedirectRefused: an MQTT 5 broker named a server the Config
	// does not allow, or one too many (Err).
	EventRedirectRefused
)

var eventNames = map[EventKind]string{
	EventConnecting: "connecting", EventConnected: "connected", EventAttemptFailed: "attempt-failed",
	EventLost: "lost", EventBackingOff: "backing-off", EventGaveUp: "gave-up",
	EventConfigApplied: "config-applied", EventConfigRejected: "config-rejected", EventHandlerPanic: "handler-panic",
	EventPacketTooLarge: "packet-too-large", EventRedirected: "redirected", EventRedirectRefused: "redirect-refused",
}

func (k EventKind) String() string { return eventNames[k] }

// Event is one state change of an Agent. The zero Event (Kind 0) is never
// sent. An Event is a plain value, passed by copy: safe to share.
type Event struct {
	Kind    EventKind
	Time    time.Time
	Attempt int
	Delay   time.Duration
	Code    int // CONNACK code for EventAttemptFailed (NoConnack if none)
	// SessionPresent: for EventConnected, the broker resumed a persistent
	// session (Config.Session.Persistent).
	SessionPresent bool
	// Endpoint is the broker URL of the attempt (EventConnecting,
	// EventConnected, EventAttemptFailed).
	Endpoint string
	Err      error
}

// Metrics receives an agent's counts as they happen, so that firmware can
// export them (a Prometheus endpoint, statsd, a status page) without this
// package depending on any of those. The agent calls it from its loop: each
// method must be quick and must not block. One value may serve a whole
// fleet's agents if it is safe for concurrent use. A nil Metrics
// (Config.Metrics unset) counts nothing.
type Metrics interface {
	// Attempt is one connect attempt's outcome.
	Attempt(o AttemptOutcome)
	// SessionUp is a session established; SessionDown its end, lost (the
	// connection failed or the broker ended it) or not (the agent stopped).
	SessionUp()
	SessionDown(lost bool)
}

// PacketTooLargeCounter is a Metrics that also counts connections closed
// because an incoming packet declared more than Config.Incoming.MaxPacket.
// It is optional, so that Metrics written before it still compile. The agent
// finds it by a type assertion on Config.Metrics and calls it from the same
// loop, so the same rule holds: safe for concurrent use if shared by agents.
type PacketTooLargeCounter interface {
	PacketTooLarge()
}

// AttemptOutcome is what became of a connect attempt. The zero
// AttemptOutcome is AttemptAccepted. It is a plain value, safe to share.
type AttemptOutcome uint8

const (
	AttemptAccepted      AttemptOutcome = iota // CONNACK 0: a session
	AttemptRefused                             // a CONNACK with a non-zero code
	AttemptFailed                              // no CONNACK: refused dial, timeout, reset
	AttemptProtocolError                       // a CONNACK that is not MQTT 3.1.1's (ProtocolError)
)

func (o AttemptOutcome) String() string {
	switch o {
	case AttemptAccepted:
		return "accepted"
	case AttemptRefused:
		return "refused"
	case AttemptFailed:
		return "failed"
	case AttemptProtocolError:
		return "protocol-error"
	}
	return fmt.Sprintf("AttemptOutcome(%d)", uint8(o))
}

// Stats are an agent's counters. The zero Stats counts nothing. A Stats is
// a copy taken by Agent.Stats: a plain value, safe to share.
type Stats struct {
	Connects int64         // sessions established
	Losses   int64         // sessions lost
	Attempts int64         // connect attempts made
	Waiting  time.Duration // time spent waiting before attempts
	// BackPressure is the time the agent read nothing from the broker
	// because its handlers were behind (Config.Incoming.Queue).
	BackPressure time.Duration
	// Unsolicited counts messages on topics the agent never subscribed
	// to: each was acknowledged and dropped.
	Unsolicited int64
}

// BackPressureCounter is a Metrics that also counts the time the agent
// stopped reading from the broker because its handlers were behind (the
// incoming queue full). It is optional, as PacketTooLargeCounter is, and
// called from paho's reading goroutine once a hold ends: the same rule
// holds, safe for concurrent use if shared by agents.
type BackPressureCounter interface {
	BackPressure(held time.Duration)
}
