package proxystorm

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
)

// Device is one device of the fleet as the proxies saw it since the first
// disruption: its attempts' times, from the disruption, and whether each
// was let through.
type Device struct {
	ID       string
	Attempts []time.Duration
	Admitted []bool
}

// Waits are the gaps between the device's attempts: what its reconnect
// policy waited (the first from the disruption).
func (d Device) Waits() []time.Duration {
	out := make([]time.Duration, len(d.Attempts))
	prev := time.Duration(0)
	for i, t := range d.Attempts {
		out[i], prev = t-prev, t
	}
	return out
}

// Devices are the fleet's devices known by client ID, each with its
// attempts since the first disruption, in the order of their client IDs;
// nil before the storm began.
func (s *Storm) Devices() []Device {
	s.mu.Lock()
	t0, fl := s.t0, s.fleet
	s.mu.Unlock()
	if fl == nil {
		return nil
	}
	out := make([]Device, len(fl.ids))
	for i, id := range fl.ids {
		out[i].ID = id
	}
	for _, a := range s.attemptsSince(t0) {
		i, ok := fl.index[a.ClientID]
		if !ok || a.ClientID == "" {
			continue
		}
		out[i].Attempts = append(out[i].Attempts, a.Accept.Sub(t0))
		out[i].Admitted = append(out[i].Admitted, a.Outcome == fault.Accepted)
	}
	return out
}

// WriteDevices writes devices as devices.csv: each device's attempts, the
// waits between them in seconds, and when it was last let through.
func WriteDevices(w io.Writer, devices []Device) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"client_id", "attempts", "last_admitted_s", "waits_s"})
	for _, d := range devices {
		last := ""
		for k := len(d.Admitted) - 1; k >= 0; k-- {
			if d.Admitted[k] {
				last = seconds(d.Attempts[k])
				break
			}
		}
		waits := make([]string, 0, len(d.Attempts))
		for _, g := range d.Waits() {
			waits = append(waits, seconds(g))
		}
		_ = cw.Write([]string{d.ID, strconv.Itoa(len(d.Attempts)), last, strings.Join(waits, " ")})
	}
	cw.Flush()
	return cw.Error()
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
