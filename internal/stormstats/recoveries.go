package stormstats

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ParseDisruptions reads a comma-separated list of disruption times, each
// in seconds (Unix seconds for a log stamped with real times) or RFC 3339.
func ParseDisruptions(list string) ([]time.Duration, error) {
	var at []time.Duration
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		t, err := parseISOTime(f)
		if err != nil {
			if t, err = parseSeconds(f); err != nil {
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

// Recovery is what came after one disruption, up to the next: judged on
// its own, so that two recoveries do not read as two rounds of one storm.
type Recovery struct {
	AtS float64 `json:"at_s"` // the disruption, in the log's time
	Preparation
	Judgement
	Arrivals Arrivals `json:"arrivals"`
}

// Recoveries splits the log at each disruption and judges every part on
// its own, with m as Histogram would give it. Arrivals before the first
// disruption belong to no recovery: their number is returned.
func (l *Log) Recoveries(at []time.Duration) (recs []Recovery, before int, err error) {
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
		h, m, p := Prepare(parts[k], lines[k], method)
		j, err := Judge(h, m)
		if err != nil {
			return nil, 0, err
		}
		recs = append(recs, Recovery{AtS: at[k].Seconds(), Preparation: p, Judgement: p.Qualify(j), Arrivals: Summarize(h)})
	}
	return recs, before, nil
}

// Overall is a log's verdict from its recoveries': waves if any came in
// waves, spread if the rest did, inconclusive if none could be called.
func Overall(recs []Recovery) Verdict {
	v := Inconclusive
	for _, r := range recs {
		switch r.Verdict {
		case Waves:
			return Waves
		case Spread:
			v = Spread
		}
	}
	return v
}
