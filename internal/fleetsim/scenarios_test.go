package fleetsim_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fleetsim"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/testbroker"
)

func TestPahoDefaultReconnectsAtOnceInOneBurst(t *testing.T) {
	p := small(plan.DropAll, plan.PahoDefault)
	p.Devices = 200
	var warn strings.Builder
	p.Warn = &warn
	r, err := inBubble(t, p) // at small()'s 50x
	require.NoError(t, err)
	assert.Contains(t, warn.String(), "time scale 1", "paho's timers cannot be scaled, and the run says so")
	assert.Equal(t, 1.0, r.TimeScale)
	assert.True(t, r.Recovery.AllRecovered)
	assert.Zero(t, r.Recovery.MaxS, "paho retries a lost connection at once: no backoff before the first retry")
	assert.Equal(t, 1.0, r.Attempts.PerDeviceMean)
	assert.Zero(t, r.Attempts.Refused)
	// One burst over silence is reported, but is not a sequence of rounds.
	assert.Equal(t, stormstats.Spread, r.Verdict, r.Fleet.Judgement.Reason)
	require.Len(t, r.Fleet.Judgement.Bursts, 1)
	b := r.Fleet.Judgement.Bursts[0]
	assert.EqualValues(t, 200, b.Count, "the whole fleet")
	assert.Less(t, b.WidthS, 0.01, "the whole fleet within 10 ms: at once")
	assert.Contains(t, r.Fleet.Judgement.Reason, "one burst, not repeated: 200 arrivals within")
}

func TestFlappingKeepsTheFleetBackingOff(t *testing.T) {
	p := small(plan.Flapping, "iotcore")
	p.Outage, p.Flap = 20*time.Second, 2*time.Second
	r, err := inVirtualTime(t, p)
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	assert.Equal(t, 20.0, r.BrokerBackS, "the flapping window lasts 20 s")
	assert.GreaterOrEqual(t, r.Recovery.P50S, 20.0-2, "a session admitted before 18 s was dropped inside the window")
	assert.GreaterOrEqual(t, r.Attempts.PerDeviceMean, 3.0, "every device was dropped and let back in again and again")
	assert.Zero(t, r.Attempts.Refused, "a flapping broker admits everyone, then drops them")
}

// The config server names the end of its fault window, as a maintenance
// page does: every device is told the same instant. The firmware takes the
// hint as a floor and adds jitter, so the fleet does not come back together;
// without the jitter it comes back in two bursts, at the end of each half.
func TestConfigOutageRetryAfterIsAFloorNotAnInstant(t *testing.T) {
	p := small(plan.ConfigOutage, "iotcore")
	p.Devices, p.Outage = 200, 10*time.Second // 503 until 5 s, then 429 until 10 s
	var warn strings.Builder
	p.Warn = &warn
	r, err := inBubble(t, p) // at small()'s 50x
	require.NoError(t, err)
	assert.Contains(t, warn.String(), "time scale 1", "Retry-After travels in whole seconds")
	assert.Equal(t, "config-server", r.Fleet.MeasuredAt)
	assert.Nil(t, r.Broker)
	assert.True(t, r.Recovery.AllRecovered)
	assert.Equal(t, stormstats.Spread, r.Verdict, r.Fleet.Judgement.Reason)

	dir := t.TempDir()
	require.NoError(t, r.WriteFiles(dir))
	codes := map[string]int{}
	for _, row := range readCSV(t, filepath.Join(dir, "events.csv"))[1:] {
		ts, err := strconv.ParseFloat(row[0], 64)
		require.NoError(t, err)
		codes[row[4]]++
		if row[4] == "200" {
			assert.GreaterOrEqual(t, ts, 10.0, "%s served inside the fault window", row[2])
			// A 429 just before 10 s says "1" (whole seconds): 11 s at most,
			// plus up to 5 s of the firmware's jitter.
			assert.Less(t, ts, 10.0+1+5, "%s waited past the hint plus its jitter", row[2])
		}
	}
	assert.Positive(t, codes["503"])
	assert.Positive(t, codes["429"])
	assert.Equal(t, 200, codes["200"])

	p.RetryAfterJitter = -1 // the hint taken as an instant
	r, err = inVirtualTime(t, p)
	require.NoError(t, err)
	j := r.Fleet.Judgement
	assert.Equal(t, stormstats.Waves, r.Verdict, j.Reason)
	require.Len(t, j.Bursts, 2, j.Reason)
	for i, end := range []float64{5, 10} {
		b := j.Bursts[i]
		assert.InDelta(t, end+0.5, b.AtS+b.WidthS/2, 1, "every device told the same instant comes back at it")
	}
}

