package plan

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultDescriptors is Host.Descriptors when unset: the file descriptors
// a process may hold where nothing was measured.
const DefaultDescriptors = 20_000

// DevicesPerChild is how many TCP devices a child process runs when a
// fleet is too large to hold both ends of every connection in one process.
const DevicesPerChild = 5000

// DescriptorBudget is what a run may spend of the host's descriptors: 95 %
// of them (the rest: the runtime, files, the reports).
func (h Host) DescriptorBudget() int { return cmp.Or(h.Descriptors, DefaultDescriptors) * 95 / 100 }

// ChildSize is how many devices a child process runs: DevicesPerChild
// agents, or as many wire devices as its descriptors hold (one each); the
// plan's TCPPerProcess if fewer.
func (p Plan) ChildSize() int {
	per := DevicesPerChild
	if p.Engine == Wire {
		per = p.DescriptorBudget()
	}
	if p.TCPPerProcess > 0 {
		per = min(per, p.TCPPerProcess)
	}
	return per
}

// MaxTCPDevices is how many TCP devices one process holds with both ends
// (two descriptors each).
func (h Host) MaxTCPDevices() int { return h.DescriptorBudget() / 2 }

// Proxied reports whether the run puts the fault proxy in the devices'
// path. Against an external broker it does for every disruptive scenario.
// Against any broker it does for the path's own faults, anywhere on the
// timeline.
func (p Plan) Proxied() bool {
	return p.Storm.BreaksPath() || p.Storm.BreaksABroker() && p.Broker != ""
}

// isTLSURL reports whether a broker URL is MQTT over TLS.
func isTLSURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && IsTLSScheme(u.Scheme)
}

// ProxyDescriptors is how many descriptors each device costs this process
// in a run through the fault proxy with its agent here. They are the
// device's socket, the proxy's two, and the in-process broker's over TCP
// (in memory, none). Beyond AgentsBesideProxy the agents run in children.
func (p Plan) ProxyDescriptors() int {
	switch {
	case p.Broker != "":
		return 3
	case p.Transport == TCP || p.Transport == TLS:
		return 4
	}
	return 0
}

// AgentsBesideProxy is how many devices' agents a run through the proxy
// keeps in its own process.
func (p Plan) AgentsBesideProxy() int {
	n := p.DescriptorBudget() / p.ProxyDescriptors()
	if p.TCPPerProcess > 0 && p.RemoteAgentsReachProxy() {
		n = min(n, p.TCPPerProcess)
	}
	return n
}

// ProxyHostDescriptors is what each device costs this process when its
// agent runs in a child: the proxy's two, and the in-process broker's one.
func (p Plan) ProxyHostDescriptors() int {
	if p.Broker != "" {
		return 2
	}
	return 3
}

// RemoteAgentsReachProxy reports whether child agents can go through the
// proxy: over TCP, or TLS to the in-process broker, whose certificate
// names the loopback address the proxy listens on. An external TLS broker
// is verified by its own name, which a child dialling the proxy's address
// does not know.
func (p Plan) RemoteAgentsReachProxy() bool {
	u, err := url.Parse(p.Broker)
	return p.Broker == "" || err != nil || !IsTLSScheme(u.Scheme)
}

// NeedsChildren reports whether the agents run in child processes. Over
// TCP, one process holds the broker's and the devices' descriptors for at
// most MaxTCPDevices devices. It holds the proxy's as well for fewer (see
// AgentsBesideProxy).
func (p Plan) NeedsChildren() bool {
	switch {
	case p.Proxied():
		return p.ProxyDescriptors() > 0 && p.SliceSize() > p.AgentsBesideProxy()
	case p.Broker == "" && (p.Transport == TCP || p.Transport == TLS):
		return p.SliceSize() > cmp.Or(p.TCPPerProcess, p.MaxTCPDevices())
	}
	return false
}

// ProxiableBrokerURL reports whether the fault proxy can stand in front of
// the broker at raw: MQTT over TCP, or TLS, which it passes through.
func ProxiableBrokerURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Port() != "" && (u.Scheme == "tcp" || u.Scheme == "mqtt" || IsTLSScheme(u.Scheme))
}

// IsTLSScheme reports whether a broker URL's scheme is MQTT over TLS.
func IsTLSScheme(s string) bool { return s == "ssl" || s == "tls" || s == "mqtts" }

// What a run holds at its peak, resident, per device and on top. Measured
// with /usr/bin/time -f %M on devicesim run -policy fleet-safe -events off
// (docs/large-fleets.md, docs/wire.md). Real agents on the in-memory
// transport held about 115 KiB each. A wire device beside the in-process
// broker, whose sessions then dominate, about 66 KiB; through the fault
// proxy to an external broker, with the proxy's two connections, about
// 39 KiB. The virtual engine held about 104 bytes a device: a 64-byte
// device, a 24-byte event and the report's 10 bytes of counters. The
// figures are rounded up. A refusal should never meet a fleet that would
// have fit by a hair, nor a run die of one that did not.
const (
	agentFootprint        = 128 << 10
	wireFootprint         = 80 << 10
	wireExternalFootprint = 48 << 10
	virtualFootprint      = 112
	baseFootprint         = 256 << 20
)

