package stormstats

import "time"

// Clock says what a summary's times are, so that it can write each as a
// person reads it: an offset from the disruption, with the instant on the
// wall clock. The zero Clock writes seconds as they are.
type Clock struct {
	// Base is the instant a time of 0 s is; zero when the times are not
	// anchored to the wall clock.
	Base time.Time
	// From is the instant offsets are written from (the disruption); zero
	// is Base.
	From time.Time
	// Zone is the zone instants are written in; nil is UTC.
	Zone *time.Location
}

// At writes the time s as its offset from From and its instant:
// "12.3 s (2026-11-27T04:02:45.3Z)"; without a Base, "12.3 s".
func (c Clock) At(s float64) string {
	if c.Base.IsZero() {
		return seconds(s)
	}
	zone, from := c.Zone, c.From
	if zone == nil {
		zone = time.UTC
	}
	if from.IsZero() {
		from = c.Base
	}
	t := c.Base.Add(time.Duration(s * float64(time.Second)))
	return seconds(t.Sub(from).Seconds()) + " (" + t.In(zone).Format("2006-01-02T15:04:05.999Z07:00") + ")"
}

// Epoch says whether times (as a log's arrivals hold them) are since the
// Unix epoch rather than since a run's start: any from 2001 on is.
func Epoch(first time.Duration) bool { return first >= 1e9*time.Second }
