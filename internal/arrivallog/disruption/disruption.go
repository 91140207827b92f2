// Package disruption finds where a log shows its fleet losing the broker,
// and judges each recovery on its own. A log that holds several
// disruptions, judged as one series, reads as waves: each recovery is a
// burst against the quiet between them. Where the log has client IDs or
// the broker's own lines, it tells a new disruption from a round of
// retries itself. These are its signs:
//
//   - the broker's stop and start lines ("mosquitto version 2.0.11
//     terminating", "... starting"). They mark a restart, or a cluster
//     node's restart when the nodes' logs are merged.
//   - the same devices again: a device that had come back, and held its
//     session a minute or more, arriving again. Rounds of retries are
//     devices whose attempt failed or never reached the broker. A device
//     admitted in one round is thus not in the next. After a second
//     outage, those the first one's recovery admitted come back.
//   - different devices: this needs a log that shows failed attempts too
//     (devicesim's outcome column). There every device that retries is in
//     the log from its first failure on. A crowd of devices never seen
//     before, arriving after a minute in which no newcomer did, lost their
//     connection at a new moment. That moment may be a second node's
//     restart, or a drop of another part of the fleet. A log of admitted
//     sessions alone cannot say this. Each round behind an admission limit
//     admits devices it has not shown before.
//   - sessions ended at once: a crowd of devices whose sessions end
//     together though they began at different times. Together means
//     within seconds, as a broker's drop or its keepalive after a
//     partition ends them. Rounds of a flapping link end sessions as they
//     began them. Their ends are no narrower than their starts, and are
//     not a disruption.
//
// A log of times alone carries none of these; -disruptions names them.
package disruption

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// heldSession is how long a session must have lasted for its device's next
// arrival to be a return from a new disruption rather than a retry. It is
// longer than the formula's cap (32 s) plus its jitter. It is also longer
// than a flapping link's up time. Where the log shows when the session
// ended (mosquitto's "Client ID closed its connection."), that is its
// length. Otherwise its length is the time to the next arrival, which a
// retry schedule capped above a minute can also reach.
const heldSession = time.Minute

// ownEnds is how long after a disruption the ends of sessions begun
// before it are its own, not a new disruption's. Such ends come from a
// broker's drop logged client by client, or from a keepalive noticing a
// partition at 1.5 times its period.
const ownEnds = 2 * time.Minute

// Disruption is a moment the log itself shows its fleet losing the broker.
type Disruption struct {
	At   time.Duration `json:"-"`
	AtS  float64       `json:"at_s"` // in the log's time
	Line int           `json:"line"` // the start line, or the first return's
	Why  string        `json:"why"`
}

// before orders a line at `at` on line `line` against an arrival: by time,
// then (on a whole-second log) by the order the log wrote them in.
func before(at time.Duration, line int32, t time.Duration, arrival int32) bool {
	return at < t || at == t && line < arrival
}

// Find finds the disruptions the log shows after its first arrival
// (see the package doc). A broker stopping ("mosquitto version 2.0.11
// terminating") is one. A broker starting is one when no stop was logged
// and a minute or more has passed since the last disruption. That start
// is a crash, and not the start that ends a stop. A minute is one when at
// least 5 % of the log's devices (and at least 10) return in it after
// holding a session since the last disruption. In a log of failed
// attempts too, a minute is also one when as many arrive in it for the
// first time after a minute without a newcomer. Lines between two
// arrivals make at most one disruption, at the first. It returns nil for
// a log that shows none, which is then one recovery.
func Find(l *arrivallog.Log) []Disruption {
	if len(l.Times) == 0 {
		return nil
	}
	order := make([]int, len(l.Times))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(l.Times[a], l.Times[b]) })
	f := newFinder(l, l.Times[order[0]])
	for _, i := range order {
		f.brokerLines(i)
		f.sessionEnds(i)
		f.arrival(i)
	}
	f.countCrowd(math.MaxInt64)
	f.crowdEnds = nil
	return f.found
}

// countCrowd counts in the last drop found by its ends an end at t, and
// once past its window writes its reason with the count.
func (f *finder) countCrowd(t time.Duration) {
	c := f.crowdEnds
	if c == nil {
		return
	}
	if t > c.until {
		f.found[c.found].Why = c.why()
		f.crowdEnds = nil
	}
}

