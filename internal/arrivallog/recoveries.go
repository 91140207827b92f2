package arrivallog

import (
	"slices"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// Recoveries splits the log at each disruption and judges every part on
// its own, with m as Histogram would give it. Arrivals before the first
// disruption belong to no recovery: their number is returned.
func (l *Log) Recoveries(at []time.Duration) (recs []stormstats.Recovery, before int, err error) {
	parts := make([][]time.Duration, len(at))
	lines := make([][]int32, len(at))
	for i, t := range l.Times {
		k, found := slices.BinarySearch(at, t)
		if !found {
			k-- // the last disruption at or before t
		}
		if k < 0 {
			before++
			continue
		}
		parts[k] = append(parts[k], t)
		lines[k] = append(lines[k], l.Lines[i])
	}
	method := l.method()
	for k := range at {
		h, m, p := stormstats.Prepare(l.closeGaps(parts[k]), lines[k], method)
		j, err := stormstats.Judge(h, m)
		if err != nil {
			return nil, 0, err
		}
		recs = append(recs, stormstats.Recovery{AtS: at[k].Seconds(), Preparation: p, Judgement: p.Qualify(j), Arrivals: stormstats.Summarize(h)})
	}
	return recs, before, nil
}

// Rebase makes every time of the log an offset from origin (its own
// scale's), so that a judgement of it speaks of seconds since then: a log
// stamped with the wall clock is judged from its first arrival, not from
// 1970.
func (l *Log) Rebase(origin time.Duration) {
	for i := range l.Times {
		l.Times[i] -= origin
	}
	for i := range l.Gaps {
		l.Gaps[i].From -= origin
		l.Gaps[i].To -= origin
	}
	for i := range l.BrokerLines {
		l.BrokerLines[i].At -= origin
	}
	for i := range l.SessionEnds {
		l.SessionEnds[i].At -= origin
	}
}
