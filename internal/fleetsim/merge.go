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
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
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
	if strings.Join(header, ",") != "t_s,unix_ms,client_id,outcome,code" {
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
		ms, err1 := strconv.ParseInt(row[1], 10, 64)
		code, err2 := strconv.ParseInt(row[4], 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s/events.csv: %w", dir, err)
		}
		r.events = append(r.events, event{unixNS: ms * 1e6, clientID: row[2], outcome: row[3], code: int32(code)})
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
		Seed: first.Seed, TimeScale: first.TimeScale, Thresholds: first.Thresholds, MeasuredAt: first.MeasuredAt,
		DisruptionUnixMS: first.DisruptionUnixMS, RecoveryJSON: recoveryJSON{AllRecovered: true}}
	seen := map[string]bool{}
	var afterReturn, wall, mem float64
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
		m.RecoveryJSON.AllRecovered = m.RecoveryJSON.AllRecovered && s.RecoveryJSON.AllRecovered
		m.Attempts.Total += s.Attempts.Total
		m.Attempts.Refused += s.Attempts.Refused
		m.Attempts.PerDeviceMax = max(m.Attempts.PerDeviceMax, s.Attempts.PerDeviceMax)
		afterReturn += s.Attempts.AfterReturnPerDeviceMean * float64(s.Devices)
		wall = max(wall, s.Host.WallS)
		mem += s.Host.MemoryPerDeviceKB * float64(s.Devices)
		m.events = append(m.events, s.events...)
	}
	t0 := time.UnixMilli(m.DisruptionUnixMS)
	slices.SortStableFunc(m.events, func(a, b event) int { return cmp.Compare(a.unixNS, b.unixNS) })
	recovered := map[string]time.Duration{}
	arrivals := make([]time.Duration, len(m.events))
	for i := range m.events {
		e := &m.events[i]
		e.t = time.Duration(float64(e.unixNS-t0.UnixNano()) * m.TimeScale)
		arrivals[i] = e.t
		if e.outcome == "accepted" {
			recovered[e.clientID] = e.t
		}
	}
	all := m.RecoveryJSON.AllRecovered
	m.recovered, m.RecoveryJSON = len(recovered), recoveryOf(recovered)
	m.RecoveryJSON.AllRecovered = all && m.recovered == m.Devices
	m.Attempts.PerDeviceMean = float64(m.Attempts.Total) / float64(m.Devices)
	m.Attempts.AfterReturnPerDeviceMean = afterReturn / float64(m.Devices)
	m.Arrivals = stormstats.Summarize(arrivals, time.Duration(max(first.Arrivals.BucketMS, 1))*time.Millisecond)
	m.Verdict, m.VerdictWhy = stormstats.Judge(m.Arrivals, m.Thresholds)
	m.Host = Host{WallS: wall, MemoryPerDeviceKB: mem / float64(m.Devices)}
	m.Shard = fmt.Sprintf("merged from %d", len(shards))
	return m, nil
}
