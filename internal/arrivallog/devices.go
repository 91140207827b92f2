package arrivallog

import (
	"slices"
	"time"
)

// Devices is what a log's client IDs say of its fleet over a span of it.
// It says how many devices arrived, and how often each. It also says
// which devices seen before the span's start never arrived within it
// (still out).
type Devices struct {
	Seen      int     `json:"seen"`                // devices with an arrival in the span
	Arrivals  int64   `json:"arrivals"`            // their arrivals
	PerDevice float64 `json:"arrivals_per_device"` // Arrivals / Seen
	Most      int     `json:"most_arrivals"`       // the most of one device
	MostID    string  `json:"most_arrivals_id"`
	// Before counts the devices the log showed arriving before the span
	// (0 for the first). StillOut counts those of them that did not arrive
	// within it. The first few of them are named in StillOutIDs.
	Before      int      `json:"seen_before"`
	StillOut    int      `json:"still_out"`
	StillOutIDs []string `json:"still_out_ids,omitempty"`
}

// maxStillOutIDs bounds the devices a summary names.
const maxStillOutIDs = 10

// Devices says what the client IDs of the arrivals in [from, to) say,
// and of the devices that arrived before from, which did not arrive again
// by to. ok false for a log without client IDs.
func (l *Log) Devices(from, to time.Duration) (d Devices, ok bool) {
	if l.Clients == nil {
		return d, false
	}
	before := map[string]bool{}
	in := map[string]int{}
	for i, t := range l.Times {
		c := l.Clients[i]
		if c == "" || !l.Admitted(i) {
			continue
		}
		switch {
		case t < from:
			before[c] = true
		case t < to:
			in[c]++
			d.Arrivals++
		}
	}
	d.Seen, d.Before = len(in), len(before)
	if d.Seen > 0 {
		d.PerDevice = float64(d.Arrivals) / float64(d.Seen)
	}
	for c, n := range in {
		if n > d.Most || n == d.Most && c < d.MostID {
			d.Most, d.MostID = n, c
		}
	}
	for c := range before {
		if in[c] == 0 {
			d.StillOut++
			d.StillOutIDs = append(d.StillOutIDs, c)
		}
	}
	slices.Sort(d.StillOutIDs)
	if len(d.StillOutIDs) > maxStillOutIDs {
		d.StillOutIDs = d.StillOutIDs[:maxStillOutIDs]
	}
	return d, true
}
