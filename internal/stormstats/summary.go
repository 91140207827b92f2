package stormstats

import (
	"fmt"
	"io"
	"strings"
)

// maxListed bounds the bursts a summary lists.
const maxListed = 6

// WriteSummary writes what devicesim prints for a series of arrivals: how
// many, how fast at the busiest, the verdict with its synchrony, and the
// first bursts, their times as c writes them. Each line starts with
// indent.
func WriteSummary(w io.Writer, indent string, a Arrivals, j Judgement, c Clock) {
	fmt.Fprintf(w, "%sarrivals: %s over %s; busiest 100 ms %s/s, busiest second %s/s\n",
		indent, si(float64(a.Count)), seconds(a.SpanS), si(a.PeakPerS100ms), si(a.PeakPerS1s))
	detail := fmt.Sprintf("synchrony %.2f", j.Synchrony)
	if j.Verdict == Waves {
		detail += ", bursts every " + seconds(j.PeriodS)
		if j.GapMaxS > 1.5*j.GapMinS {
			detail = fmt.Sprintf("synchrony %.2f, bursts %s to %s apart", j.Synchrony, seconds(j.GapMinS), seconds(j.GapMaxS))
		}
	}
	fmt.Fprintf(w, "%sverdict: %s (%s): %s\n", indent, j.Verdict, detail, j.Reason)
	if len(j.Bursts) == 0 {
		return
	}
	var list []string
	for _, b := range j.Bursts[:min(len(j.Bursts), maxListed)] {
		list = append(list, fmt.Sprintf("%s: %s within %s", c.At(b.AtS), si(float64(b.Count)), seconds(b.WidthS)))
	}
	if more := len(j.Bursts) - maxListed; more > 0 {
		list = append(list, fmt.Sprintf("and %d more", more))
	}
	fmt.Fprintf(w, "%sbursts at: %s\n", indent, strings.Join(list, "; "))
}

// WritePreparation says what Prepare did to a log: the tick its stamps sit
// on and what that hides, and the lines it set aside and why.
func WritePreparation(w io.Writer, indent string, p Preparation) {
	if p.TickS > 0 {
		fmt.Fprintf(w, "%sresolution: stamps on a %s tick, each arrival placed within its tick; no burst narrower is looked for, "+
			"and rounds less than %s apart (plus about 4 times their own width) cannot be told from a smooth rate\n",
			indent, seconds(p.TickS), seconds(p.ResolvableS))
	}
	for _, s := range p.SetAside {
		lines := make([]string, len(s.Lines))
		for i, l := range s.Lines {
			lines[i] = fmt.Sprint(l)
		}
		more := ""
		if s.Count > len(s.Lines) {
			more = fmt.Sprintf(" and %d more", s.Count-len(s.Lines))
		}
		fmt.Fprintf(w, "%sset aside: line %s%s: %s\n", indent, strings.Join(lines, ", "), more, s.Why)
	}
}
