package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/rendezvous"
)

// ReadReport reads a run's report.json and events.csv back from dir. As
// WriteFiles, it opens them through dir's handle, and refuses what is not
// this user's regular file (datadir.ErrUntrusted): a FIFO in its place
// does not block it.
func ReadReport(dir string) (*Report, error) {
	d, err := datadir.OpenSharedDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := datadir.OpenSharedFile(d, "report.json", os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &Report{}
	if err := json.NewDecoder(f).Decode(r); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if r.events, err = readEvents(d); err != nil {
		return nil, err
	}
	return r, nil
}

// MergeDirs merges the shard reports written in dirs, waiting up to wait
// for any not written yet (awaitReports).
func MergeDirs(ctx context.Context, dirs []string, wait time.Duration) (*Report, error) {
	if err := awaitReports(ctx, dirs, wait); err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	var shards []*Report
	for _, dir := range dirs {
		r, err := ReadReport(dir)
		if err != nil {
			return nil, err
		}
		shards = append(shards, r)
	}
	return Merge(shards)
}

// Merge combines shard reports of one fleet into one. The shards have
// disjoint device IDs, the same scenario and the same policy. Times are
// re-anchored at the earliest shard's disruption. Every statistic is
// recomputed from the events. events.csv has when each attempt began, not
// when its device heard the answer: the merge's recovery is that start,
// where a shard behind a fault proxy counts when the device heard (a
// CONNACK's round trip later, or a hold's).
func Merge(shards []*Report) (*Report, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("report: nothing to merge")
	}
	if err := agree(shards); err != nil {
		return nil, err
	}
	first := shards[0]
	m := &Report{Setup: Setup{Scenario: first.Scenario, Policy: first.Policy, Engine: first.Engine, Transport: first.Transport,
		Seed: first.Seed, TimeScale: first.TimeScale, DisruptionUnixMS: first.DisruptionUnixMS}}
	seen := map[string]bool{}
	all := true
	var wall, mem, res, cpu, notice float64
	for _, s := range shards {
		if s.Scenario != m.Scenario || s.Policy != m.Policy || s.Seed != m.Seed {
			return nil, fmt.Errorf("report: shard %q ran %s/%s seed %d, not %s/%s seed %d",
				s.Shard, s.Scenario, s.Policy, s.Seed, m.Scenario, m.Policy, m.Seed)
		}
		if s.Shard != "" && seen[s.Shard] {
			return nil, fmt.Errorf("report: shard %s given twice", s.Shard)
		}
		seen[s.Shard] = true
		m.Devices += s.Devices
		m.DisruptionUnixMS = min(m.DisruptionUnixMS, s.DisruptionUnixMS)
		all = all && s.Recovery.AllRecovered
		wall = max(wall, s.Host.WallS)
		mem += s.Host.MemoryPerDeviceKB * float64(s.Devices)
		res += s.Host.ResidentPerDeviceKB * float64(s.Devices)
		cpu += s.Host.CPUPerDeviceMS * float64(s.Devices)
		m.Host.KernelTCPKB = max(m.Host.KernelTCPKB, s.Host.KernelTCPKB)
		notice = max(notice, s.Host.NoticeP99S)
	}
	t0 := time.UnixMilli(m.DisruptionUnixMS)
	var records []attempt.Record
	for _, s := range shards {
		shift := time.Duration(float64(s.DisruptionUnixMS-m.DisruptionUnixMS) * float64(time.Millisecond) * m.TimeScale)
		for _, r := range s.events {
			r.T += shift // re-anchored at the earliest disruption
			records = append(records, r)
		}
	}
	slices.SortStableFunc(records, func(a, b attempt.Record) int { return cmp.Compare(a.T, b.T) })
	// Every shard's broker was back when the plan says: the first's return
	// is the fleet's.
	returned := t0.Add(time.Duration(first.BrokerBackS / m.TimeScale * float64(time.Second)))
	var at []time.Duration // a timeline's disruptions, each judged on its own as each shard judged it
	for _, d := range first.Disruptions {
		at = append(at, time.Duration(d.AtS*float64(time.Second)))
	}
	b := NewBuilder(Run{Devices: m.Devices, T0: t0, Returned: returned, TimeScale: m.TimeScale,
		FleetAt: first.Fleet.MeasuredAt, Disruptions: at})
	for _, r := range records {
		b.Add(r)
	}
	if notice > 0 {
		// How soon each device noticed its loss is in no events.csv: the
		// slowest shard's 99th percentile stands for the fleet's, and
		// binds the run as it bound that shard.
		b.notices = []float64{notice}
	}
	if err := b.fill(m); err != nil {
		return nil, err
	}
	m.Recovery.AllRecovered = all && m.stranded == 0
	n := float64(m.Devices)
	m.Host.WallS, m.Host.MemoryPerDeviceKB, m.Host.ResidentPerDeviceKB, m.Host.CPUPerDeviceMS = wall, mem/n, res/n, cpu/n
	m.Shard = fmt.Sprintf("merged from %d", len(shards))
	return m, nil
}

