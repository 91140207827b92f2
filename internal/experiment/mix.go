package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/virtual"
)

// MixConfig is the rollout question: the same storm with a growing share
// of the fleet moved from one policy (From, today's firmware) to another
// (To), in the virtual engine. A share passes when the fleet comes back
// spread out and the broker's busiest second stays at or under PeakBound.
type MixConfig struct {
	// Storm is the storm every share runs: its fleet, scenario and
	// admission. Its policy is replaced by the shares'.
	Storm     plan.Plan
	From, To  string
	Shares    []float64 // of the fleet on To, 0 to 1
	PeakBound float64   // connects in the broker's busiest second
	Progress  io.Writer // a line per share as it finishes, if set
}

// DefaultMix is devicesim grid -mix's: a million devices on the mission's
// formula moving to fleet-safe, 0 to 100 % in steps of 10. They go through
// a 60 s outage and a broker that comes back admitting 5,000 connects a
// second. Its busiest second (refused connects included) must stay at
// 50,000, ten times what it admits.
func DefaultMix() MixConfig {
	p := plan.Default()
	p.Engine, p.Devices, p.Scenario, p.Outage = plan.Virtual, 1_000_000, plan.ThrottledRestart, time.Minute
	p.AdmitRate, p.AdmitBurst = 5000, 250
	shares := make([]float64, 11)
	for i := range shares {
		shares[i] = float64(i) / 10
	}
	return MixConfig{Storm: p, From: "iotcore", To: "fleet-safe", Shares: shares, PeakBound: 50_000}
}

// MixRow is one share's run.
type MixRow struct {
	Share             float64            `json:"share"`
	Verdict           stormstats.Verdict `json:"verdict"`
	BrokerPeakPerS1s  float64            `json:"broker_peak_per_s_1s"`
	RecoveryP99S      float64            `json:"recovery_p99_s"`
	AllRecovered      bool               `json:"all_recovered"`
	AttemptsPerDevice float64            `json:"attempts_per_device"`
	Pass              bool               `json:"pass"`
}

// Mix is the rollout question's answer.
type Mix struct {
	From      string   `json:"from"`
	To        string   `json:"to"`
	Devices   int      `json:"devices"`
	AdmitRate float64  `json:"admit_rate"`
	PeakBound float64  `json:"peak_bound"`
	Rows      []MixRow `json:"rows"`
	// Smallest is the smallest share that passes, and every larger one
	// too; negative when none does.
	Smallest float64 `json:"smallest_share"`
}

// RunMix runs the storm at every share.
func RunMix(ctx context.Context, mc MixConfig) (*Mix, error) {
	if mc.From == "" || mc.To == "" || len(mc.Shares) == 0 || !(mc.PeakBound > 0) {
		return nil, errors.New("mix: name both policies, at least one share and a peak bound > 0")
	}
	m := &Mix{From: mc.From, To: mc.To, Devices: mc.Storm.Devices, AdmitRate: mc.Storm.WithDefaults().AdmitRate, PeakBound: mc.PeakBound, Smallest: -1}
	// the smallest share that passes is read from the top down
	shares := slices.Sorted(slices.Values(mc.Shares))
	for _, share := range shares {
		if share < 0 || share > 1 {
			return nil, fmt.Errorf("mix: share %g is not in [0, 1]", share)
		}
		p := mc.Storm
		p.Engine, p.Events = plan.Virtual, io.Discard
		moved := int(math.Round(share * float64(p.Devices)))
		p.Groups = nil
		if moved > 0 && moved < p.Devices {
			p.Groups = []plan.Group{{Name: mc.From, Devices: p.Devices - moved, Policy: mc.From}, {Name: mc.To, Devices: moved, Policy: mc.To}}
		}
		p.Policy = mc.From
		if moved == p.Devices {
			p.Policy = mc.To
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("mix at %g: %w", share, err)
		}
		r, err := virtual.Run(ctx, p, virtual.Options{})
		if r == nil || (err != nil && !errors.Is(err, report.ErrNotRecovered)) {
			return m, fmt.Errorf("mix at %g: %w", share, err)
		}
		row := MixRow{Share: share, Verdict: r.Verdict, RecoveryP99S: r.Recovery.P99S, AllRecovered: r.Recovery.AllRecovered,
			AttemptsPerDevice: r.Attempts.PerDeviceMean}
		if r.Broker != nil {
			row.BrokerPeakPerS1s = r.Broker.Arrivals.PeakPerS1s
		}
		row.Pass = row.AllRecovered && row.Verdict == stormstats.Spread && row.BrokerPeakPerS1s <= mc.PeakBound
		m.Rows = append(m.Rows, row)
		if mc.Progress != nil {
			writeMixRow(mc.Progress, row)
		}
	}
	for i := len(m.Rows) - 1; i >= 0 && m.Rows[i].Pass; i-- {
		m.Smallest = m.Rows[i].Share
	}
	return m, nil
}

func writeMixRow(w io.Writer, r MixRow) {
	mark := "pass"
	if !r.Pass {
		mark = "fail"
	}
	fmt.Fprintf(w, "%5.0f %%  %-12s %12.0f %12.1f %10.2f  %s\n", 100*r.Share, r.Verdict, r.BrokerPeakPerS1s, r.RecoveryP99S, r.AttemptsPerDevice, mark)
}

// Table writes the answer: a row per share, and the smallest that passes.
func (m *Mix) Table(w io.Writer) {
	fmt.Fprintf(w, "%d devices moving from %s to %s, a broker admitting %.0f/s; pass: spread and a busiest second <= %.0f\n",
		m.Devices, m.From, m.To, m.AdmitRate, m.PeakBound)
	fmt.Fprintf(w, "%7s  %-12s %12s %12s %10s\n", "share", "verdict", "peak/s", "p99 s", "attempts")
	for _, r := range m.Rows {
		writeMixRow(w, r)
	}
	if m.Smallest < 0 {
		fmt.Fprintln(w, "no share passes")
		return
	}
	fmt.Fprintf(w, "the smallest share on %s that passes, with every larger one: %.0f %%\n", m.To, 100*m.Smallest)
}
