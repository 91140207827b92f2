package proxystorm

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/policyfit"
)

// waits are the gaps between a device's attempts: what its reconnect
// policy waited (the first from the disruption).
func waits(d policyfit.Device) []time.Duration {
	out := make([]time.Duration, len(d.Attempts))
	prev := time.Duration(0)
	for i, a := range d.Attempts {
		out[i], prev = a.T-prev, a.T
	}
	return out
}

// Devices are the fleet's devices known by client ID, each with its
// attempts since the first disruption, in the order of their client IDs;
// nil before the storm began.
func (s *Storm) Devices() []policyfit.Device {
	s.mu.Lock()
	t0, fl := s.t0, s.fleet
	s.mu.Unlock()
	if fl == nil {
		return nil
	}
	out := make([]policyfit.Device, len(fl.ids))
	for i, id := range fl.ids {
		out[i].ID = id
	}
	for _, a := range s.attemptsSince(t0) {
		i, ok := fl.index[a.ClientID]
		if !ok || a.ClientID == "" {
			continue
		}
		out[i].Attempts = append(out[i].Attempts, attempt.Record{T: a.Accept.Sub(t0), Lag: -1, Device: int32(i), Outcome: a.Outcome})
	}
	return out
}

// WriteDevices writes devices as devices.csv: each device's attempts, the
// waits between them in seconds, and when it was last let through.
func WriteDevices(w io.Writer, devices []policyfit.Device) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"client_id", "attempts", "last_admitted_s", "waits_s"})
	for _, d := range devices {
		last := ""
		for k := len(d.Attempts) - 1; k >= 0; k-- {
			if d.Attempts[k].Outcome == fault.Accepted {
				last = seconds(d.Attempts[k].T)
				break
			}
		}
		ws := make([]string, 0, len(d.Attempts))
		for _, g := range waits(d) {
			ws = append(ws, seconds(g))
		}
		_ = cw.Write([]string{d.ID, strconv.Itoa(len(d.Attempts)), last, strings.Join(ws, " ")})
	}
	cw.Flush()
	return cw.Error()
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
