package faultproxy_test

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/testbroker"
)

// connectOnce opens a TCP connection to addr, sends an MQTT CONNECT and
// reads the CONNACK: one device's connect, as the broker's latency.
func connectOnce(addr string, connect []byte) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
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

// BenchmarkConnectLatency connects at 5,000 a second, directly to the
// broker and through the proxy, and reports the connect latency's p50 and
// p99 (make bench compares the two with benchstat).
func BenchmarkConnectLatency(b *testing.B) {
	broker, err := testbroker.New(testbroker.Config{Transport: testbroker.TCP})
	if err != nil {
		b.Fatal(err)
	}
	defer broker.Close()
	u, _ := url.Parse(broker.URL())
	p, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(u.Host), Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct{ impl, addr string }{{"direct", u.Host}, {"proxy", p.Addr()}} {
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
