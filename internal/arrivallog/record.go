package arrivallog

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/fileline"
)

// noTime marks an event without a second stamp.
const noTime = time.Duration(math.MinInt64)

// recorder keeps what each line said in the Log. That is the arrivals,
// the ends of sessions and the broker's own starts and stops (for
// Disruptions). It also keeps the counts of every kind, and the exact
// copies it dropped.
type recorder struct {
	l      *Log
	events int // lines that keep something, up to max (count)
	max    int
	dedupe bool
	seen   map[uint64]struct{}
	seed   maphash.Seed
	// conns maps a connection a line named (RabbitMQ's process) to the
	// client its accepting line named, until its session ends
	conns   map[string]string
	brokers map[string]int // events of each broker's, for the format's name
	lines   map[string]int // lines of each broker's, events or not
	forced  string         // -format that names a broker: the others' lines are skipped
	twoStamps
}

// twoStamps is what the recorder keeps where a line carries two stamps
// (an envelope's and the broker's own): the second. The envelope's is
// taken for every line where it is finer and agrees with the broker's
// (finish).
type twoStamps struct {
	alt, endAlt, brokerAlt []time.Duration
	both, agree, same      int
	lastAlt                time.Duration
	envDigits, ownDigits   int
	open                   *Gap // a span of dropped lines not yet closed
	envOnly                int  // lines timed by their envelope alone
	envTaken               bool // finish took the envelope's stamps
}

func newRecorder(l *Log, forced string, max int) *recorder {
	return &recorder{l: l, max: max, seen: map[uint64]struct{}{}, seed: maphash.MakeSeed(), conns: map[string]string{},
		brokers: map[string]int{}, lines: map[string]int{}, forced: forced, twoStamps: twoStamps{lastAlt: noTime}}
}

// MaxEvents bounds the lines a log keeps something of: its connects,
// disconnects, refusals, broker starts and stops and lost-lines notes.
// A line of any other kind is counted and no more. What judge holds grows
// with them alone, by the bytes docs/verdict.md measures.
const MaxEvents = 10_000_000

// errNoStamp is a line that says something without a time to say it at.
var errNoStamp = errors.New("no time stamp")

// ErrTooManyEvents is a *fileline.Error's Err, wrapped, for the line past
// MaxEvents.
var ErrTooManyEvents = errors.New("too many events")

// count counts a line that keeps something in the log, refusing the one
// past the cap.
func (rc *recorder) count(line int) error {
	if rc.events++; rc.events > rc.max {
		return &fileline.Error{Line: line, Err: fmt.Errorf("%w: more than %d connects, disconnects, refusals, broker starts "+
			"and stops, each held to judge them; judge the log a part at a time", ErrTooManyEvents, rc.max)}
	}
	return nil
}

// maxLabels bounds the labels a log keeps, its own names for kinds of
// line (each cut to an excerpt): the rest count as "other".
const maxLabels = 1000

// when is the time to record for a line, and the other stamp where it
// had two; the agreement of the two is counted for the events.
func (rc *recorder) when(s logtime.LineTimes, event bool) (at, alt time.Duration, timed bool, digits int) {
	switch {
	case s.OwnTimed && s.EnvTimed:
		if event {
			rc.both++
			tick := time.Duration(math.Pow10(9 - min(s.OwnDigits, 9)))
			if d := s.Env - s.Own; d >= -500*time.Millisecond && d < tick+2*time.Second {
				rc.agree++
			}
			if s.Env == rc.lastAlt {
				rc.same++
			}
			rc.lastAlt = s.Env
			rc.envDigits, rc.ownDigits = max(rc.envDigits, s.EnvDigits), max(rc.ownDigits, s.OwnDigits)
		}
		return s.Own, s.Env, true, max(s.OwnDigits, s.EnvDigits)
	case s.OwnTimed:
		return s.Own, noTime, true, s.OwnDigits
	case s.EnvTimed:
		if event {
			rc.envOnly++
		}
		return s.Env, noTime, true, s.EnvDigits
	}
	return 0, noTime, false, 0
}