// Footprint estimates the memory a run of p holds at its peak, in bytes. It
// counts its devices on its engine, this shard's where p runs one.
// Children's agents are included, since they share the machine.
func (p Plan) Footprint() uint64 {
	return baseFootprint + uint64(p.Shard.Size(p.Devices))*p.perDevice()
}

func (p Plan) perDevice() uint64 {
	switch {
	case p.Engine == Virtual:
		return virtualFootprint
	case p.Engine == Wire && p.Broker != "":
		return wireExternalFootprint
	case p.Engine == Wire:
		return wireFootprint
	}
	return agentFootprint
}

// CheckFits refuses a run whose Footprint is more than available bytes,
// naming the largest fleet that fits on each engine that could run it.
// available 0 (not known) checks nothing.
func (p Plan) CheckFits(available uint64) error {
	if available == 0 || p.Footprint() <= available {
		return nil
	}
	largest := func(perDevice uint64) int {
		if available <= baseFootprint {
			return 0
		}
		return int(min((available-baseFootprint)/perDevice, uint64(math.MaxInt32)))
	}
	fits := largest(p.perDevice())
	if p.Shard.Count > 0 {
		msg := fmt.Sprintf("shard %s runs %s of %s devices, which need about %s (about %s a device); this machine has %s available: "+
			"at most %s fit", p.Shard, Thousands(p.SliceSize()), Thousands(p.Devices), bytesOf(p.Footprint()), bytesOf(p.perDevice()),
			bytesOf(available), Thousands(fits))
		if fits > 0 {
			msg += fmt.Sprintf(": run %d shards or more, or give each more memory", (p.Devices+fits-1)/fits)
		}
		return errors.New(msg)
	}
	msg := fmt.Sprintf("%s devices on the %s engine need about %s (about %s a device); this machine has %s available: at most %s fit",
		Thousands(p.Devices), p.Engine, bytesOf(p.Footprint()), bytesOf(p.perDevice()), bytesOf(available), Thousands(fits))
	if p.Engine == Agents {
		w := p
		w.Engine = Wire
		if w.Validate() == nil {
			msg += fmt.Sprintf(", or %s on -engine wire", Thousands(largest(w.perDevice())))
		}
	}
	if p.Engine != Virtual {
		v := p
		v.Engine = Virtual
		if v.Validate() == nil {
			msg += fmt.Sprintf(", or %s on -engine virtual", Thousands(largest(virtualFootprint)))
		}
	}
	if p.Broker != "" && p.Shard.Count == 0 {
		msg += ", or -shard slices of it on several machines"
	}
	return errors.New(msg)
}

// AvailableMemory is the memory this machine can give a run now, in bytes:
// Linux's MemAvailable, or less where the process's control group (a
// container's, a pod's) leaves less; 0 where neither can be read.
func AvailableMemory() uint64 { return availableMemory("/") }

// availableMemory is AvailableMemory with the files under root.
func availableMemory(root string) uint64 {
	avail := memAvailable(filepath.Join(root, "proc/meminfo"))
	if room, ok := cgroupRoom(root); ok && (avail == 0 || room < avail) {
		return max(room, 1) // none left, which 0 (not known) would not say
	}
	return avail
}

// memAvailable reads MemAvailable from a /proc/meminfo; 0 if it cannot.
func memAvailable(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) == 3 && string(f[0]) == "MemAvailable:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupRoom is what the memory limits of this process's control group
// and its parents leave: the least of limit less usage, at each level that
// sets one (cgroup v2's memory.max, v1's memory.limit_in_bytes). ok is
// false where no level sets a limit.
func cgroupRoom(root string) (room uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		base, limit, usage := "", "", ""
		switch {
		case parts[0] == "0" && parts[1] == "":
			base, limit, usage = "sys/fs/cgroup", "memory.max", "memory.current"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			base, limit, usage = "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		base = filepath.Join(root, base)
		dir := filepath.Join(base, parts[2])
		if _, err := os.Stat(dir); err != nil {
			dir = base // a container sees its own group as the root
		}
		for ; ; dir = filepath.Dir(dir) {
			l, lerr := readBytes(filepath.Join(dir, limit))
			u, uerr := readBytes(filepath.Join(dir, usage))
			if lerr == nil && uerr == nil && l < 1<<60 { // v1 writes "no limit" as nearly 2^63
				r := l - min(u, l)
				if !ok || r < room {
					room, ok = r, true
				}
			}
			if dir == base || len(dir) <= len(base) {
				break
			}
		}
	}
	return room, ok
}

// readBytes reads a control group's byte count; "max" (no limit) is an
// error.
func readBytes(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

func bytesOf(b uint64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(b)/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", b)
}

// Thousands writes n with thousands separators: 1,000,000.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
