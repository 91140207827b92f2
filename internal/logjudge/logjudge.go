// Package logjudge judges a broker's log as devicesim judge prints it:
// the log as one series, or each recovery from a disruption on its own
// (the ones named, or those the log itself shows), with the lines the log
// held, its devices, and who never came back. It writes text or one JSON
// object, and returns the verdict for the caller to hold to.
package logjudge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/disruption"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Judge judges l and writes what it found to out, as text or (asJSON) one
// JSON object: at, if set, names the disruptions (in the log's own time);
// else those the log shows are found. Instants are written in the zone
// the log wrote them in, or zone (nil: UTC) where it names none (Unix
// times). It returns the verdict: the log's, or its recoveries' together.
func Judge(l *arrivallog.Log, at []time.Duration, asJSON bool, zone *time.Location, out io.Writer) (stormstats.Verdict, error) {
	v, _, err := JudgeView(l, at, asJSON, zone, out)
	return v, err
}

// JudgeView is Judge, and the log as its picture draws it
// (WritePicture); name is the file judged.
func JudgeView(l *arrivallog.Log, at []time.Duration, asJSON bool, zone *time.Location, out io.Writer) (stormstats.Verdict, View, error) {
	if l.Zone != nil {
		zone = l.Zone
	}
	w := writer{l: l, asJSON: asJSON, out: out, clock: stormstats.Clock{Zone: zone}}
	verdict, err := w.judge(at)
	if err != nil {
		return "", View{}, err
	}
	w.view.Verdict, w.view.Format = verdict, l.Format
	if len(l.Times) > 0 {
		origin := slices.Min(l.Times)
		w.view.Times = make([]time.Duration, len(l.Times))
		for i, t := range l.Times {
			w.view.Times[i] = t - origin
		}
		if first := origin + w.rebased; stormstats.Epoch(first) {
			w.view.Start = time.Unix(0, 0).Add(first).In(cmp.Or(zone, time.UTC))
		}
		from := origin.Seconds() // the recoveries' times are the log's, as judged
		for i := range w.view.Recoveries {
			r := &w.view.Recoveries[i]
			r.AtS = max(r.AtS-from, 0)
			r.Judgement.Bursts = slices.Clone(r.Judgement.Bursts)
			for k := range r.Judgement.Bursts {
				r.Judgement.Bursts[k].AtS -= from
			}
		}
	}
	return verdict, w.view, nil
}

// judge judges the log, or each of its recoveries, and writes what it
// found.
func (w *writer) judge(at []time.Duration) (stormstats.Verdict, error) {
	l := w.l
	// A log stamped with the wall clock is judged in seconds since its
	// first arrival, each written with its instant: never as Unix seconds.
	// JSON keeps the log's own numbers, for the programs that read them.
	if len(l.Times) > 0 && stormstats.Epoch(slices.Min(l.Times)) && !w.asJSON {
		origin := slices.Min(l.Times)
		l.Rebase(origin)
		w.rebased = origin
		at = slices.Clone(at)
		for i := range at {
			at[i] -= origin
		}
		w.clock.Base = time.Unix(0, 0).Add(origin)
	}
	if at != nil {
		recs, before, err := l.Recoveries(at)
		if err != nil {
			return "", err
		}
		return w.recoveries(recs, before, at, nil)
	}
	// The log's own word for its disruptions: a broker's stop line, a
	// crowd of sessions ended at once, the same devices back again.
	found, recs, err := disruption.Recoveries(l)
	if err != nil {
		return "", err
	}
	if found != nil {
		at := []time.Duration{math.MinInt64}
		for _, d := range found {
			at = append(at, d.At)
		}
		return w.recoveries(recs, 0, at, found)
	}
	return w.judgement()
}

// writer writes what Judge found, as text or as one JSON object.
type writer struct {
	l      *arrivallog.Log
	asJSON bool
	out    io.Writer
	// clock writes the log's times: instants in the log's own zone where
	// the log's are, with offsets from each recovery's start.
	clock stormstats.Clock
	// rebased is what was taken off the log's times to judge them from
	// its first arrival; view is what the picture draws.
	rebased time.Duration
	view    View
}

