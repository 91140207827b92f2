package testbroker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/herdguard/herdguard/testbroker"
)

// BenchmarkRecorder is the cost the recorder adds to one connection attempt
// (accept, CONNECT and outcome), alone and with every core recording.
func BenchmarkRecorder(b *testing.B) {
	now := time.Now()
	b.Run("serial", func(b *testing.B) {
		r := &testbroker.Recorder{}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			r.RecordAttemptForBench(now, "dev")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		r := &testbroker.Recorder{}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.RecordAttemptForBench(now, "dev")
			}
		})
	})
}

// rawConnect opens a connection and completes the MQTT handshake by hand, so
// that the client side costs one socket or pipe and no goroutines: what is
// measured is the broker.
func rawConnect(b *testbroker.Broker, id string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if b.Transport() == testbroker.Memory {
		conn, err = b.Dial(nil, paho.ClientOptions{ConnectTimeout: 10 * time.Second})
	} else {
		conn, err = net.Dial("tcp", strings.TrimPrefix(b.URL(), "tcp://"))
	}
	if err != nil {
		return nil, err
	}
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier = "MQTT", 4, id
	cp.CleanSession, cp.Keepalive = true, 600
	if err := cp.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	ack, err := packets.ReadPacket(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if rc := ack.(*packets.ConnackPacket).ReturnCode; rc != 0 {
		conn.Close()
		return nil, fmt.Errorf("connack %d", rc)
	}
	return conn, nil
}

type mem struct{ heap, stack uint64 }

func memInUse() mem {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return mem{m.HeapInuse, m.StackInuse}
}

// BenchmarkBrokerConnect connects b.N raw clients (64 at a time) and keeps
// them connected: it reports connects per second the broker admitted and the
// broker's heap+stack per connected client.
func BenchmarkBrokerConnect(b *testing.B) {
	for _, tr := range []testbroker.Transport{testbroker.Memory, testbroker.TCP} {
		b.Run("transport="+string(tr), func(b *testing.B) {
			if tr == testbroker.TCP && b.N > 9000 {
				b.Skip("TCP costs two descriptors per client in one process: at most ~9,500 under a 20,000 limit")
			}
			brk, err := testbroker.New(testbroker.Config{Transport: tr})
			if err != nil {
				b.Fatal(err)
			}
			defer brk.Close()
			conns := make([]net.Conn, b.N)
			before := memInUse()
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < 64; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						c, err := rawConnect(brk, "dev-"+strconv.Itoa(i))
						if err != nil {
							failed.Add(1)
							continue
						}
						conns[i] = c
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d connects failed", f, b.N)
			}
			after := memInUse()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "connects/s")
			b.ReportMetric(float64(after.heap-before.heap)/float64(b.N), "heap-B/client")
			b.ReportMetric(float64(after.stack-before.stack)/float64(b.N), "stack-B/client")
			for _, c := range conns {
				c.Close()
			}
		})
	}
}

// TestScale connects real paho clients, all at once, to one broker in this
// process: 100,000 in-memory and 9,000 over TCP by default. It is not part of
// the default suite; run it with
//
//	HERDGUARD_SCALE=1 go test -run TestScale -v -timeout 30m ./testbroker/
//
// (HERDGUARD_SCALE_MEM and HERDGUARD_SCALE_TCP change the counts).
func TestScale(t *testing.T) {
	if os.Getenv("HERDGUARD_SCALE") == "" {
		t.Skip("set HERDGUARD_SCALE=1 to run the scale test")
	}
	counts := map[testbroker.Transport]int{testbroker.Memory: 100_000, testbroker.TCP: 9_000}
	for env, tr := range map[string]testbroker.Transport{"HERDGUARD_SCALE_MEM": testbroker.Memory, "HERDGUARD_SCALE_TCP": testbroker.TCP} {
		if v, err := strconv.Atoi(os.Getenv(env)); err == nil {
			counts[tr] = v
		}
	}
	for _, tr := range []testbroker.Transport{testbroker.Memory, testbroker.TCP} {
		n := counts[tr]
		if n == 0 {
			continue
		}
		t.Run(string(tr), func(t *testing.T) {
			brk, err := testbroker.New(testbroker.Config{Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer brk.Close()
			before := memInUse()
			clients := make([]paho.Client, n)
			var failed atomic.Int64
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for w := 0; w < 256; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= n {
							return
						}
						opts := brk.ClientOptions("dev-" + strconv.Itoa(i)).SetKeepAlive(10 * time.Minute).
							SetConnectTimeout(60 * time.Second)
						c := paho.NewClient(opts)
						tok := c.Connect()
						if !tok.WaitTimeout(2*time.Minute) || tok.Error() != nil {
							failed.Add(1)
							continue
						}
						clients[i] = c
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			if err := brk.Recorder().Await(context.Background(), time.Minute, func(c testbroker.Counts) bool { return c.Connected >= n-int(failed.Load()) }); err != nil {
				t.Fatal(err)
			}
			after := memInUse()
			t.Logf("%s: %d paho clients connected to one broker in %v (%.0f connects/s), %d failed; per client (paho and broker side together): heap %.1f KiB, stack %.1f KiB; %d goroutines",
				tr, brk.Connected(), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), failed.Load(),
				float64(after.heap-before.heap)/float64(n)/1024, float64(after.stack-before.stack)/float64(n)/1024, runtime.NumGoroutine())
			if failed.Load() > 0 {
				t.Errorf("%d connects failed", failed.Load())
			}
			var dw sync.WaitGroup
			for i := 0; i < 64; i++ {
				dw.Add(1)
				go func() {
					defer dw.Done()
					for j := i; j < n; j += 64 {
						if clients[j] != nil {
							clients[j].Disconnect(0)
						}
					}
				}()
			}
			dw.Wait()
		})
	}
}

// TestCloseDuringChurn closes a broker while clients connect and disconnect
// around it: the path on which mochi's own listener close deadlocks (#488).
func TestCloseDuringChurn(t *testing.T) {
	for round := 0; round < 5; round++ {
		brk, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					c, err := rawConnect(brk, fmt.Sprintf("churn-%d-%d", w, i%4))
					if err != nil {
						continue // refused once the broker is closing
					}
					c.Close()
				}
			}()
		}
		if err := brk.Recorder().Await(context.Background(), bound, func(c testbroker.Counts) bool { return c.Disconnects > 200 }); err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() { brk.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(bound):
			t.Fatal("Close deadlocked while clients churned")
		}
		close(stop)
		wg.Wait()
	}
}