// finder reads a log's lines in time order for its disruptions.
type finder struct {
	l       *arrivallog.Log
	brokers []arrivallog.BrokerLine // in time order
	ends    []arrivallog.SessionEnd // in time order
	b, e    int                     // the next of each to read
	// need is how many returns or newcomers within a minute make a
	// disruption: 5 % of the log's devices, at least 10 (0: the log has
	// no client IDs)
	need      int
	newcomers bool // the log shows failed attempts: a newcomer is one

	found   []Disruption
	since   time.Duration            // the last disruption, or the log's first arrival
	stopped int                      // brokers stopped and not yet started again
	last    map[string]int           // each client's latest arrival
	ended   map[string]time.Duration // when that arrival's session ended, where the log says
	returns []comeback               // returns and newcomers arrived since `since`, in time order
	// the latest newcomer, and when the current crowd of them began (-1:
	// none, or it belongs to the last disruption found). Newcomers count
	// only in a crowd that follows a minute without one, so that the first
	// arrivals, and a trickle, are not a new disruption
	lastNew, crowd time.Duration

	// Sessions ending: the recent ends of distinct clients (within a
	// minute)
	ending    []ending
	endedOnce map[string]bool // clients whose session, begun before the log, has ended
	unchecked int             // ends since the crowd was last looked at
	tick      time.Duration   // the log's stamps' tick
	crowdEnds *crowdEnds      // the drop last found by its ends, still counting them
}

// ending is a session's end, with when it began where the log says.
type ending struct {
	at, start time.Duration
	known     bool // start is known: the log shows the session's arrival
	line      int32
	client    string
}