// lineCounts is what judge says of a log's lines besides its arrivals.
type lineCounts struct {
	Format     string              `json:"format"`
	Skipped    int                 `json:"skipped_lines"`
	Lines      map[string]int      `json:"lines,omitempty"`
	Other      map[string]int      `json:"other_lines,omitempty"`
	Duplicates int                 `json:"duplicate_lines"`
	Lost       []arrivallog.Note   `json:"lost_lines,omitempty"`
	GapsS      float64             `json:"lost_spans_s,omitempty"`
	Devices    *arrivallog.Devices `json:"devices,omitempty"`
}

func (w *writer) counts() lineCounts {
	l := w.l
	c := lineCounts{Format: l.Format, Skipped: l.Skipped, Other: l.Labels, Duplicates: l.Duplicates, Lost: l.Lost}
	for _, g := range l.Gaps {
		c.GapsS += (g.To - g.From).Seconds()
	}
	if len(l.Kinds) > 0 {
		c.Lines = map[string]int{}
		for k, n := range l.Kinds {
			c.Lines[k.String()] = n
		}
	}
	if d, ok := l.Devices(math.MinInt64, math.MaxInt64); ok {
		c.Devices = &d
	}
	return c
}

// header writes the format taken, what the lines were, the devices, and
// where the log says it lost lines.
func (w *writer) header(extra string) {
	l, out := w.l, w.out
	fmt.Fprintf(out, "format: %s%s", l.Format, extra)
	if len(l.Kinds) > 0 {
		fmt.Fprintf(out, "\nlines: %s", l.KindSummary())
	} else if l.Skipped > 0 {
		fmt.Fprintf(out, "; %d lines skipped, not arrivals", l.Skipped)
	}
	if l.Duplicates > 0 {
		fmt.Fprintf(out, "; %s dropped as exact copies of lines before them", plural(l.Duplicates, "duplicate line"))
	}
	fmt.Fprintln(out)
	if d, ok := l.Devices(math.MinInt64, math.MaxInt64); ok && d.Seen > 0 {
		fmt.Fprintf(out, "devices: %s seen, %.1f arrivals each (the most: %s, %d)\n", plan.Thousands(d.Seen), d.PerDevice, d.MostID, d.Most)
	}
	if len(l.Lost) > 0 {
		fmt.Fprintf(out, "the log says it lost lines of its own (its counts have holes): line %d: %s", l.Lost[0].Line, l.Lost[0].Text)
		if len(l.Lost) > 1 {
			fmt.Fprintf(out, ", and %d more such lines", len(l.Lost)-1)
		}
		if len(l.Gaps) > 0 {
			var lost time.Duration
			for _, g := range l.Gaps {
				lost += g.To - g.From
			}
			fmt.Fprintf(out, "; judged with the %s it lost every line in (%v in all) taken out", plural(len(l.Gaps), "span"), lost.Round(time.Millisecond))
		}
		fmt.Fprintln(out)
	}
}

// judgement judges the log as one series and writes the judgement.
func (w *writer) judgement() (stormstats.Verdict, error) {
	l := w.l
	h, m, prep := l.Histogram()
	j, err := stormstats.Judge(h, m)
	if err != nil {
		return "", err
	}
	j = prep.Qualify(j)
	a := stormstats.Summarize(h)
	w.view.Recoveries = []RecoveryView{{Arrivals: a, Judgement: j}}
	if w.asJSON {
		return w.writeJSON(struct {
			lineCounts
			stormstats.Preparation
			stormstats.Judgement
			Arrivals stormstats.Arrivals `json:"arrivals"`
		}{w.counts(), prep, j, a}, j.Verdict)
	}
	w.header("")
	stormstats.WritePreparation(w.out, "", prep)
	if !w.clock.Base.IsZero() {
		fmt.Fprintf(w.out, "times: seconds from the log's first arrival, %s\n", w.clock.At(0))
	}
	stormstats.WriteSummary(w.out, "", a, j, w.clock)
	if j.Verdict == stormstats.Waves {
		fmt.Fprintln(w.out, "if some of these bursts are separate disruptions (a broker restarted twice, a cluster node by node) "+
			"rather than rounds of retries, name them with -disruptions to judge each recovery on its own")
	}
	return j.Verdict, nil
}

