package hostload

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// Resident is the process's resident memory now and at its peak (Linux's
// VmRSS and VmHWM), in bytes; 0 and 0 where they cannot be read.
func Resident() (now, peak uint64) { return ResidentOf("self") }

// ResidentOf is Resident of the process pid ("self", or a number).
func ResidentOf(pid string) (now, peak uint64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		name, value, _ := strings.Cut(s.Text(), ":")
		switch name {
		case "VmRSS":
			now = kib(value)
		case "VmHWM":
			peak = kib(value)
		}
	}
	return now, peak
}

// kib reads "   1234 kB" as bytes.
func kib(s string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(s), " kB"), 10, 64)
	return n << 10
}

// KernelTCP is the memory the kernel's TCP sockets hold in their buffers,
// machine-wide (/proc/net/sockstat's TCP mem, in pages), in bytes; 0 where
// it cannot be read. An idle socket holds none; its own structures are
// the kernel's slab, which this does not count.
func KernelTCP() uint64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for k := 0; k+1 < len(f); k += 2 {
			if f[k] == "mem" {
				pages, _ := strconv.ParseUint(f[k+1], 10, 64)
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	return 0
}

// CPU is the user and system CPU time the process has had; 0 where it
// cannot be read.
func CPU() time.Duration {
	d, _ := cpuTime()
	return d
}
