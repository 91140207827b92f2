package thirdparty_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/faultproxy"
	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/thirdparty"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	fleetSize = 200
	// The outage ends between rounds of every own schedule: paho's at 7
	// and 15 s, MQTT.js's at about 10 and 11 s.
	outage = 10500 * time.Millisecond
)

var libraries = []library{
	{"paho-python", thirdparty.StartPahoPython, func(k int) time.Duration { return min(time.Second<<k, 120*time.Second) }},
	{"mqttjs", thirdparty.StartMQTTJS, func(int) time.Duration { return time.Second }},
	{"paho-go", thirdparty.StartPahoGo, func(k int) time.Duration {
		if k == 0 {
			return 0
		}
		return min(time.Second<<(k-1), 10*time.Minute)
	}},
}

// library is one third-party client and its own schedule, as the wait
// before the k-th attempt after a loss (k from 0), read from its source
// (thirdparty.go).
type library struct {
	name  string
	start func(testing.TB, string, int, thirdparty.Options) *thirdparty.Fleet
	wait  func(k int) time.Duration
}

// everyFleet runs test for each library on its own schedule and with full
// jitter, all six at once. They mostly wait, so they run side by side
// whatever -parallel says (on two cores, 2: two at a time): t.Run from a
// goroutine each.
func everyFleet(t *testing.T, test func(t *testing.T, lib library, jitter thirdparty.Jitter)) {
	var fleets sync.WaitGroup
	for _, lib := range libraries {
		for _, jitter := range []thirdparty.Jitter{{}, thirdparty.FullJitter} {
			name := lib.name
			if jitter != (thirdparty.Jitter{}) {
				name += "/full-jitter"
			}
			fleets.Go(func() {
				t.Run(name, func(t *testing.T) { test(t, lib, jitter) })
			})
		}
	}
	fleets.Wait()
}

// proxiedMosquitto starts mosquitto and the fault proxy in front of it.
func proxiedMosquitto(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	broker := mosquittotest.Start(t, "")
	proxy, err := faultproxy.New(faultproxy.Config{Upstream: faultproxy.Upstream(broker.Addr()), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, proxy.Close()) })
	return proxy
}

// Each library's fleet of 200 through the fault proxy to mosquitto, its
// broker down for 10.5 s: on its own schedule every client attempts in
// lock-step rounds at the schedule's times, and all come back in one round;
// with full jitter the attempts and the returns spread. The six storms take
// about 40 s together, 15 s (own) and 40 s (jitter) each.
func TestStormsKeepEachLibrarysSchedule(t *testing.T) { everyFleet(t, storm) }