// recoveryDoc is one recovery as -json writes it.
type recoveryDoc struct {
	stormstats.Recovery
	Devices *arrivallog.Devices `json:"devices,omitempty"`
}

// recoveries writes each recovery's judgement and the log's by them all.
// at are the recoveries' starts; found the disruptions the log showed,
// when it was not told them (the first recovery then runs from the log's
// start).
func (w *writer) recoveries(recs []stormstats.Recovery, before int, at []time.Duration, found []disruption.Disruption) (stormstats.Verdict, error) {
	l := w.l
	overall := stormstats.Overall(recs)
	docs := make([]recoveryDoc, len(recs))
	for i, r := range recs {
		lr := RecoveryView{AtS: r.AtS, Arrivals: r.Arrivals, Judgement: r.Judgement}
		switch {
		case found == nil:
			lr.Why = "named by -disruptions"
		case i > 0:
			lr.AtS, lr.Why = found[i-1].AtS, found[i-1].Why
		}
		w.view.Recoveries = append(w.view.Recoveries, lr)
		docs[i].Recovery = r
		to := time.Duration(math.MaxInt64)
		if i+1 < len(at) {
			to = at[i+1]
		}
		if d, ok := l.Devices(at[i], to); ok {
			docs[i].Devices = &d
		}
	}
	if w.asJSON {
		return w.writeJSON(struct {
			lineCounts
			Verdict     stormstats.Verdict      `json:"verdict"`
			BeforeFirst int                     `json:"before_first_disruption"`
			Found       []disruption.Disruption `json:"disruptions_found,omitempty"`
			Recoveries  []recoveryDoc           `json:"recoveries"`
		}{w.counts(), overall, before, found, docs}, overall)
	}
	extra := fmt.Sprintf("; %d recoveries", len(recs))
	if before > 0 {
		extra += fmt.Sprintf("; %d arrivals before the first disruption, not judged", before)
	}
	w.header(extra)
	for i, r := range recs {
		switch {
		case found == nil:
			fmt.Fprintf(w.out, "after the disruption at %s:\n", w.clock.At(r.AtS))
		case i == 0:
			fmt.Fprintf(w.out, "from the log's start at %s:\n", w.clock.At(r.AtS))
		default:
			d := found[i-1]
			fmt.Fprintf(w.out, "after the disruption at %s (line %d: %s):\n", w.clock.At(d.AtS), d.Line, d.Why)
		}
		from := w.clock
		if !from.Base.IsZero() && r.AtS > math.MinInt64/1e9 {
			from.From = from.Base.Add(time.Duration(r.AtS * float64(time.Second)))
		}
		if d := docs[i].Devices; d != nil {
			writeDevices(w.out, "  ", *d)
		}
		stormstats.WritePreparation(w.out, "  ", r.Preparation)
		stormstats.WriteSummary(w.out, "  ", r.Arrivals, r.Judgement, from)
	}
	fmt.Fprintf(w.out, "overall: %s\n", overall)
	return overall, nil
}

// writeDevices says which devices a recovery brought back, and which it
// did not.
func writeDevices(out io.Writer, indent string, d arrivallog.Devices) {
	fmt.Fprintf(out, "%sdevices: %s arrived, %.1f arrivals each", indent, plan.Thousands(d.Seen), d.PerDevice)
	if d.Before > 0 {
		fmt.Fprintf(out, "; of the %s seen before, %s still out", plan.Thousands(d.Before), plan.Thousands(d.StillOut))
		if len(d.StillOutIDs) > 0 {
			fmt.Fprintf(out, " (%s", strings.Join(d.StillOutIDs, ", "))
			if d.StillOut > len(d.StillOutIDs) {
				fmt.Fprintf(out, " and %s more", plan.Thousands(d.StillOut-len(d.StillOutIDs)))
			}
			fmt.Fprint(out, ")")
		}
	}
	fmt.Fprintln(out)
}

func (w *writer) writeJSON(doc any, verdict stormstats.Verdict) (stormstats.Verdict, error) {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w.out, "%s\n", b)
	return verdict, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return plan.Thousands(n) + " " + what + "s"
}