// ErrDisagree is wrapped by Merge's refusal of shards that did not run one
// storm together.
var ErrDisagree = errors.New("report: the shards did not run one storm together")

// agree refuses shards that did not run one storm together: slices of
// different fleets or counts, a slice given twice or missing, plans that
// differ (naming the settings), clocks or strikes more than
// rendezvous.MaxSkew apart (naming the shards).
func agree(shards []*Report) error {
	first := shards[0]
	recorded := 0
	for _, s := range shards {
		if s.Sync != nil {
			recorded++
		}
	}
	switch {
	case recorded == 0:
		return nil // reports from before shards recorded their plans: the scenario, policy and seed must do
	case recorded < len(shards):
		return fmt.Errorf("%w: %d of %d reports record no plan: they are not shards of one storm", ErrDisagree,
			len(shards)-recorded, len(shards))
	}
	count := 0
	if sh, err := plan.ParseShard(first.Shard); err == nil {
		count = sh.Count
	}
	seen := map[int]bool{}
	offsets := map[int]time.Duration{}
	earliest, latest := first, first
	for _, s := range shards {
		sh, err := plan.ParseShard(s.Shard)
		switch {
		case s.Sync == nil || err != nil:
			return fmt.Errorf("%w: %q is not a shard's report (no shard, or no plan recorded)", ErrDisagree, s.Shard)
		case sh.Count != count:
			return fmt.Errorf("%w: shard %s is one of %d, shard %s one of %d", ErrDisagree, s.Shard, sh.Count, first.Shard, count)
		case seen[sh.Index]:
			return fmt.Errorf("%w: shard %s given twice", ErrDisagree, s.Shard)
		case s.Sync.PlanHash != first.Sync.PlanHash:
			return fmt.Errorf("%w: shard %s ran another storm than shard %s: %s", ErrDisagree, s.Shard, first.Shard,
				rendezvous.Differences(first.Sync.Plan, s.Sync.Plan))
		}
		seen[sh.Index] = true
		if o := s.Sync.ClockOffsetMS; o != nil {
			offsets[sh.Index] = time.Duration(*o * float64(time.Millisecond))
		}
		if struck(s) < struck(earliest) {
			earliest = s
		}
		if struck(s) > struck(latest) {
			latest = s
		}
	}
	var missing []string
	for i := range count {
		if !seen[i] {
			missing = append(missing, fmt.Sprint(i))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: shards %s of %d are missing: a merge of part of a fleet is not the fleet's", ErrDisagree,
			strings.Join(missing, ", "), count)
	}
	if err := rendezvous.CheckClocks(offsets); err != nil {
		return fmt.Errorf("%w: %w", ErrDisagree, err)
	}
	if first.Sync.DisruptAt == "" {
		return nil // the disruption was the user's (observe), or each shard's own
	}
	if d := time.Duration((struck(latest) - struck(earliest)) * float64(time.Millisecond)); d > rendezvous.MaxSkew {
		return fmt.Errorf("%w: shard %s struck %v after shard %s (at most %v): they did not strike one storm", ErrDisagree,
			latest.Shard, d.Round(time.Millisecond), earliest.Shard, rendezvous.MaxSkew)
	}
	return nil
}

// struck is when shard s made its first disruption, in milliseconds since
// the epoch, on the shared volume's clock where its offset is known.
func struck(s *Report) float64 {
	t := float64(s.DisruptionUnixMS)
	if o := s.Sync.ClockOffsetMS; o != nil {
		t -= *o
	}
	return t
}
