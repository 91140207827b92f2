// Package rendezvous is where the shards of one storm meet before they
// strike: a directory on a volume every shard mounts. Each shard writes a
// mark there once its fleet is up, then waits for every other shard's.
// The marks say when each shard was ready, what it was asked to run, and
// (by the time the volume gave the file) how far its clock is from the
// others'. Shards that disagree on the plan, or whose clocks disagree,
// refuse to strike at all: a storm struck half-way, or at several
// instants, is not the storm the user asked for.
package rendezvous

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrRefused is wrapped by every refusal to strike: a plan or clock that
// disagrees, an earlier run's mark, a shard that never came or gave up.
var ErrRefused = errors.New("rendezvous: the shards will not strike together")

// MaxSkew is how far apart the shards' clocks may be. The merged report
// counts arrivals in windows of a second and more; NTP keeps clocks within
// a few milliseconds.
const MaxSkew = 250 * time.Millisecond

// Poll is how often a shard looks for the others' marks.
const Poll = 100 * time.Millisecond

// Mark is what a shard writes once its fleet is up: a plain value, read
// back from the file it was written to.
type Mark struct {
	Shard  int    `json:"shard"`
	Shards int    `json:"shards"`
	Host   string `json:"host"`
	// PlanHash is Hash of the plan's shared settings; Plan is them, to say
	// which differ.
	PlanHash string   `json:"plan_hash"`
	Plan     []string `json:"plan"`
	// ReadyUnixNS is the shard's clock when it wrote the mark.
	ReadyUnixNS int64 `json:"ready_unix_ns"`

	// stamped is when the volume says the mark was written: its
	// modification time, on the volume's clock (the file server's, or the
	// node's).
	stamped time.Time
}

// Offset is the mark's writer's clock less the volume's.
func (m Mark) Offset() time.Duration { return time.Unix(0, m.ReadyUnixNS).Sub(m.stamped) }

// Ready is when the shard was ready, on its own clock.
func (m Mark) Ready() time.Time { return time.Unix(0, m.ReadyUnixNS) }

// Hash is a plan's shared settings in a word.
func Hash(shared []string) string {
	h := sha256.Sum256([]byte(strings.Join(shared, "\n")))
	return hex.EncodeToString(h[:8])
}

// Meeting is every shard's mark, in shard order: a plain value, what Meet
// read once every shard was there.
type Meeting struct{ Marks []Mark }

// LastReady is when the last shard was ready, on the shards' clocks.
func (m Meeting) LastReady() time.Time {
	var last time.Time
	for _, k := range m.Marks {
		if k.Ready().After(last) {
			last = k.Ready()
		}
	}
	return last
}

// Offset is shard's clock less the volume's.
func (m Meeting) Offset(shard int) time.Duration { return m.Marks[shard].Offset() }

// markPath is shard's mark in dir.
func markPath(dir string, shard int) string {
	return filepath.Join(dir, fmt.Sprintf("ready-%d.json", shard))
}

// gaveUpPath is where a shard that waited in vain says so: a shard that
// sees every mark but this one's must not strike.
func gaveUpPath(dir string, shard int) string {
	return filepath.Join(dir, fmt.Sprintf("gave-up-%d", shard))
}