func newFinder(l *arrivallog.Log, first time.Duration) *finder {
	f := &finder{l: l, brokers: slices.Clone(l.BrokerLines), ends: slices.Clone(l.SessionEnds), newcomers: l.Refused != nil,
		since: first, last: map[string]int{}, ended: map[string]time.Duration{}, lastNew: first, crowd: -1,
		endedOnce: map[string]bool{}, tick: stormstats.DetectTick(l.Times)}
	slices.SortStableFunc(f.brokers, func(a, b arrivallog.BrokerLine) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(f.ends, func(a, b arrivallog.SessionEnd) int { return cmp.Compare(a.At, b.At) })
	if l.Clients != nil {
		distinct := map[string]struct{}{}
		for _, c := range l.Clients {
			if c != "" {
				distinct[c] = struct{}{}
			}
		}
		f.need = max(10, (len(distinct)+19)/20)
	}
	return f
}

// disrupted notes a disruption found: what follows is its recovery, and
// the sessions still ending around it are its own.
func (f *finder) disrupted(d Disruption) {
	if c := f.crowdEnds; c != nil { // a new disruption ends the last one's count
		f.found[c.found].Why = c.why()
		f.crowdEnds = nil
	}
	f.found = append(f.found, d)
	// newcomers still arriving are this disruption's
	f.since, f.returns, f.crowd = d.At, f.returns[:0], -1
	f.ending = f.ending[:0]
}

// brokerLines reads the broker's start and stop lines before arrival i:
// together they make at most one disruption, at the first that makes one.
func (f *finder) brokerLines(i int) {
	var next *Disruption
	for ; f.b < len(f.brokers) && before(f.brokers[f.b].At, f.brokers[f.b].Line, f.l.Times[i], f.l.Lines[i]); f.b++ {
		line := f.brokers[f.b]
		disrupts := line.Stops || f.stopped == 0 && line.At-f.since >= heldSession
		switch {
		case line.Stops:
			f.stopped++
		case f.stopped > 0:
			f.stopped--
		}
		// after the log's first arrival, and the last disruption
		if disrupts && line.At > f.since && next == nil {
			next = &Disruption{At: line.At, AtS: line.At.Seconds(), Line: int(line.Line), Why: "the broker logged: " + line.Text}
		}
	}
	if next != nil {
		f.disrupted(*next)
	}
}

// sessionEnds reads the lines before arrival i saying a session ended.
func (f *finder) sessionEnds(i int) {
	for ; f.e < len(f.ends) && before(f.ends[f.e].At, f.ends[f.e].Line, f.l.Times[i], f.l.Lines[i]); f.e++ {
		end := f.ends[f.e]
		c := end.Client
		f.countCrowd(end.At)
		if cr := f.crowdEnds; cr != nil {
			cr.add(ending{at: end.At, client: c})
		}
		p, open := f.last[c]
		_, closed := f.ended[c]
		if open && !closed {
			f.ended[c] = end.At
		}
		// A session begun before the last disruption, ending soon after it, is its own.
		own := len(f.found) > 0 && end.At-f.since < ownEnds
		switch {
		case open && !closed:
			if own && f.l.Times[p] < f.since {
				continue
			}
			f.ending = append(f.ending, ending{at: end.At, start: f.l.Times[p], known: true, line: end.Line, client: c})
		case !open && !f.endedOnce[c]: // a session begun before the log
			f.endedOnce[c] = true
			if own {
				continue
			}
			f.ending = append(f.ending, ending{at: end.At, line: end.Line, client: c})
		default:
			continue // a session whose end was logged already
		}
		f.endCrowd(end.At)
	}
}

// endCrowd looks for a crowd of ends after a session ended at t. A crowd
// is need distinct devices' sessions ended within a minute. The latest
// need of them must have ended together, though they had lasted different
// times. That is, the spread of the middle half of their lengths is at
// least 4 times the span of their ends, plus two ticks. The spread is also
// at least a tenth of their median length. A drop ends sessions however
// long they had lasted. A flapping link ends each about as long after it
// began as the next. The difference is the broker's time to accept and
// log them: 4 % of the flap here, on RabbitMQ at 6x.
func (f *finder) endCrowd(t time.Duration) {
	k := 0
	for k < len(f.ending) && t-f.ending[k].at > heldSession {
		k++
	}
	f.ending = f.ending[k:]
	if f.need == 0 || len(f.ending) < f.need {
		return
	}
	// Looked at every need/8 ends: a crowd still shows, and a million
	// devices' ends cost O(n log need), not O(n need).
	if f.unchecked++; f.unchecked < max(1, f.need/8) {
		return
	}
	f.unchecked = 0
	crowd := f.ending[len(f.ending)-f.need:]
	span := crowd[len(crowd)-1].at - crowd[0].at
	lengths := make([]time.Duration, len(crowd))
	for j, e := range crowd {
		lengths[j] = e.at - e.start
		if !e.known {
			lengths[j] = math.MaxInt64 // begun before the log showed it
		}
	}
	slices.Sort(lengths)
	q1, median, q3 := lengths[len(lengths)/4], lengths[len(lengths)/2], lengths[3*len(lengths)/4]
	spread := time.Duration(math.MaxInt64)
	if q3 != math.MaxInt64 {
		spread = q3 - q1
	}
	// Sessions that had each held a minute, ended within a tick or two:
	// a drop, whatever their lengths. A fleet that came up together and
	// was dropped together has sessions of one length, which a flapping
	// link (a session ended as long after it began as the next) also has.
	held := q1 >= heldSession && span <= 2*f.tick+time.Second
	varied := spread >= 4*span+2*f.tick && (median == math.MaxInt64 || spread >= median/10)
	if !held && !varied || crowd[0].at <= f.since {
		return
	}
	d := crowd[0]
	// Its ends still to come count too: the crowd is the first need of
	// them (and those just before), the drop ended them all.
	ce := &crowdEnds{until: d.at + max(2*span, 2*f.tick) + time.Second, clients: map[string]bool{}, first: d.at, q1: q1, q3: q3}
	for _, e := range f.ending {
		if e.at >= d.at-max(2*span, 2*f.tick)-time.Second {
			ce.first = min(ce.first, e.at)
			ce.add(e)
		}
	}
	f.disrupted(Disruption{At: d.at, AtS: d.at.Seconds(), Line: int(d.line)})
	ce.found, f.crowdEnds = len(f.found)-1, ce
}

// crowdEnds counts the sessions a drop found by its ends ended: every
// distinct client's end from the first until a moment past the crowd.
type crowdEnds struct {
	found       int // its index in finder.found
	until       time.Duration
	clients     map[string]bool
	first, last time.Duration
	q1, q3      time.Duration // the middle half of the crowd's lengths
}

func (c *crowdEnds) add(e ending) {
	c.clients[e.client] = true
	c.last = max(c.last, e.at)
}

// why says how many sessions the drop ended, over what span.
func (c *crowdEnds) why() string {
	return fmt.Sprintf("the sessions of %d devices ended within %s, though they had lasted %s", len(c.clients),
		humanSpan(c.last-c.first), humanLengths(c.q1, c.q3))
}

func humanSpan(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// humanLengths says how long the middle half of the sessions had lasted.
func humanLengths(q1, q3 time.Duration) string {
	if q3 == math.MaxInt64 {
		if q1 == math.MaxInt64 {
			return "since before the log began"
		}
		return fmt.Sprintf("from %s to since before the log began", humanSpan(q1))
	}
	return fmt.Sprintf("from %s to %s (the middle half of them)", humanSpan(q1), humanSpan(q3))
}

// arrival reads arrival i: a device back after a held session, or a
// newcomer in a crowd, counts towards a disruption at the first of them.
func (f *finder) arrival(i int) {
	l, t := f.l, f.l.Times[i]
	c := ""
	if f.need > 0 {
		c = l.Clients[i]
	}
	if c == "" {
		return
	}
	p, seen := f.last[c]
	switch {
	case seen && l.Times[p] >= f.since && l.Admitted(p):
		end, known := f.ended[c]
		if !known {
			end = t
		}
		if end-l.Times[p] >= heldSession {
			f.returns = append(f.returns, comeback{i, true})
		}
	case !seen && f.newcomers:
		if t-f.lastNew >= heldSession {
			f.crowd = t
		}
		f.lastNew = t
		if f.crowd >= f.since && t-f.crowd < heldSession {
			f.returns = append(f.returns, comeback{i, false})
		}
	}
	f.last[c] = i
	delete(f.ended, c)
	for len(f.returns) > 0 && t-l.Times[f.returns[0].arrival] > heldSession {
		f.returns = f.returns[1:]
	}
	if len(f.returns) >= f.need {
		at := f.returns[0].arrival
		f.disrupted(Disruption{At: l.Times[at], AtS: l.Times[at].Seconds(), Line: int(l.Lines[at]), Why: whyBack(f.returns)})
	}
}

// comeback is an arrival that may mark a new disruption: a device back
// after holding its session (again), or one the log had not shown before.
type comeback struct {
	arrival int
	again   bool
}

// whyBack says who the arrivals that made a disruption were.
func whyBack(arrivals []comeback) string {
	again := 0
	for _, a := range arrivals {
		if a.again {
			again++
		}
	}
	newcomers := len(arrivals) - again
	switch {
	case newcomers == 0:
		return fmt.Sprintf("%d devices that had come back and held their sessions a minute or more arrived again within a minute", again)
	case again == 0:
		return fmt.Sprintf("%d devices the log had not shown before, failed attempts included, arrived within a minute, after a minute without a newcomer", newcomers)
	}
	return fmt.Sprintf("within a minute, %d devices that had held their sessions a minute or more arrived again and %d the log had not shown before", again, newcomers)
}

// ParseTimes reads a comma-separated list of disruption times, each
// in seconds (Unix seconds for a log stamped with real times) or RFC 3339.
func ParseTimes(list string) ([]time.Duration, error) {
	var at []time.Duration
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		t, err := logtime.ParseDated(f)
		if err != nil {
			if t, err = logtime.ParseSeconds(f); err != nil {
				return nil, fmt.Errorf("disruption %q: expected a time in seconds (such as 1700000000) or RFC 3339", f)
			}
		}
		at = append(at, t)
	}
	if len(at) == 0 {
		return nil, fmt.Errorf("no disruption times in %q", list)
	}
	slices.Sort(at)
	return slices.Compact(at), nil
}

// Recoveries judges each recovery on its own at the disruptions the
// log shows (Find), the first from the log's start; nil, nil when
// it shows none.
func Recoveries(l *arrivallog.Log) ([]Disruption, []stormstats.Recovery, error) {
	found := Find(l)
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
