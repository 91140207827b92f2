package fleetsim

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// devicesPerChild is how many TCP devices a child process runs when a fleet
// is too large to hold both ends of every connection in one process.
const devicesPerChild = 5000

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

// needsChildren: over TCP, one process holds the broker's and the devices'
// descriptors for at most maxTCPDevices devices, and the proxy's as well
// for fewer (see agentsBesideProxy).
func (c Config) needsChildren() bool {
	switch {
	case c.proxied():
		return c.proxyDescriptors() > 0 && c.Devices > c.agentsBesideProxy()
	case c.Broker == "" && (c.Transport == TCP || c.Transport == TLS):
		return c.Devices > cmp.Or(c.TCPPerProcess, maxTCPDevices)
	}
	return false
}

// spawnChildren starts the agent processes for a TCP fleet too large for one
// process: shard i of k each, against url (the in-process broker, or the
// fault proxy in front of a broker).
func (r *run) spawnChildren(url string) error {
	exe := r.c.Exe
	if exe == "" {
		return fmt.Errorf("%d TCP devices run in child processes: Config.Exe must name the devicesim binary", r.c.Devices)
	}
	dir, err := os.MkdirTemp("", "devicesim-shards-")
	if err != nil {
		return err
	}
	r.childDir = dir
	per := devicesPerChild
	if r.c.TCPPerProcess > 0 {
		per = min(per, r.c.TCPPerProcess)
	}
	k := (r.c.Devices + per - 1) / per
	var ca []string // a TLS fleet's children issue their devices' certificates from the broker's CA
	if r.c.Transport == TLS && r.broker != nil {
		f, err := r.broker.WriteCAFiles(dir)
		if err != nil {
			return err
		}
		ca = []string{"-ca", f.CA, "-ca-key", f.Key}
	}
	scenario := Observe
	if r.c.Scenario == BootStorm {
		scenario = BootStorm
	}
	for i := range k {
		out := filepath.Join(dir, "shard-"+strconv.Itoa(i))
		args := []string{"run", "-hold-stdin", "-broker", url, "-shard", fmt.Sprintf("%d/%d", i, k),
			"-devices", strconv.Itoa(r.c.Devices), "-scenario", scenario, "-policy", r.c.Policy,
			"-max-backoff", r.c.MaxBackoff.String(), "-retry-cap", strconv.Itoa(r.c.RetryCap),
			"-time-scale", strconv.FormatFloat(r.c.TimeScale, 'g', -1, 64), "-seed", strconv.FormatUint(r.c.Seed, 10),
			"-telemetry", strconv.FormatFloat(r.c.Telemetry, 'g', -1, 64), "-out", out}
		args = append(args, ca...)
		if r.proxy != nil {
			// Their devices' events come back as they happen, and a black
			// hole's sessions start spread over a keepalive here too.
			args = append(args, "-stream-events", "-boot-spread", r.unscale(r.timing.BootSpread).String())
		}
		if r.c.KeepAlive > 0 {
			args = append(args, "-keepalive", r.c.KeepAlive.String())
		}
		if r.c.PingTimeout > 0 {
			args = append(args, "-ping-timeout", r.c.PingTimeout.String())
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

// releaseChildren tells every child when the disruption began, waits for
// their reports and returns them.
func (r *run) releaseChildren(t0 time.Time) ([]*Report, error) {
	var reports []*Report
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
		rep, err := ReadReport(ch.out)
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
func (r *run) held(ctx context.Context, start time.Time, before uint64) (*Report, error) {
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
	rep.RecoveryJSON.AllRecovered = r.obs.connected() == len(r.ids)
	rep.Host.WallS, rep.Host.MemoryPerDeviceKB = time.Since(start).Seconds(), float64(memInUse()-before)/float64(len(r.ids))/1024
	return rep, nil
}