// record keeps what a line said. A connect without a time is an error;
// other lines without one are counted and no more. An exact copy of a
// line read before is dropped where it cannot be another event. That is a
// connect (its line names the client's port, or its session). It is also
// any line stamped to the millisecond or finer. Lines on a whole-second
// stamp that name no session ("Client <unknown> disconnected, not
// authorised.") repeat as events do.
func (rc *recorder) record(e brokerline.Line, t logtime.LineTimes, line int, raw []byte) error {
	l := rc.l
	at, alt, timed, digits := rc.when(t, e.Kind != brokerline.KindOther)
	if rc.forced != "" && e.Broker != "" && e.Broker != rc.forced && e.Kind != brokerline.KindLost {
		l.Skipped++
		return nil
	}
	if rc.dedupe && e.Kind != brokerline.KindOther && (e.Kind == brokerline.KindConnect || digits >= 3) {
		h := maphash.Bytes(rc.seed, raw)
		if _, dup := rc.seen[h]; dup {
			l.Duplicates++
			l.Skipped++
			return nil
		}
		rc.seen[h] = struct{}{}
	}
	if e.Kind != brokerline.KindOther {
		if err := rc.count(line); err != nil {
			return err
		}
	}
	if e.Broker != "" {
		rc.lines[e.Broker]++
		if e.Kind != brokerline.KindOther {
			rc.brokers[e.Broker]++
		}
	}
	if l.Kinds == nil {
		l.Kinds, l.Labels = map[Kind]int{}, map[string]int{}
	}
	l.Kinds[e.Kind]++
	if e.Kind != brokerline.KindConnect {
		l.Skipped++
	}
	switch e.Kind {
	case brokerline.KindConnect:
		if !timed {
			return &fileline.Error{Line: line, Err: fmt.Errorf("%w: a connect (%s) without a time to place it at", errNoStamp, fileline.Excerpt(raw))}
		}
		l.add(at, line, strings.Clone(e.Client), true) // not the line it came from
		rc.alt = append(rc.alt, alt)
		if e.Conn != "" {
			rc.conns[e.Conn] = e.Client
		}
	case brokerline.KindDisconnect:
		client := e.Client
		if e.Conn != "" {
			if c, ok := rc.conns[e.Conn]; ok {
				if client == "" {
					client = c
				}
				delete(rc.conns, e.Conn)
			}
		}
		if timed && client != "" {
			l.SessionEnds = append(l.SessionEnds, SessionEnd{At: at, Line: int32(line), Client: strings.Clone(client)})
			rc.endAlt = append(rc.endAlt, alt)
		}
	case brokerline.KindStart, brokerline.KindStop:
		if timed {
			l.BrokerLines = append(l.BrokerLines, BrokerLine{At: at, Line: int32(line), Stops: e.Kind == brokerline.KindStop, Text: kept(e.Label)})
			rc.brokerAlt = append(rc.brokerAlt, alt)
		}
	case brokerline.KindLost:
		if e.Gap >= 0 {
			l.Lost = append(l.Lost, Note{Line: line, Text: kept(e.Label)})
		}
		if timed {
			rc.gap(e.Gap, at, line)
		}
	case brokerline.KindOther:
		label := fileline.Excerpt(e.Label)
		switch _, seen := l.Labels[label]; {
		case label == "" || !seen && len(l.Labels) >= maxLabels:
			label = "other"
		case !seen:
			label = strings.Clone(label) // the key outlives the line
		}
		l.Labels[label]++
	}
	return nil
}

// kept is an excerpt of a line's text that the Log keeps: a short one is
// a slice of the line, which it must not keep alive.
func kept(text string) string { return strings.Clone(fileline.Excerpt(text)) }

// gap opens (+1) or closes (-1) a span in which the logger dropped lines.
func (rc *recorder) gap(g int8, at time.Duration, line int) {
	l := rc.l
	switch {
	case g > 0 && rc.open == nil:
		l.Gaps = append(l.Gaps, Gap{From: at, To: at, Line: line})
		rc.open = &l.Gaps[len(l.Gaps)-1]
	case g < 0 && rc.open != nil:
		rc.open.To = max(at, rc.open.From)
		rc.open = nil
	}
}

// finish takes the envelope's stamps for every line that had two, where
// they are finer than the broker's own and agree with them. Agreeing means
// within the broker's tick (and 2 s), at 99 % of the lines. No more than
// 5 % of the lines may have the same stamp as the line before. A writer's
// buffer flushed at once gives its lines one time. It returns whether it
// did.
func (rc *recorder) finish() bool {
	if rc.envTaken {
		return true
	}
	if rc.both == 0 || rc.envDigits <= rc.ownDigits || float64(rc.agree) < 0.99*float64(rc.both) ||
		float64(rc.same) > 0.05*float64(rc.both) {
		return false
	}
	l := rc.l
	for i, a := range rc.alt {
		if a != noTime {
			l.Times[i] = a
		}
	}
	for i, a := range rc.endAlt {
		if a != noTime {
			l.SessionEnds[i].At = a
		}
	}
	for i, a := range rc.brokerAlt {
		if a != noTime {
			l.BrokerLines[i].At = a
		}
	}
	rc.envTaken = true
	return true
}

// mainBroker is the broker most of the log's events were written by, or
// failing events, its lines; the broker -format named, if any.
func (rc *recorder) mainBroker() string {
	if rc.forced != "" {
		return rc.forced
	}
	for _, m := range []map[string]int{rc.brokers, rc.lines} {
		best, n := "", 0
		for b, c := range m {
			if c > n || c == n && b < best {
				best, n = b, c
			}
		}
		if best != "" {
			return best
		}
	}
	return ""
}