// storm runs one fleet through the outage and checks what the proxy saw.
func storm(t *testing.T, lib library, jitter thirdparty.Jitter) {
	proxy := proxiedMosquitto(t)
	begun := time.Now()
	fleet := lib.start(t, proxy.Addr(), fleetSize, thirdparty.Options{Jitter: jitter})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, fleet.AwaitConnected(ctx, fleetSize), "the fleet's first connects")
	t.Logf("%s: %d connected in %v", fleet.Client(), fleetSize, time.Since(begun).Round(time.Millisecond))

	down := time.Now()
	require.Equal(t, fleetSize, proxy.BeginOutage())
	require.NoError(t, fleet.Await(ctx, func(c thirdparty.Counts) bool { return c.Connected == 0 }),
		"every client notices its loss")
	select {
	case <-time.After(time.Until(down.Add(outage))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	require.NoError(t, proxy.EndOutage())
	// Full jitter's last wait in the outage is at most its 30 s cap.
	back, cancelBack := context.WithDeadline(context.Background(), down.Add(outage+thirdparty.FullJitter.Cap+20*time.Second))
	defer cancelBack()
	require.NoError(t, fleet.AwaitConnected(back, fleetSize), "the fleet's return")
	t.Logf("%s: all back %v after the outage began", fleet.Client(), time.Since(down).Round(time.Millisecond))

	var attempts []fault.Attempt
	for _, a := range proxy.Recorder().Attempts() {
		if !a.Accept.Before(down) {
			attempts = append(attempts, a)
		}
	}
	returns := checkReturns(t, fleet, attempts, down)
	if jitter != (thirdparty.Jitter{}) {
		checkSpread(t, attempts, returns, down, jitter)
	} else {
		checkSchedule(t, attempts, returns, down, lib.wait)
	}
}

// checkReturns: every client came back exactly once, on an attempt the
// proxy let through and read the client's ID from. It returns the returns'
// arrivals since the outage began, in order.
func checkReturns(t *testing.T, fleet *thirdparty.Fleet, storm []fault.Attempt, down time.Time) []time.Duration {
	t.Helper()
	back := map[string]int{}
	var returns []time.Duration
	for _, a := range storm {
		if a.Outcome == fault.Accepted {
			back[a.ClientID]++
			returns = append(returns, a.Accept.Sub(down))
		}
	}
	for i := range fleetSize {
		id := fmt.Sprintf("%s%d", fleet.Prefix(), i)
		assert.Equal(t, 1, back[id], "sessions %s began after the outage", id)
	}
	require.Len(t, returns, fleetSize, "sessions begun after the outage")
	slices.Sort(returns)
	return returns
}

// checkSchedule: on its own schedule every client attempts at the
// schedule's instants after the loss, so each instant in the outage draws
// the whole fleet, refused, and the instant after it the whole fleet back.
// A busy host delays the clients' notice of the loss: MQTT.js, 200 clients
// in one event loop, began its rounds 0.7 s late with both cores busy, and
// paho Go its first, at once, 180 ms late. So the instants are taken from
// the first round's median. Each instant is judged by the attempts nearer
// to it than to its neighbours: the whole fleet, give or take 5 %; their
// median must follow the one before by the schedule's wait, give or take
// 150 ms and 10 % (MQTT.js's rounds, 1 s after each failure, drift 10 ms a
// round here, 40 ms busy).
func checkSchedule(t *testing.T, attempts []fault.Attempt, returns []time.Duration, down time.Time, wait func(int) time.Duration) {
	t.Helper()
	var arrivals []time.Duration
	for _, a := range attempts {
		if a.Outcome != fault.Accepted {
			arrivals = append(arrivals, a.Accept.Sub(down))
		}
	}
	slices.Sort(arrivals)
	require.GreaterOrEqual(t, len(arrivals), fleetSize, "refused attempts")
	instant := func(k int) time.Duration { // the schedule's k-th, from 0
		var at time.Duration
		for i := range k + 1 {
			at += wait(i)
		}
		return at
	}
	late := arrivals[fleetSize/2] - instant(0)
	assert.True(t, late > -200*time.Millisecond && late < time.Second, "the first round's median came %v late", late)
	var medians []string
	var prev time.Duration
	k := 0
	for ; instant(k)+late < outage-time.Second; k++ { // in the outage, clear of its end
		at := instant(k) + late
		lo, hi := at-wait(k)/2, min(at+wait(k+1)/2, outage)
		if k == 0 {
			lo = 0
		}
		i, j := index(arrivals, lo), index(arrivals, hi)
		assert.InDelta(t, fleetSize, j-i, fleetSize/20, "attempts nearest %v after the loss, in [%v, %v)", at, lo, hi)
		if i == j {
			continue
		}
		median := arrivals[(i+j)/2]
		medians = append(medians, median.Round(10*time.Millisecond).String())
		if k > 0 {
			w := wait(k)
			assert.InDelta(t, w, median-prev, float64(150*time.Millisecond+w/10),
				"the median attempt near %v after the median one before", at)
		}
		prev = median
	}
	back := instant(k) + late // the first after the outage
	for back < outage {
		k++
		back = instant(k) + late
	}
	// MQTT.js's instant before it, 10 s, may drift past the outage's end.
	assert.True(t, returns[len(returns)-1] <= back+1500*time.Millisecond,
		"returns from %v to %v: the schedule's instant after the outage is %v", returns[0], returns[len(returns)-1], back)
	assert.GreaterOrEqual(t, peakIn(returns, time.Second), fleetSize*9/10, "most returns in any 1 s: one round")
	t.Logf("%d attempts in the outage, medians %v (the first %v late); returns from %v to %v, at most %d in 1 s",
		len(arrivals), medians, late.Round(time.Millisecond), returns[0].Round(10*time.Millisecond),
		returns[len(returns)-1].Round(10*time.Millisecond), peakIn(returns, time.Second))
}

// index is where at would go in the sorted arrivals.
func index(arrivals []time.Duration, at time.Duration) int {
	i, _ := slices.BinarySearch(arrivals, at)
	return i
}

// checkSpread: with full jitter each client's first attempt falls in
// U(0, 1 s), so the first 1.5 s hold nearly the whole fleet; no quarter of a
// second holds three quarters of it (a lock-step round holds all of it
// within tens of ms; a busy host bunches jittered arrivals to about half);
// and the returns spread over seconds (a lock-step fleet returns within one).
func checkSpread(t *testing.T, attempts []fault.Attempt, returns []time.Duration, down time.Time, jitter thirdparty.Jitter) {
	t.Helper()
	var arrivals []time.Duration
	for _, a := range attempts {
		arrivals = append(arrivals, a.Accept.Sub(down))
	}
	slices.Sort(arrivals)
	first := index(arrivals, jitter.Base+500*time.Millisecond)
	assert.GreaterOrEqual(t, first, fleetSize*9/10, "attempts within the first wait's ceiling and 0.5 s")
	peak := peakIn(arrivals, 250*time.Millisecond)
	assert.Less(t, peak, fleetSize*3/4, "most attempts in any 250 ms")
	returnPeak := peakIn(returns, time.Second)
	assert.Less(t, returnPeak, fleetSize/2, "most returns in any 1 s")
	spread := returns[fleetSize*9/10] - returns[fleetSize/10]
	assert.Greater(t, spread, 2*time.Second, "the middle 80 percent of returns spans")
	t.Logf("%d attempts, %d in the first 1.5 s, at most %d in 250 ms; returns from %v to %v, at most %d in 1 s",
		len(arrivals), first, peak, returns[0].Round(10*time.Millisecond),
		returns[len(returns)-1].Round(10*time.Millisecond), returnPeak)
}

// peakIn is the most sorted arrivals in any window of width w.
func peakIn(arrivals []time.Duration, w time.Duration) int {
	peak, lo := 0, 0
	for hi, at := range arrivals {
		for arrivals[lo] <= at-w {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}

// A fleet stopped while its broker is down, every client asleep in its
// reconnect wait (full jitter's up to 30 s, paho Go's own uninterruptible),
// exits within seconds, its clients' sessions all ended.
func TestStopInAnOutage(t *testing.T) {
	everyFleet(t, func(t *testing.T, lib library, jitter thirdparty.Jitter) {
		proxy := proxiedMosquitto(t)
		fleet := lib.start(t, proxy.Addr(), 20, thirdparty.Options{Jitter: jitter})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, fleet.AwaitConnected(ctx, 20))
		proxy.BeginOutage()
		require.NoError(t, fleet.Await(ctx, func(c thirdparty.Counts) bool { return c.Connected == 0 }))
		// Past the first attempts: paho Go's own next sleep is 2 s.
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		begun := time.Now()
		fleet.Stop()
		took := time.Since(begun)
		assert.Less(t, took, 5*time.Second, "the stop")
		assert.Equal(t, thirdparty.Counts{Connected: 0, Connects: 20, Losses: 20}, fleet.Counts())
		t.Logf("%s stopped in %v", fleet.Client(), took.Round(time.Millisecond))
	})
}
