package main

import (
	"bytes"
	"context"
	"flag"
	"strconv"
	"testing"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

var costDevices = flag.Int("cost.devices", 18_000, "BenchmarkCostOfAConnection's fleet")

// BenchmarkCostOfAConnection is what one device's connection costs the
// process that runs it, on each engine that runs real connections: the
// devices in child processes of their own (18,000: one of wire devices,
// four of agents), against the in-process broker
// over loopback TCP in this one, through a throttled restart at time
// scale 1 (the same storm in real time on both engines). It reports
// the child's peak resident memory and CPU a device, and the kernel's TCP
// buffers (machine-wide). make bench compares the engines (benchstat -col
// /engine).
func BenchmarkCostOfAConnection(b *testing.B) {
	b.Setenv("HERDGUARD_DEVICESIM_CHILD", "1") // inherited by the children only
	for _, engine := range []string{"agents", "wire"} {
		b.Run("engine="+engine, func(b *testing.B) {
			var h report.Host
			for range b.N {
				dir := b.TempDir()
				var out bytes.Buffer
				args := []string{"run", "-engine", engine, "-transport", "tcp", "-devices", strconv.Itoa(*costDevices),
					"-scenario", "throttled-restart", "-policy", "fleet-safe", "-admit-rate", "1000", "-time-scale", "1", "-out", dir}
				if *costDevices <= (plan.Host{}).MaxTCPDevices() {
					// a fleet this process could hold beside its broker: in two children all the same
					args = append(args, "-tcp-per-process", strconv.Itoa(*costDevices/2))
				}
				err := run(context.Background(), args, noenv, nil, &out, &out)
				if err != nil {
					b.Fatalf("%v\n%s", err, out.String())
				}
				r, err := report.ReadReport(dir)
				if err != nil {
					b.Fatal(err)
				}
				h = r.Host
			}
			b.ReportMetric(h.ResidentPerDeviceKB, "resident-KiB/conn")
			b.ReportMetric(h.CPUPerDeviceMS, "cpu-ms/conn")
			b.ReportMetric(h.KernelTCPKB, "kernel-tcp-KiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
