package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/herdguard/herdguard/internal/attempt"
)

// ReadReport reads a run's report.json and events.csv back from dir.
func ReadReport(dir string) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if r.events, err = readEvents(eventsPath(dir)); err != nil {
		return nil, err
	}
	return r, nil
}

// Merge combines shard reports of one fleet into one. The shards have
// disjoint device IDs, the same scenario and the same policy. Times are
// re-anchored at the earliest shard's disruption. Every statistic is
// recomputed from the events.
func Merge(shards []*Report) (*Report, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("report: nothing to merge")
	}
	first := shards[0]
	m := &Report{Setup: Setup{Scenario: first.Scenario, Policy: first.Policy, Engine: first.Engine, Transport: first.Transport,
		Seed: first.Seed, TimeScale: first.TimeScale, DisruptionUnixMS: first.DisruptionUnixMS}}
	seen := map[string]bool{}
	all := true
	var wall, mem float64
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
	b := NewBuilder(m.Devices, t0, t0, m.TimeScale, first.Fleet.MeasuredAt, "", nil)
	for _, r := range records {
		b.Add(r)
	}
	if err := b.Fill(m); err != nil {
		return nil, err
	}
	m.Recovery.AllRecovered = all && m.stranded == 0
	m.Host.WallS, m.Host.MemoryPerDeviceKB = wall, mem/float64(m.Devices)
	m.Shard = fmt.Sprintf("merged from %d", len(shards))
	return m, nil
}
