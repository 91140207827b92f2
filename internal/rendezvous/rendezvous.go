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
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/datadir"
)

// ErrRefused is wrapped by every refusal to strike: a plan or clock that
// disagrees, an earlier run's mark, a shard that never came or gave up, a
// mark dated outside the wait, and a directory or file that no shard could
// trust (datadir.ErrUntrusted, wrapped too).
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
	// node's). seen is when the shard that read it did, on its own clock.
	stamped, seen time.Time
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

// markName is shard's mark in the directory.
func markName(shard int) string { return fmt.Sprintf("ready-%d.json", shard) }

// gaveUpName is where a shard that waited in vain says so: a shard that
// sees every mark but this one's must not strike.
func gaveUpName(shard int) string { return fmt.Sprintf("gave-up-%d", shard) }

// maxMark is the most a mark may hold: a few hundred bytes of plan, with
// room to spare. A bigger file is no shard's.
const maxMark = 64 << 10

// Meet writes shard index of shards' mark into dir and waits, up to wait,
// until every shard's is there. It refuses a directory that holds this
// shard's mark already (an earlier run's), shards whose plans differ
// (naming the settings), clocks more than MaxSkew apart (naming the
// shards) and a mark that says its shard was ready outside this shard's
// wait.
//
// dir is trusted no further than a device trusts its data directory. It
// is refused if others may write to it without the sticky bit. A mark is
// read only if it is this user's regular file, with one link and at most
// 64 KiB: a link in a mark's place is not followed, and a FIFO is not
// waited on. This shard's own files are new ones, renamed into place.
func Meet(ctx context.Context, dir string, index, shards int, shared []string, wait time.Duration) (Meeting, error) {
	began := time.Now()
	d, err := datadir.MkdirShared(dir)
	if err != nil {
		return Meeting{}, refused(err)
	}
	defer d.Close()
	if err := absent(d, index); err != nil {
		return Meeting{}, err
	}
	host, _ := os.Hostname()
	if err := write(d, Mark{Shard: index, Shards: shards, Host: host, PlanHash: Hash(shared), Plan: shared}); err != nil {
		return Meeting{}, refused(err)
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
		if missing, err = m.read(d, missing); err != nil {
			return Meeting{}, err
		}
		if len(missing) == 0 {
			return m, m.check(index, began, wait)
		}
		select {
		case <-ctx.Done():
			// The others must hear of it: one that saw every mark, this
			// one's included, would otherwise strike without it.
			giveUp(d, index)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return Meeting{}, fmt.Errorf("%w: after %v, shards %s of %d are not ready in %s", ErrRefused, wait, list(missing),
					shards, dir)
			}
			return Meeting{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// refused is err, a refusal of the directory or of a file in it
// (datadir.ErrUntrusted), as a refusal to strike.
func refused(err error) error {
	if errors.Is(err, datadir.ErrUntrusted) {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return fmt.Errorf("rendezvous: %w", err)
}

// absent refuses a directory that holds shard's mark already, or anything
// else in its place.
func absent(d *os.File, shard int) error {
	f, err := datadir.OpenSharedFile(d, markName(shard), os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return refused(err)
	}
	f.Close()
	return fmt.Errorf("%w: %s holds shard %d's mark already, from an earlier run: give each run a directory of its own",
		ErrRefused, d.Name(), shard)
}

// write writes m whole as its shard's mark in d: a reader sees all of it
// or none. Its time is taken last, as near the volume's stamp as it can be.
func write(d *os.File, m Mark) error {
	return datadir.WriteShared(d, markName(m.Shard), 0o644, func(w io.Writer) error {
		m.ReadyUnixNS = time.Now().UnixNano()
		return json.NewEncoder(w).Encode(m)
	})
}

// giveUp says in d that shard gave up waiting, in a file of its own: one
// already there (a link, another's file) is left as it is.
func giveUp(d *os.File, shard int) {
	f, err := datadir.OpenSharedFile(d, gaveUpName(shard), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		f.Close()
	}
}

// read reads into m the marks of the shards missing from it that are in
// d now, and returns those still missing. A mark, once written, does not
// change: each is read once, however long the others take.
func (m Meeting) read(d *os.File, missing []int) ([]int, error) {
	var still []int
	for _, i := range missing {
		k, err := readMark(d, markName(i))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			still = append(still, i)
			continue
		case err != nil:
			return nil, err
		case k.Shard != i:
			return nil, fmt.Errorf("rendezvous: %s holds shard %d's mark", filepath.Join(d.Name(), markName(i)), k.Shard)
		}
		m.Marks[i] = k
	}
	return still, nil
}

// readMark reads the mark name in d, stamped with its modification time
// and with when this shard read it. A file bigger than a mark is refused
// unread, and named with its size, not its content.
func readMark(d *os.File, name string) (Mark, error) {
	f, err := datadir.OpenSharedFile(d, name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return Mark{}, err
	}
	if err != nil {
		return Mark{}, refused(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Mark{}, fmt.Errorf("rendezvous: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMark+1))
	if err != nil {
		return Mark{}, fmt.Errorf("rendezvous: %w", err)
	}
	if st.Size() > maxMark || len(b) > maxMark { // the size it has, or grew to while read
		return Mark{}, fmt.Errorf("%w: %s holds %d bytes, more than a mark's %d: no shard wrote it", ErrRefused, f.Name(),
			max(st.Size(), int64(len(b))), maxMark)
	}
	var k Mark
	if err := json.Unmarshal(b, &k); err != nil {
		return Mark{}, fmt.Errorf("rendezvous: %s: %w", f.Name(), err)
	}
	k.stamped, k.seen = st.ModTime(), time.Now()
	return k, nil
}

// check refuses a meeting whose shards ran different plans or whose
// clocks disagree, as seen by shard me, which began waiting at began for
// up to wait. It also refuses a mark dated outside that wait (within).
func (m Meeting) check(me int, began time.Time, wait time.Duration) error {
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
	for _, k := range m.Marks {
		if err := k.within(me, began, wait); err != nil {
			return err
		}
	}
	return nil
}

// within refuses k, as read by shard me, if it says its shard was ready
// more than MaxSkew after me read it, or before me began waiting by more
// than wait and MaxSkew: no shard of this run could have been. The
// volume's stamp does not vouch for it: a host whose clock is wrong, on a
// volume stamped by the writer's clock, passes CheckClocks, and would
// move the strike as far.
func (k Mark) within(me int, began time.Time, wait time.Duration) error {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch ready := k.Ready(); {
	case ready.After(k.seen.Add(MaxSkew)):
		return fmt.Errorf("%w: shard %d's mark (%s) says it was ready at %s, %v after shard %d read it at %s by its own clock: "+
			"no shard is ready in the future; check the clock of %s", ErrRefused, k.Shard, k.Host, stamp(ready),
			ready.Sub(k.seen).Round(time.Millisecond), me, stamp(k.seen), k.Host)
	case ready.Before(began.Add(-wait - MaxSkew)):
		return fmt.Errorf("%w: shard %d's mark (%s) says it was ready at %s, %v before shard %d began waiting at %s, "+
			"longer than the %v it waits: a mark from an earlier run? give each run a directory of its own", ErrRefused, k.Shard,
			k.Host, stamp(ready), began.Sub(ready).Round(time.Millisecond), me, stamp(began), wait)
	}
	return nil
}

// StillOn refuses to strike, in dir, if a shard has given up waiting
// since the meeting: the strike's last look before it is made. Anything
// else in a gave-up file's place (a link, a FIFO, another user's file)
// is refused too.
func StillOn(dir string, shards int) error {
	d, err := datadir.OpenSharedDir(dir)
	if err != nil {
		return refused(err)
	}
	defer d.Close()
	for i := range shards {
		f, err := datadir.OpenSharedFile(d, gaveUpName(i), os.O_RDONLY, 0)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return refused(err)
		}
		f.Close()
		return fmt.Errorf("%w: shard %d gave up waiting for the others", ErrRefused, i)
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
