package agents

import (
	"bufio"
	"context"
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

// child is a devicesim process running a shard of the fleet's agents
// against this run's broker, or its fault proxy, holding until told when
// the disruption began.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	done  chan struct{} // closed when the process has exited, with err set
	err   error
	// followed, for agents that go through this run's proxy, carries the
	// end of following their events (nil: all read).
	followed chan error
}

// spawnChildren starts the agent processes for a TCP fleet too large for one
// process: shard i of k each, against url (the in-process broker, or the
// fault proxy in front of a broker).
func (r *run) spawnChildren(url string) error {
	exe := r.c.Exe
	if exe == "" {
		return fmt.Errorf("%d TCP devices run in child processes: Plan.Exe must name the devicesim binary", r.c.Devices)
	}
	dir, err := os.MkdirTemp("", "devicesim-shards-")
	if err != nil {
		return err
	}
	r.childDir = dir
	per := plan.DevicesPerChild
	if r.c.TCPPerProcess > 0 {
		per = min(per, r.c.TCPPerProcess)
	}
	k := (r.c.Devices + per - 1) / per
	var ca plan.Target // a TLS fleet's children issue their devices' certificates from the broker's CA
	if r.c.Transport == plan.TLS && r.broker != nil {
		f, err := r.broker.WriteCAFiles(dir)
		if err != nil {
			return err
		}
		ca = plan.Target{TLSCA: f.CA, TLSCAKey: f.Key}
	}
	for i := range k {
		out := filepath.Join(dir, "shard-"+strconv.Itoa(i))
		planFile, err := r.writeChildPlan(dir, url, plan.Shard{Index: i, Count: k}, ca)
		if err != nil {
			return err
		}
		args := []string{"run", "-child", planFile, "-out", out}
		if r.proxy != nil {
			args = append(args, "-stream-events") // their devices' records come back as they happen
		}
		cmd := exec.Command(exe, args...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		var events *os.File
		if r.proxy != nil {
			var w *os.File
			if events, w, err = os.Pipe(); err != nil {
				_ = stdin.Close()
				return err
			}
			cmd.ExtraFiles = []*os.File{w} // the child's descriptor 3
			defer w.Close()                // the child's copy stays open until it exits
		}
		if err := cmd.Start(); err != nil {
			if events != nil {
				_ = events.Close()
			}
			return fmt.Errorf("starting shard %d: %w", i, err)
		}
		ch := &child{cmd: cmd, stdin: stdin, out: out, done: make(chan struct{})}
		if events != nil {
			ch.followed = make(chan error, 1)
			go func() {
				defer events.Close()
				err := r.devlog.follow(events, r.c.Metrics)
				if err != nil {
					// Say so now: the run is about to wait for devices it
					// will never hear from. Keep reading, so that the child
					// is never left writing to nobody.
					r.warn("shard %d: %v: its later events are lost to this run", i, err)
					_, _ = io.Copy(io.Discard, events)
				}
				ch.followed <- err
			}()
		}
		go func() {
			ch.err = cmd.Wait()
			close(ch.done)
		}()
		r.children = append(r.children, ch)
	}
	return nil
}

// writeChildPlan writes the plan of the child that runs shard of the fleet
// against url into dir, and returns its path: the run's own fleet, holding
// for the disruption this run makes (observe), or booting (boot-storm),
// with every device's first connect spread as this run's are.
func (r *run) writeChildPlan(dir, url string, shard plan.Shard, ca plan.Target) (string, error) {
	p := plan.Plan{Fleet: r.c.Fleet, Host: r.c.Host, Target: ca}
	p.Broker, p.Shard, p.Exe, p.TCPPerProcess = url, shard, "", 0
	p.Storm = plan.Storm{Scenario: plan.Observe, Duration: r.c.Duration}
	if r.c.Scenario == plan.BootStorm {
		p.Scenario = plan.BootStorm
	}
	if r.proxy != nil { // a black hole's sessions start spread over a keepalive there too
		p.BootSpread = r.unscale(r.timing.BootSpread)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("plan-%d.json", shard.Index))
	return path, os.WriteFile(path, b, 0o600)
}

// ReadChildPlan reads a plan a parent run wrote for its child (the
// devicesim run -child flag).
func ReadChildPlan(path string) (plan.Plan, error) {
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

// releaseChildren tells every child when the disruption began, waits for
// their reports and returns them.
func (r *run) releaseChildren(t0 time.Time) ([]*report.Report, error) {
	var reports []*report.Report
	for i, ch := range r.children {
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

func (r *run) killChildren() {
	for _, ch := range r.children {
		_ = ch.stdin.Close()
		select {
		case <-ch.done:
		case <-time.After(5 * time.Second):
			_ = ch.cmd.Process.Kill()
			<-ch.done
		}
		_ = ch.awaitFollowed()
	}
	if r.childDir != "" {
		_ = os.RemoveAll(r.childDir)
	}
}

// awaitFollowed waits, once the child has exited, until its events are
// all read.
func (ch *child) awaitFollowed() error {
	if ch.followed == nil {
		return nil
	}
	err := <-ch.followed
	ch.followed = nil
	return err
}

// readHold reads the parent's "t0 <unix nanoseconds>" line.
func readHold(in io.Reader) (time.Time, error) {
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

// held is a child run's end: wait for the parent's t0, let the telemetry
// drain, and report the devices' own attempts from t0 on.
func (r *run) held(ctx context.Context, start time.Time, before uint64) (*report.Report, error) {
	t0, err := readHold(r.c.Hold)
	if err != nil {
		return nil, err
	}
	if r.c.Telemetry > 0 {
		if err := r.drainTelemetry(ctx); err != nil {
			return nil, err
		}
	}
	d := disruption{t0: t0, returned: t0}
	d.watched(r.obs.connected() == len(r.ids), r.c.MaxBackoff, r.c.TimeScale)
	rep, err := r.report(d)
	if err != nil {
		return nil, err
	}
	if r.c.Telemetry > 0 {
		rep.Telemetry = r.telemetry()
	}
	rep.Recovery.AllRecovered = r.obs.connected() == len(r.ids)
	rep.Host.WallS, rep.Host.MemoryPerDeviceKB = time.Since(start).Seconds(), float64(report.HeapInUse()-before)/float64(len(r.ids))/1024
	return rep, nil
}