func TestTCPTransport(t *testing.T) {
	p := small(plan.DropAll, "full")
	p.Transport = plan.TCP
	p.TimeScale = 5 // real time: a connect timeout of 2 s, which no busy host reaches
	r, err := fleetsim.Run(context.Background(), p)
	require.NoError(t, err)
	assert.Equal(t, "tcp", r.Transport)
	assert.True(t, r.Recovery.AllRecovered)
	assert.EqualValues(t, 60, r.Attempts.Total-r.Attempts.Refused, "one admitted attempt per device")
	assert.EqualValues(t, 60, r.Admitted.Count)
	assert.GreaterOrEqual(t, r.Broker.Arrivals.Count, int64(60))
}

// Two shards of one fleet observe a shared broker that the test drops; the
// merged report covers every device once.
func TestShardsObserveAnExternalBrokerAndMerge(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TCP})
	require.NoError(t, err)
	defer b.Close()
	var ready sync.WaitGroup
	ready.Add(2)
	dropped := make(chan struct{})
	go func() {
		ready.Wait()
		b.Faults().DropAll()
		close(dropped)
	}()
	reports := make([]*report.Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		p := plan.Default()
		p.Devices, p.Scenario, p.TimeScale, p.Broker = 40, plan.Observe, 1, b.URL()
		p.Duration = 30 * time.Second
		p.Shard = plan.Shard{Index: i, Count: 2}
		p.Ready = ready.Done
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = fleetsim.Run(context.Background(), p)
		}()
	}
	wg.Wait()
	<-dropped
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	for _, r := range reports {
		assert.Equal(t, 20, r.Devices)
		assert.Equal(t, "devices", r.Fleet.MeasuredAt)
		assert.Equal(t, "external", r.Transport)
		assert.GreaterOrEqual(t, r.Recovery.P50S, 1.0, "IoTCore never retries before 1 s")
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	for i, r := range reports {
		require.NoError(t, r.WriteFiles(dirs[i]))
	}
	var back []*report.Report
	for _, d := range dirs {
		r, err := report.ReadReport(d)
		require.NoError(t, err)
		back = append(back, r)
	}
	m, err := report.Merge(back)
	require.NoError(t, err)
	assert.Equal(t, 40, m.Devices)
	assert.True(t, m.Recovery.AllRecovered)
	assert.Equal(t, reports[0].Attempts.Total+reports[1].Attempts.Total, m.Attempts.Total)
	assert.Equal(t, m.Fleet.Arrivals.Count, reports[0].Fleet.Arrivals.Count+reports[1].Fleet.Arrivals.Count)
	assert.GreaterOrEqual(t, m.Recovery.P50S, 1.0)

	_, err = report.Merge([]*report.Report{back[0], back[0]})
	assert.ErrorContains(t, err, "given twice")
}

func readCSV(t *testing.T, path string) [][]string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	return rows
}

func TestTelemetryLosesNothingAcrossTheRestart(t *testing.T) {
	p := small(plan.BrokerRestart, "full")
	p.Telemetry = 2 // a reading every 0.5 s
	for seed := uint64(1); seed <= seeds(); seed++ {
		p.Seed = seed
		r, err := inVirtualTime(t, p)
		require.NoError(t, err, "seed %d", seed)
		tm := r.Telemetry
		require.NotNil(t, tm)
		assert.Greater(t, tm.Enqueued, uint64(60*2*30), "seed %d: two a second through at least the 30 s outage", seed)
		assert.Equal(t, int64(0), tm.Lost, "seed %d", seed)
		assert.Equal(t, int(tm.Enqueued), tm.ReceivedUnique, "seed %d: every reading reached the broker", seed)
		assert.Zero(t, tm.DroppedOldest, "seed %d", seed)
		assert.Zero(t, tm.QueuedAtEnd, "seed %d", seed)
		var sb strings.Builder
		r.Summary(&sb)
		assert.Contains(t, sb.String(), "0 lost")
	}
}

// cancelOnWrite ends a run from its first progress line.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (w cancelOnWrite) Write(b []byte) (int, error) { w.cancel(); return len(b), nil }

func TestInterruptedRunReportsWhatItSaw(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := small(plan.ThrottledRestart, "iotcore")
	p.AdmitRate = 0.2 // 300 s to readmit 60 devices: far beyond the first progress line
	p.Progress = cancelOnWrite{cancel}
	p.TimeScale = 1
	var r *report.Report
	var err error
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		r, err = fleetsim.Run(ctx, p)
		// The first progress line comes a second after the broker's 30 s
		// absence; the bound is over five minutes.
		assert.Less(t, time.Since(start), 35*time.Second, "an interrupt ends the wait, not the bound")
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, r, "the report so far is still written")
	assert.False(t, r.Recovery.AllRecovered)
	assert.Contains(t, err.Error(), "interrupted with")
}

