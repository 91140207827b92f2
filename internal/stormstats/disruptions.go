package stormstats

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A log that holds several disruptions, judged as one series, reads as
// waves: each recovery is a burst against the quiet between them. What
// tells a new disruption from a round of retries is in the log itself
// where it has client IDs or the broker's own lines:
//
//   - the broker's stop and start lines ("mosquitto version 2.0.11
//     terminating", "... starting"): a restart, or a cluster node's when
//     the nodes' logs are merged;
//   - the same devices again: a device that had come back, and held its
//     session a minute or more, arriving again. Rounds of retries are
//     devices whose attempt failed or never reached the broker, so a
//     device admitted in one round is not in the next; after a second
//     outage, those the first one's recovery admitted come back.
//
// A log of times alone carries neither; -disruptions names them.

// heldSession is how long a session must have lasted for its device's next
// arrival to be a return from a new disruption rather than a retry: longer
// than the formula's cap (32 s) plus its jitter, and than a flapping link's
// up time. Where the log shows when the session ended (mosquitto's
// "Client ID closed its connection."), that is its length; otherwise the
// time to the next arrival, which a retry schedule capped above a minute
// can also reach.
const heldSession = time.Minute

// Disruption is a moment the log itself shows its fleet losing the broker.
type Disruption struct {
	At   time.Duration `json:"-"`
	AtS  float64       `json:"at_s"` // in the log's time
	Line int           `json:"line"` // the start line, or the first return's
	Why  string        `json:"why"`
}

// brokerLine is a broker's start or stop line, and sessionEnd a line
// saying a client's session ended, as a log recorded them.
type brokerLine struct {
	at    time.Duration
	line  int32
	stops bool
	text  string
}

type sessionEnd struct {
	at     time.Duration
	line   int32
	client string
}

// before orders a line at `at` on line `line` against an arrival: by time,
// then (on a whole-second log) by the order the log wrote them in.
func before(at time.Duration, line int32, t time.Duration, arrival int32) bool {
	return at < t || at == t && line < arrival
}

// Disruptions finds the disruptions the log shows after its first arrival
// (see the comment above): a broker stopping ("mosquitto version 2.0.11
// terminating"), or starting when no stop was logged and a minute or more
// has passed since the last disruption (a crash, and not the start that
// ends a stop); and a minute in which at least 5 % of the log's devices
// (and at least 10) return after holding a session since the last
// disruption. Lines between two arrivals make at most one disruption, at
// the first. Nil for a log that shows none, which is then one recovery.
func (l *Log) Disruptions() []Disruption {
	if len(l.Times) == 0 {
		return nil
	}
	order := make([]int, len(l.Times))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpDuration(l.Times[a], l.Times[b]) })
	first := l.Times[order[0]]

	brokers := slices.Clone(l.brokers)
	slices.SortStableFunc(brokers, func(a, b brokerLine) int { return cmpDuration(a.at, b.at) })
	ends := slices.Clone(l.ends)
	slices.SortStableFunc(ends, func(a, b sessionEnd) int { return cmpDuration(a.at, b.at) })

	need := 0
	if l.Clients != nil {
		distinct := map[string]struct{}{}
		for _, c := range l.Clients {
			if c != "" {
				distinct[c] = struct{}{}
			}
		}
		need = max(10, (len(distinct)+19)/20)
	}

	var found []Disruption
	since := first                      // the last disruption, or the log's first arrival
	stopped := 0                        // brokers stopped and not yet started again
	last := map[string]int{}            // each client's latest arrival
	ended := map[string]time.Duration{} // when that arrival's session ended, where the log says
	var returns []int                   // arrivals since `since` that are returns, in time order
	b, e := 0, 0
	for _, i := range order {
		t := l.Times[i]
		var next *Disruption // the broker lines' disruption before this arrival
		for ; b < len(brokers) && before(brokers[b].at, brokers[b].line, t, l.Lines[i]); b++ {
			line := brokers[b]
			disrupts := line.stops || stopped == 0 && line.at-since >= heldSession
			switch {
			case line.stops:
				stopped++
			case stopped > 0:
				stopped--
			}
			if disrupts && line.at > since && next == nil { // after the log's first arrival, and the last disruption
				next = &Disruption{At: line.at, AtS: line.at.Seconds(), Line: int(line.line), Why: "the broker logged: " + line.text}
			}
		}
		if next != nil {
			found = append(found, *next)
			since, returns = next.At, returns[:0]
		}
		for ; e < len(ends) && before(ends[e].at, ends[e].line, t, l.Lines[i]); e++ {
			if _, open := last[ends[e].client]; open {
				if _, seen := ended[ends[e].client]; !seen {
					ended[ends[e].client] = ends[e].at
				}
			}
		}
		if need == 0 {
			continue
		}
		c := l.Clients[i]
		if c == "" {
			continue
		}
		if p, ok := last[c]; ok && l.Times[p] >= since && l.accepted(p) {
			end, known := ended[c]
			if !known {
				end = t
			}
			if end-l.Times[p] >= heldSession {
				returns = append(returns, i)
			}
		}
		last[c] = i
		delete(ended, c)
		for len(returns) > 0 && t-l.Times[returns[0]] > heldSession {
			returns = returns[1:]
		}
		if len(returns) >= need {
			at := returns[0]
			found = append(found, Disruption{At: l.Times[at], AtS: l.Times[at].Seconds(), Line: int(l.Lines[at]),
				Why: fmt.Sprintf("%d devices that had come back and held their sessions a minute or more arrived again within a minute", len(returns))})
			since, returns = l.Times[at], returns[:0]
		}
	}
	return found
}

// accepted reports whether arrival i was admitted: true unless the log
// says otherwise (devicesim's outcome column).
func (l *Log) accepted(i int) bool { return l.Refused == nil || !l.Refused[i] }

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mosquittoSessionEnd reads the client ID from a line of mosquitto's saying
// a session ended ("Client ID closed its connection.", "Client ID
// disconnected.", "Client ID has exceeded timeout, disconnecting.",
// "Socket error on client ID, disconnecting.", "Client ID already
// connected, closing old connection."); ok false for any other line.
func mosquittoSessionEnd(msg string) (client string, ok bool) {
	if rest, ok := strings.CutPrefix(msg, "Socket error on client "); ok {
		return strings.CutSuffix(rest, ", disconnecting.")
	}
	rest, ok := strings.CutPrefix(msg, "Client ")
	if !ok {
		return "", false
	}
	for _, marker := range []string{" closed its connection.", " has exceeded timeout, disconnecting.",
		" already connected, closing old connection.", " been disconnected by administrative action.", " disconnected"} {
		if i := strings.LastIndex(rest, marker); i > 0 {
			return rest[:i], true
		}
	}
	return "", false
}

// RecoveriesFound judges each recovery on its own at the disruptions the
// log shows (Disruptions), the first from the log's start; nil, nil when
// it shows none.
func (l *Log) RecoveriesFound() ([]Disruption, []Recovery, error) {
	found := l.Disruptions()
	if found == nil {
		return nil, nil, nil
	}
	at := []time.Duration{slices.Min(l.Times)}
	for _, d := range found {
		at = append(at, d.At)
	}
	recs, _, err := l.Recoveries(at)
	return found, recs, err
}
