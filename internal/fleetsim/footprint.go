package fleetsim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
)

// What a run holds at its peak, resident, per device and on top: measured
// with /usr/bin/time -f %M on devicesim run -policy fleet-safe -events off
// (docs/large-fleets.md): real agents on the in-memory transport 2.33 GB
// at 20,000 devices (about 115 KiB each), the virtual engine 390 MB at
// 1,000,000 (about 370 bytes each). Rounded up: a refusal should never
// meet a fleet that would have fit by a hair, nor a run die of one that
// did not.
const (
	agentFootprint   = 128 << 10
	virtualFootprint = 512
	baseFootprint    = 256 << 20
)

// Footprint estimates the memory a run of c holds at its peak, in bytes:
// its devices (this shard's, where c runs one) on its engine, children's
// agents included, since they share the machine.
func (c Config) Footprint() uint64 {
	return baseFootprint + uint64(c.shardDevices())*c.perDevice()
}

func (c Config) perDevice() uint64 {
	if c.Engine == Virtual {
		return virtualFootprint
	}
	return agentFootprint
}

// shardDevices counts the devices this shard runs, without listing them.
func (c Config) shardDevices() int {
	if c.Shard.Count == 0 {
		return c.Devices
	}
	n := c.Devices / c.Shard.Count
	if c.Shard.Index < c.Devices%c.Shard.Count {
		n++
	}
	return n
}

// CheckFits refuses a run whose Footprint is more than available bytes,
// naming the largest fleet that fits on each engine that could run it.
// available 0 (not known) checks nothing.
func (c Config) CheckFits(available uint64) error {
	if available == 0 || c.Footprint() <= available {
		return nil
	}
	largest := func(perDevice uint64) int {
		if available <= baseFootprint {
			return 0
		}
		return int(min((available-baseFootprint)/perDevice, uint64(math.MaxInt32)))
	}
	msg := fmt.Sprintf("%s devices on the %s engine need about %s (about %s a device); this machine has %s available: at most %s fit",
		thousands(c.Devices), c.Engine, bytesOf(c.Footprint()), bytesOf(c.perDevice()), bytesOf(available), thousands(largest(c.perDevice())))
	if c.Engine != Virtual {
		v := c
		v.Engine = Virtual
		if v.Validate() == nil {
			msg += fmt.Sprintf(", or %s on -engine virtual", thousands(largest(virtualFootprint)))
		}
	}
	if c.Broker != "" && c.Shard.Count == 0 {
		msg += ", or -shard slices of it on several machines"
	}
	return errors.New(msg)
}

// AvailableMemory is the memory this machine can give a run now, in bytes:
// Linux's MemAvailable; 0 where it cannot be read.
func AvailableMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
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

// thousands writes n with thousands separators: 1,000,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