// A path that goes silent: nobody is reset, every device notices through
// its keepalive (30 s + a 10 s ping timeout + paho's 7.5 s check, with the
// sessions' pings spread over a keepalive), and the connections made into
// the silence hang until their connect timeout.
func TestBlackholeIsNoticedThroughKeepaliveAndRecovered(t *testing.T) {
	p := small(plan.Blackhole, "fleet-safe")
	p.Devices, p.Outage = 100, 60*time.Second
	r, err := inVirtualTime(t, p)
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	require.NotNil(t, r.Noticed)
	assert.Equal(t, 100, r.Noticed.Devices, "all through keepalive: 47.5 s at most, the silence 60 s")
	assert.Zero(t, r.Noticed.AtEnd)
	assert.GreaterOrEqual(t, r.Noticed.P50S, 10.0, "not before the ping timeout")
	assert.LessOrEqual(t, r.Noticed.MaxS, 30+10+7.5, "within a keepalive, the ping timeout and a check")
	assert.Greater(t, r.Noticed.MaxS-r.Noticed.P50S, 5.0, "pings spread over the keepalive: so are the notices")
	assert.GreaterOrEqual(t, r.Recovery.P50S, 60.0, "nothing passes until the black hole ends")
	require.NotNil(t, r.Proxy)
	assert.Positive(t, r.Proxy.Dropped, "connections opened into the silence hung and were given up")
	require.NotNil(t, r.Broker)
	assert.Equal(t, "broker", r.Broker.MeasuredAt, "in process, the broker's own side is seen")
}

// The latency scenario drops every session and slows the path both ways:
// each connect pays the round trip, so recovery is later than the policy's
// first wait alone.
func TestLatencySlowsTheWayBack(t *testing.T) {
	p := small(plan.Latency, "fleet-safe")
	p.Devices, p.Latency, p.LatencyJitter = 100, 2*time.Second, 500*time.Millisecond
	r, err := inVirtualTime(t, p)
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	// fleet-safe's first wait is U[1.5 s, 3 s); the broker sees the CONNECT
	// a latency later. Every device was dropped once and came back once.
	assert.GreaterOrEqual(t, r.Recovery.MaxS, 1.5+2.0)
	assert.GreaterOrEqual(t, r.Recovery.P50S, 2.25+2.0-0.5, "the median wait (2.25 s) and the latency")
	require.NotNil(t, r.Proxy)
	assert.Equal(t, 100, r.Proxy.Admitted)
}

// The primary dies for good; every device's next attempt, after its
// policy's wait, goes to the standby, which sees one spread-out arrival a
// device and no wave.
func TestFailoverMovesTheFleetToTheStandby(t *testing.T) {
	p := small(plan.Failover, "fleet-safe")
	p.Devices = 200
	// The run watches the devices' own word for who is connected, which
	// lags the primary's death: it must wait for every device to notice
	// before it waits for them to come back, on every seed.
	for seed := uint64(1); seed <= seeds(); seed++ {
		p.Seed = seed
		r, err := inVirtualTime(t, p)
		require.NoError(t, err, "seed %d", seed)
		assert.True(t, r.Recovery.AllRecovered)
		require.NotNil(t, r.Broker)
		assert.Equal(t, "standby broker", r.Broker.MeasuredAt)
		assert.EqualValues(t, 200, r.Broker.Arrivals.Count, "seed %d: one arrival a device at the survivor", seed)
		assert.Equal(t, 1.0, r.Attempts.PerDeviceMean, "seed %d: the first retry went to the standby", seed)
		assert.GreaterOrEqual(t, r.Recovery.P50S, 1.5, "after fleet-safe's first wait, U[1.5 s, 3 s)")
		assert.Less(t, r.Recovery.MaxS, 3.0, "after fleet-safe's first wait, U[1.5 s, 3 s)")
		assert.Equal(t, stormstats.Spread, r.Broker.Judgement.Verdict, r.Broker.Judgement.Reason)
	}
}

// A TLS fleet: every device its own client certificate from the broker's
// CA, every reconnect a full mutual-TLS handshake the report costs.
func TestTLSFleetReportsTheBrokersHandshakeCPU(t *testing.T) {
	p := small(plan.BrokerRestart, "fleet-safe")
	p.Devices, p.TimeScale, p.Transport = 100, 10, plan.TLS
	r, err := fleetsim.Run(context.Background(), p)
	require.NoError(t, err)
	assert.True(t, r.Recovery.AllRecovered)
	require.NotNil(t, r.TLS)
	require.NotNil(t, r.Broker)
	assert.EqualValues(t, r.Broker.Arrivals.Count, r.TLS.Handshakes, "one handshake a connection that reached the broker")
	// fleet-safe makes one attempt a device once the broker is back; in
	// real time a busy host can make a handshake outlast its timeout, and
	// the retry is one more.
	assert.GreaterOrEqual(t, r.TLS.Handshakes, int64(100), "every device came back through a handshake")
	if runtime.GOOS == "linux" {
		assert.Greater(t, r.TLS.HandshakeCPUMS, 0.05)
		assert.InDelta(t, r.TLS.HandshakeCPUMS*100/1000, r.TLS.CPUS, 1e-9)
	}
}
