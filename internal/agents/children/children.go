// Package children runs part of a fleet's agents in child devicesim
// processes, when a TCP fleet needs more descriptors than one process may
// hold. Each child gets its shard of the plan as a file. It runs its
// agents against this run's broker (or the fault proxy in front of one).
// It holds until told when the disruption began, and then writes its
// report. A child whose agents go through this run's proxy also streams
// its devices' records as they happen (attempt.NewStreamWriter), for the
// parent to follow.
package children

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// Config is what a fleet's children are started with: a plain value,
// copied by Spawn. The zero Config starts none (Spawn needs Plan.Exe).
type Config struct {
	// Plan is the parent's; each child runs its fleet, shard by shard.
	Plan plan.Plan
	// URL is the broker, or the fault proxy, the children's agents connect
	// to.
	URL string
	// CA, if set (a TLS fleet), writes into dir the files a child issues
	// its devices' certificates from.
	CA func(dir string) (plan.Target, error)
	// BootSpread, if > 0, is the window the children spread their devices'
	// first connects over (unscaled), as the parent does its own.
	BootSpread time.Duration
	// Follow, if set, makes every child stream its records on a pipe, which
	// Follow reads until the child closes it (shard: the child's index).
	Follow func(shard int, rd io.Reader) error
	// Warn receives what the run should know but need not stop for.
	Warn func(format string, args ...any)
}

// Children are the child processes of one run. The zero value has none;
// its methods are called from the run's goroutine, one at a time.
type Children struct {
	procs []*child
	dir   string
}

// child is one devicesim process running a shard of the fleet's agents.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	done  chan struct{} // closed when the process has exited, with err set
	err   error
	// followed, for a child that streams its records, carries the end of
	// following them (nil: all read).
	followed chan error
}

// Spawn starts the children of c.Plan's fleet, or of its shard: as many
// as the plan's ChildSize a child.
// What it started before an error, Kill ends.
func Spawn(c Config) (*Children, error) {
	cs := &Children{}
	exe := c.Plan.Exe
	if exe == "" {
		return cs, fmt.Errorf("%d TCP devices run in child processes: Plan.Exe must name the devicesim binary", c.Plan.Devices)
	}
	dir, err := os.MkdirTemp("", "devicesim-shards-")
	if err != nil {
		return cs, err
	}
	cs.dir = dir
	per := c.Plan.ChildSize()
	k := (c.Plan.SliceSize() + per - 1) / per
	var ca plan.Target
	if c.CA != nil {
		if ca, err = c.CA(dir); err != nil {
			return cs, err
		}
	}
	for i := range k {
		ch, err := cs.spawn(c, ca, i, k)
		if err != nil {
			return cs, err
		}
		cs.procs = append(cs.procs, ch)
	}
	return cs, nil
}

// Len is how many children the run has.
func (cs *Children) Len() int { return len(cs.procs) }

// spawn starts child i of k.
func (cs *Children) spawn(c Config, ca plan.Target, i, k int) (*child, error) {
	out := plan.Shard{Index: i}.Dir(cs.dir)
	planFile, err := writePlan(c, ca, cs.dir, c.Plan.Shard.Split(i, k))
	if err != nil {
		return nil, err
	}
	args := []string{"run", "-child", planFile, "-out", out}
	if c.Follow != nil {
		args = append(args, "-stream-events") // their devices' records come back as they happen
	}
	cmd := exec.Command(c.Plan.Exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var records *os.File
	if c.Follow != nil {
		var w *os.File
		if records, w, err = os.Pipe(); err != nil {
			_ = stdin.Close()
			return nil, err
		}
		cmd.ExtraFiles = []*os.File{w} // the child's descriptor 3
		defer w.Close()                // the child's copy stays open until it exits
	}
	if err := cmd.Start(); err != nil {
		if records != nil {
			_ = records.Close()
		}
		return nil, fmt.Errorf("starting shard %d: %w", i, err)
	}
	ch := &child{cmd: cmd, stdin: stdin, out: out, done: make(chan struct{})}
	if records != nil {
		ch.followed = make(chan error, 1)
		go func() {
			defer records.Close()
			err := c.Follow(i, records)
			if err != nil && c.Warn != nil {
				// Say so now: the run is about to wait for devices it will
				// never hear from. Keep reading, so that the child is never
				// left writing to nobody.
				c.Warn("shard %d: %v: its later records are lost to this run", i, err)
				_, _ = io.Copy(io.Discard, records)
			}
			ch.followed <- err
		}()
	}
	go func() {
		ch.err = cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

// writePlan writes the plan of the child that runs shard of c's fleet into
// dir, and returns its path. The plan is the run's own fleet, holding for
// the disruption the parent makes (observe), or booting (boot-storm).
func writePlan(c Config, ca plan.Target, dir string, shard plan.Shard) (string, error) {
	p := plan.Plan{Fleet: c.Plan.Fleet, Host: c.Plan.Host, Target: ca}
	p.Broker, p.Shard, p.Exe, p.TCPPerProcess = c.URL, shard, "", 0
	p.Storm = plan.Storm{Scenario: plan.Observe, Duration: c.Plan.Duration}
	if c.Plan.Scenario == plan.BootStorm {
		p.Scenario = plan.BootStorm
	}
	if c.BootSpread > 0 {
		p.BootSpread = c.BootSpread
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("plan-%d-of-%d.json", shard.Index, shard.Count))
	return path, os.WriteFile(path, b, 0o600)
}

// ReadPlan reads a plan a parent run wrote for its child (the devicesim
// run -child flag).
func ReadPlan(path string) (plan.Plan, error) {
	var p plan.Plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Release tells every child when the disruption began, waits for their
// reports and returns them.
func (cs *Children) Release(t0 time.Time) ([]*report.Report, error) {
	var reports []*report.Report
	for i, ch := range cs.procs {
		fmt.Fprintf(ch.stdin, "t0 %d\n", t0.UnixNano())
		_ = ch.stdin.Close()
		select {
		case <-ch.done:
			if ch.err != nil {
				return nil, fmt.Errorf("shard %d: %w", i, ch.err)
			}
		case <-time.After(2 * time.Minute):
			_ = ch.cmd.Process.Kill()
			return nil, fmt.Errorf("shard %d did not report within 2 minutes", i)
		}
		if err := ch.awaitFollowed(); err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		rep, err := report.ReadReport(ch.out)
		if err != nil {
			return nil, err
		}
		reports = append(reports, rep)
	}
	return reports, nil
}

// Kill ends every child still running (given 5 s to finish), and removes
// their files.
func (cs *Children) Kill() {
	for _, ch := range cs.procs {
		_ = ch.stdin.Close()
		select {
		case <-ch.done:
		case <-time.After(5 * time.Second):
			_ = ch.cmd.Process.Kill()
			<-ch.done
		}
		_ = ch.awaitFollowed()
	}
	if cs.dir != "" {
		_ = os.RemoveAll(cs.dir)
	}
}

// awaitFollowed waits, once the child has exited, until its records are
// all read.
func (ch *child) awaitFollowed() error {
	if ch.followed == nil {
		return nil
	}
	err := <-ch.followed
	ch.followed = nil
	return err
}

// ReadHold is a child's wait for its parent's "t0 <unix nanoseconds>"
// line: when the disruption began, which the child reports from.
func ReadHold(in io.Reader) (time.Time, error) {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting for the parent's t0: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "t0" {
		return time.Time{}, fmt.Errorf("unexpected line from the parent: %q", line)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ns), nil
}
