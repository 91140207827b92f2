package faultproxy_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/mosquittotest"
)

// connectOnce opens a TCP connection to addr, sends an MQTT CONNECT and
// reads the CONNACK: one device's connect, as the broker's latency. It
// leaves with a reset, so that no TIME_WAIT piles up on the loopback
// ports from one sub-benchmark to the next (the proxy passes it on).
func connectOnce(addr string, connect []byte) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.(*net.TCPConn).SetLinger(0); _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(connect); err != nil {
		return 0, err
	}
	var connack [4]byte
	if _, err := io.ReadFull(c, connack[:]); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// relay is the least a TCP hop can do: accept, dial the broker, copy both
// ways. It is the floor the fault proxy is compared with.
func relay(b *testing.B, upstream string) string {
	return serve(b, func(c net.Conn) {
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			_ = c.Close()
			return
		}
		done := make(chan struct{})
		go func() { _, _ = io.Copy(c, up); _ = c.Close(); close(done) }()
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).SetLinger(0) // the device reset: so does the relay
		_ = up.Close()
		<-done
	})
}

// BenchmarkConnectLatency connects at 5,000 a second to mosquitto, in its
// own process as a production broker is: directly, through a bare relay,
// and through the fault proxy, and reports each connect latency's p50 and
// p99 (make bench compares the three with benchstat). The load and the
// hop share this process, as devicesim's agents and its proxy do.
func BenchmarkConnectLatency(b *testing.B) {
	broker := mosquittotest.Start(b, "")
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(broker.Addr()), Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct{ impl, addr string }{{"direct", broker.Addr()}, {"relay", relay(b, broker.Addr())}, {"proxy", p.Addr()}} {
		b.Run("impl="+tc.impl, func(b *testing.B) {
			// Paced against the clock, not a limiter's timer (whose sleeps
			// overshoot at this rate): a late start is not waited for.
			const every = time.Second / 5000
			lat := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			var failed sync.Once
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
					time.Sleep(d)
				}
				cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
				cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, "bench-"+tc.impl+"-"+strconv.Itoa(i), 30
				var buf bytes.Buffer
				_ = cp.Write(&buf)
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, err := connectOnce(tc.addr, buf.Bytes())
					if err != nil {
						failed.Do(func() { b.Error(err) })
					}
					lat[i] = d
				}()
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
		})
	}
}

// BenchmarkSilentConnections holds 2,000 connections that send nothing,
// as a flood of half-open or idle clients would, and reports what each
// costs this process (heap and goroutine stacks, the clients' own sockets
// included, so an upper bound) and how many goroutines it keeps: let
// through to a broker that says nothing (path=open), and held for their
// CONNECT in an outage with Identify (path=identify; IdentifyTimeout ends
// each, MaxHeld bounds how many). MaxConns times this is what a proxy's
// limit can cost.
func BenchmarkSilentConnections(b *testing.B) {
	const n = 2000
	for _, identify := range []bool{false, true} {
		name := "path=open"
		if identify {
			name = "path=identify"
		}
		b.Run(name, func(b *testing.B) {
			var mu sync.Mutex
			var upstream []net.Conn // the silent broker's ends
			p, err := faultproxy.New(faultproxy.Config{Listen: "127.0.0.1:0", Identify: identify, IdentifyTimeout: time.Hour,
				MaxConns: n + 1, MaxHeld: n + 1,
				Upstream: func(context.Context) (net.Conn, error) {
					device, broker := net.Pipe()
					mu.Lock()
					upstream = append(upstream, broker)
					mu.Unlock()
					return device, nil
				}})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if identify {
				p.BeginOutage()
			}
			perConn := 2 // the pumps, each way
			if identify {
				perConn = 1 // the reader of its CONNECT
			}
			var bytesPer, goroutinesPer float64
			for b.Loop() {
				before, goroutines := footprint()
				clients := make([]net.Conn, 0, n)
				for range n {
					c, err := net.Dial("tcp", p.Addr())
					if err != nil {
						b.Fatal(err)
					}
					clients = append(clients, c)
				}
				for runtime.NumGoroutine() < goroutines+perConn*n {
					time.Sleep(time.Millisecond) // a benchmark's wait for the proxy's accepts; no test asserts on it
				}
				after, g := footprint()
				bytesPer, goroutinesPer = float64(after-before)/n, float64(g-goroutines)/n
				for _, c := range clients {
					_ = c.Close()
				}
				mu.Lock()
				for _, c := range upstream {
					_ = c.Close()
				}
				upstream = upstream[:0]
				mu.Unlock()
			}
			b.ReportMetric(bytesPer, "B/conn")
			b.ReportMetric(goroutinesPer, "goroutines/conn")
		})
	}
}

// footprint is the process's heap and stacks in use after a collection,
// and its goroutines.
func footprint() (uint64, int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse, runtime.NumGoroutine()
}
