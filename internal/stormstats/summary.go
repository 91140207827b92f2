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
// first bursts. Each line starts with indent.
func WriteSummary(w io.Writer, indent string, a Arrivals, j Judgement) {
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
		list = append(list, fmt.Sprintf("%s (%s within %s)", seconds(b.AtS), si(float64(b.Count)), seconds(b.WidthS)))
	}
	if more := len(j.Bursts) - maxListed; more > 0 {
		list = append(list, fmt.Sprintf("and %d more", more))
	}
	fmt.Fprintf(w, "%sbursts at: %s\n", indent, strings.Join(list, ", "))
}
