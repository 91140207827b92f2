package agents

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/rendezvous"
	"github.com/herdguard/herdguard/reconnect"
)

// strike is what the fleet knows of its first disruption's instant: when
// it is, and this host's clock against the other shards'.
type strike struct {
	at     time.Time
	offset *time.Duration // this clock less the shared volume's, if the shards met
}

// awaitStrike waits, once the fleet is up, for the instant its first
// disruption strikes: now, the plan's DisruptAt instant, or DisruptAt's
// After once every shard is ready. Shards with a ReadyDir meet there
// first (rendezvous.Meet), and refuse different plans or clocks. An
// instant already past is refused: a shard that struck late would not be
// striking one storm with the others.
func (f *Fleet) awaitStrike(ctx context.Context) (strike, error) {
	p := f.p
	var s strike
	ready := time.Now()
	if p.DisruptAt.After > 0 && p.Shard.Count > 1 && p.ReadyDir == "" {
		return s, fmt.Errorf("-disrupt-at %s counts from when every shard is ready: name the directory they share (-ready-dir)", p.DisruptAt)
	}
	if p.ReadyDir != "" && p.Shard.Count > 0 {
		m, err := rendezvous.Meet(ctx, p.ReadyDir, p.Shard.Index, p.Shard.Count, p.Shared(), cmp.Or(p.ReadyWait, plan.DefaultReadyWait))
		if err != nil {
			return s, err
		}
		offset := m.Offset(p.Shard.Index)
		s.offset, ready = &offset, m.LastReady()
	}
	switch {
	case !p.DisruptAt.At.IsZero():
		s.at = p.DisruptAt.At
	case p.DisruptAt.After > 0:
		s.at = ready.Add(p.DisruptAt.After)
	default:
		s.at = time.Now()
		return s, nil
	}
	if late := time.Since(s.at); late > 0 {
		return s, fmt.Errorf("%w: -disrupt-at %s: its instant %s had passed %v before this shard was ready to strike: "+
			"give the shards longer to boot", rendezvous.ErrRefused, p.DisruptAt, s.at.UTC().Format(time.RFC3339Nano),
			late.Round(time.Millisecond))
	}
	if err := reconnect.Sleep(ctx, nil, time.Until(s.at)); err != nil {
		return s, err
	}
	if s.offset != nil {
		return s, rendezvous.StillOn(p.ReadyDir, p.Shard.Count)
	}
	return s, nil
}
