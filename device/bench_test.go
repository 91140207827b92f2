package device_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/testbroker"
)

func memInUse() (heap, stack uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}

// BenchmarkConnectedFootprint connects b.N clients to an in-memory broker and
// reports heap and stack per connected client (broker side included), for
// bare paho clients and for Agents, in the same run.
func BenchmarkConnectedFootprint(b *testing.B) {
	b.Run("impl=paho", func(b *testing.B) {
		brk, _ := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
		defer brk.Close()
		h0, s0 := memInUse()
		clients := make([]paho.Client, b.N)
		for i := range clients {
			c := paho.NewClient(brk.ClientOptions("dev-" + strconv.Itoa(i)))
			if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				b.Fatal("connect failed")
			}
			clients[i] = c
		}
		h1, s1 := memInUse()
		b.ReportMetric(float64(h1-h0)/float64(b.N), "heap-B/client")
		b.ReportMetric(float64(s1-s0)/float64(b.N), "stack-B/client")
		for _, c := range clients {
			c.Disconnect(0)
		}
	})
	b.Run("impl=agent", func(b *testing.B) {
		brk, _ := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
		defer brk.Close()
		tm := device.DefaultTiming()
		tm.BootSpread = time.Millisecond
		h0, s0 := memInUse()
		agents := make([]*device.Agent, b.N)
		for i := range agents {
			a, err := device.New(device.Config{Broker: brk.URL(), ClientID: "dev-" + strconv.Itoa(i), Dial: brk.DialContext,
				Timing: &tm, Source: rand.NewPCG(uint64(i), 1)})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			agents[i] = a
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, a := range agents {
			if err := a.AwaitConnection(ctx); err != nil {
				b.Fatal(err)
			}
		}
		h1, s1 := memInUse()
		b.ReportMetric(float64(h1-h0)/float64(b.N), "heap-B/client")
		b.ReportMetric(float64(s1-s0)/float64(b.N), "stack-B/client")
		for _, a := range agents {
			_ = a.Stop(ctx)
		}
	})
}