// Meet writes shard index of shards' mark into dir and waits, up to wait,
// until every shard's is there. It refuses a directory that holds this
// shard's mark already (an earlier run's), shards whose plans differ
// (naming the settings) and clocks more than MaxSkew apart (naming the
// shards).
func Meet(ctx context.Context, dir string, index, shards int, shared []string, wait time.Duration) (Meeting, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Meeting{}, fmt.Errorf("rendezvous: %w", err)
	}
	mine := markPath(dir, index)
	if _, err := os.Stat(mine); err == nil {
		return Meeting{}, fmt.Errorf("%w: %s holds shard %d's mark already, from an earlier run: give each run a directory of its own",
			ErrRefused, dir, index)
	}
	host, _ := os.Hostname()
	if err := write(mine, Mark{Shard: index, Shards: shards, Host: host, PlanHash: Hash(shared), Plan: shared}); err != nil {
		return Meeting{}, fmt.Errorf("rendezvous: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	m := Meeting{Marks: make([]Mark, shards)}
	missing := make([]int, shards)
	for i := range missing {
		missing[i] = i
	}
	for {
		var err error
		if missing, err = m.read(dir, missing); err != nil {
			return Meeting{}, err
		}
		if len(missing) == 0 {
			return m, m.check(index)
		}
		select {
		case <-ctx.Done():
			// The others must hear of it: one that saw every mark, this
			// one's included, would otherwise strike without it.
			_ = os.WriteFile(gaveUpPath(dir, index), nil, 0o644)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return Meeting{}, fmt.Errorf("%w: after %v, shards %s of %d are not ready in %s", ErrRefused, wait, list(missing),
					shards, dir)
			}
			return Meeting{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// write writes m whole under path: a reader sees all of it or none. Its
// time is taken last, as near the volume's stamp as it can be.
func write(path string, m Mark) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	m.ReadyUnixNS = time.Now().UnixNano()
	if err := json.NewEncoder(f).Encode(m); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// read reads into m the marks of the shards missing from it that are in
// dir now, and returns those still missing. A mark, once written, does
// not change: each is read once, however long the others take.
func (m Meeting) read(dir string, missing []int) ([]int, error) {
	var still []int
	for _, i := range missing {
		k, err := readMark(markPath(dir, i))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			still = append(still, i)
			continue
		case err != nil:
			return nil, err
		case k.Shard != i:
			return nil, fmt.Errorf("rendezvous: %s holds shard %d's mark", markPath(dir, i), k.Shard)
		}
		m.Marks[i] = k
	}
	return still, nil
}

// readMark reads the mark at path, stamped with its modification time.
func readMark(path string) (Mark, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Mark{}, err
	}
	if err != nil {
		return Mark{}, fmt.Errorf("rendezvous: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Mark{}, fmt.Errorf("rendezvous: %w", err)
	}
	var k Mark
	if err := json.NewDecoder(f).Decode(&k); err != nil {
		return Mark{}, fmt.Errorf("rendezvous: %s: %w", path, err)
	}
	k.stamped = st.ModTime()
	return k, nil
}

// check refuses a meeting whose shards ran different plans or whose
// clocks disagree, as seen by shard me.
func (m Meeting) check(me int) error {
	mine := m.Marks[me]
	for _, k := range m.Marks {
		if k.Shards != mine.Shards {
			return fmt.Errorf("%w: shard %d (%s) is one of %d shards, shard %d one of %d", ErrRefused, k.Shard, k.Host, k.Shards,
				me, mine.Shards)
		}
		if k.PlanHash != mine.PlanHash {
			return fmt.Errorf("%w: shard %d (%s) was asked for another storm than shard %d: %s", ErrRefused, k.Shard, k.Host, me,
				Differences(mine.Plan, k.Plan))
		}
	}
	if err := CheckClocks(m.offsets()); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return nil
}

// StillOn refuses to strike, in dir, if a shard has given up waiting
// since the meeting: the strike's last look before it is made.
func StillOn(dir string, shards int) error {
	for i := range shards {
		if _, err := os.Stat(gaveUpPath(dir, i)); err == nil {
			return fmt.Errorf("%w: shard %d gave up waiting for the others", ErrRefused, i)
		}
	}
	return nil
}

func (m Meeting) offsets() map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, k := range m.Marks {
		out[k.Shard] = k.Offset()
	}
	return out
}

// CheckClocks refuses shards' clocks (each less a common one: the
// volume's) more than MaxSkew apart, naming the two furthest.
func CheckClocks(offsets map[int]time.Duration) error {
	if len(offsets) < 2 {
		return nil
	}
	shards := make([]int, 0, len(offsets))
	for s := range offsets {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	lo, hi := shards[0], shards[0]
	for _, s := range shards {
		if offsets[s] < offsets[lo] {
			lo = s
		}
		if offsets[s] > offsets[hi] {
			hi = s
		}
	}
	if skew := offsets[hi] - offsets[lo]; skew > MaxSkew {
		return fmt.Errorf("the shards' clocks disagree: shard %d's is %v ahead of shard %d's (at most %v): "+
			"keep every node on NTP", hi, skew.Round(time.Millisecond), lo, MaxSkew)
	}
	return nil
}

// Differences names the settings in which a and b (Plan.Shared lists)
// differ, as "name: a, not b".
func Differences(a, b []string) string {
	values := func(list []string) map[string]string {
		out := map[string]string{}
		for _, s := range list {
			name, v, _ := strings.Cut(s, "=")
			out[name] = v
		}
		return out
	}
	av, bv := values(a), values(b)
	var names []string
	for name := range av {
		if bv[name] != av[name] {
			names = append(names, name)
		}
	}
	for name := range bv {
		if _, ok := av[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []string
	for _, name := range names {
		out = append(out, fmt.Sprintf("%s %s, not %s", name, orUnset(bv[name]), orUnset(av[name])))
	}
	return strings.Join(out, "; ")
}

func orUnset(v string) string {
	if v == "" {
		return "(unset)"
	}
	return v
}

// list writes shard numbers as "2, 5 and 7".
func list(shards []int) string {
	s := make([]string, len(shards))
	for i, n := range shards {
		s[i] = fmt.Sprint(n)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
