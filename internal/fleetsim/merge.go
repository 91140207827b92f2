package fleetsim

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
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
	f, err := os.Open(filepath.Join(dir, "events.csv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s/events.csv: %w", dir, err)
	}
	if !slices.Equal(header, eventsHeader) {
		return nil, fmt.Errorf("%s/events.csv: unexpected header %v", dir, header)
	}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s/events.csv: %w", dir, err)
		}
		ts, err0 := strconv.ParseFloat(row[0], 64)
		ms, err1 := strconv.ParseInt(row[1], 10, 64)
		code, err2 := strconv.ParseInt(row[4], 10, 32)
		if err := errors.Join(err0, err1, err2); err != nil {
			return nil, fmt.Errorf("%s/events.csv: %w", dir, err)
		}
		lag := -1.0
		if row[5] != "" {
			if lag, err = strconv.ParseFloat(row[5], 64); err != nil {
				return nil, fmt.Errorf("%s/events.csv: %w", dir, err)
			}
		}
		r.events = append(r.events, event{t: time.Duration(ts * float64(time.Second)), unixNS: ms * 1e6,
			lag: time.Duration(lag * float64(time.Millisecond)), clientID: row[2], outcome: row[3], code: int32(code)})
	}
	return r, nil
}

// Merge combines shard reports of one fleet (disjoint device IDs, the same
// scenario and policy) into one: times are re-anchored at the earliest
// shard's disruption and every statistic is recomputed from the events.
func Merge(shards []*Report) (*Report, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("fleetsim: nothing to merge")
	}
	first := shards[0]
	m := &Report{Scenario: first.Scenario, Policy: first.Policy, Engine: first.Engine, Transport: first.Transport,
		Seed: first.Seed, TimeScale: first.TimeScale, DisruptionUnixMS: first.DisruptionUnixMS}
	seen := map[string]bool{}
	all := true
	var wall, mem float64
	for _, s := range shards {
		if s.Scenario != m.Scenario || s.Policy != m.Policy || s.Seed != m.Seed {
			return nil, fmt.Errorf("fleetsim: shard %q ran %s/%s seed %d, not %s/%s seed %d",
				s.Shard, s.Scenario, s.Policy, s.Seed, m.Scenario, m.Policy, m.Seed)
		}
		if s.Shard != "" && seen[s.Shard] {
			return nil, fmt.Errorf("fleetsim: shard %s given twice", s.Shard)
		}
		seen[s.Shard] = true
		m.Devices += s.Devices
		m.DisruptionUnixMS = min(m.DisruptionUnixMS, s.DisruptionUnixMS)
		all = all && s.RecoveryJSON.AllRecovered
		wall = max(wall, s.Host.WallS)
		mem += s.Host.MemoryPerDeviceKB * float64(s.Devices)
	}
	t0 := time.UnixMilli(m.DisruptionUnixMS)
	var events []event
	for _, s := range shards {
		events = append(events, s.events...)
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.unixNS, b.unixNS) })
	b := newBuilder(m.Devices, t0, t0, m.TimeScale, first.Fleet.MeasuredAt, "")
	for _, e := range events {
		e.t = b.since(time.Unix(0, e.unixNS))
		b.deviceEvent(e)
	}
	if err := b.fill(m); err != nil {
		return nil, err
	}
	m.RecoveryJSON.AllRecovered = all && m.recovered == m.Devices
	m.Host.WallS, m.Host.MemoryPerDeviceKB = wall, mem/float64(m.Devices)
	m.Shard = fmt.Sprintf("merged from %d", len(shards))
	return m, nil
}
