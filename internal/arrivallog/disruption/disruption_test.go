package disruption_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/disruption"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/stormstatstest"
)

const unix = stormstatstest.Unix

// A broker's log, as mosquitto writes it on whole Unix seconds: lines at
// times (seconds from unix) that the writer sorts.
type brokerLog []logLine

type logLine struct {
	t    float64
	text string
}

func (b *brokerLog) start(t float64) {
	*b = append(*b, logLine{t, "mosquitto version 2.0.11 starting"})
}

func (b *brokerLog) stop(t float64) {
	*b = append(*b, logLine{t, "mosquitto version 2.0.11 terminating"})
}

func (b *brokerLog) connect(t float64, dev int) {
	*b = append(*b, logLine{t, fmt.Sprintf("New client connected from 10.0.%d.%d:40000 as dev-%d (p2, c1, k30).", dev/250, dev%250, dev)})
}

func (b *brokerLog) closed(t float64, dev int) {
	*b = append(*b, logLine{t, fmt.Sprintf("Client dev-%d closed its connection.", dev)})
}

func (b brokerLog) String() string {
	slices.SortStableFunc(b, func(x, y logLine) int { return int(math.Floor(x.t) - math.Floor(y.t)) })
	var s strings.Builder
	for _, l := range b {
		fmt.Fprintf(&s, "%d: %s\n", int64(math.Floor(l.t))+unix.Milliseconds()/1000, l.text)
	}
	return s.String()
}

// only keeps the arrival lines, as `grep "New client connected"` does.
func (b brokerLog) only(prefix string) brokerLog {
	return slices.DeleteFunc(slices.Clone(b), func(l logLine) bool { return !strings.HasPrefix(l.text, prefix) })
}

func recoveriesFound(t *testing.T, log string) ([]disruption.Disruption, []stormstats.Recovery) {
	t.Helper()
	l, err := arrivallog.ParseLog(strings.NewReader(log), arrivallog.Options{})
	require.NoError(t, err)
	found, recs, err := disruption.Recoveries(l)
	require.NoError(t, err)
	return found, recs
}

const fleet = 2000

// A broker restarted twice, ten minutes apart, its independent fleet back
// each time in a smooth decay: the start lines mark the restarts; without
// them, the same devices back again do. Every recovery reads spread, in
// every seed; judged as one series, the log reads waves.
func TestABrokerRestartedTwiceIsTwoRecoveries(t *testing.T) {
	for seed := range uint64(stormstatstest.Seeds()) {
		r := rand.New(rand.NewPCG(seed, 31))
		var b brokerLog
		b.start(-1)
		for _, at := range []float64{0, 600, 1200} {
			if at > 0 {
				b.stop(at)
				b.start(at + 30)
			}
			for dev := range fleet {
				b.connect(at+30+20*r.ExpFloat64(), dev)
			}
		}
		for name, log := range map[string]string{"the whole log": b.String(), "its arrival lines": b.only("New client").String()} {
			found, recs := recoveriesFound(t, log)
			require.Len(t, found, 2, "seed %d, %s", seed, name)
			if name == "the whole log" {
				assert.Equal(t, 600*time.Second, found[0].At-unix.Truncate(time.Second), "seed %d", seed)
				assert.Contains(t, found[0].Why, "terminating")
			} else {
				assert.InDelta(t, 630, (found[0].At - unix.Truncate(time.Second)).Seconds(), 1, "seed %d: the first device back", seed)
				assert.Contains(t, found[0].Why, "arrived again")
			}
			assert.Equal(t, []stormstats.Verdict{stormstats.Spread, stormstats.Spread, stormstats.Spread}, stormstatstest.Verdicts(recs), "seed %d, %s", seed, name)
			assert.Equal(t, stormstats.Spread, stormstats.Overall(recs))
		}
		l, err := arrivallog.ParseLog(strings.NewReader(b.String()), arrivallog.Options{})
		require.NoError(t, err)
		h, m, _ := l.Histogram()
		j, err := stormstats.Judge(h, m)
		require.NoError(t, err)
		assert.Equal(t, stormstats.Waves, j.Verdict, "seed %d: one series", seed)
	}
}

// A five-node cluster restarted node by node, a minute apart, the nodes'
// logs merged: each node's stop line is a disruption, and the fleet
// (full jitter, back within seconds on the survivors) reads spread.
func TestARollingRestartIsARecoveryPerNode(t *testing.T) {
	const nodes = 5
	for seed := range uint64(stormstatstest.Seeds()) {
		r := rand.New(rand.NewPCG(seed, 37))
		var b brokerLog
		for node := range nodes {
			b.start(-1 - float64(node)/10)
		}
		for dev := range fleet {
			b.connect(5*r.ExpFloat64(), dev)
		}
		for node := range nodes {
			at := 300 + 60*float64(node)
			b.stop(at)
			b.start(at + 10)
			for dev := node; dev < fleet; dev += nodes {
				b.connect(at+r.Float64()+4*r.ExpFloat64(), dev)
			}
		}
		found, recs := recoveriesFound(t, b.String())
		require.Len(t, found, nodes, "seed %d", seed)
		assert.Equal(t, stormstats.Spread, stormstats.Overall(recs), "seed %d: %v", seed, stormstatstest.Verdicts(recs))
	}
}

// What is one storm stays one: the formula's rounds of retries (devicesim's
// events.csv, refused until admitted), the same after an outage in an
// accepted-only log, and a link that flaps every few seconds under a
// 10-minute cap, whose sessions mosquitto shows ending within seconds.
func TestRoundsOfRetriesAreOneStorm(t *testing.T) {
	for seed := range uint64(stormstatstest.Seeds()) {
		r := rand.New(rand.NewPCG(seed, 41))

		var csv strings.Builder
		csv.WriteString("t_s,client_id,outcome\n")
		for dev := range fleet {
			at := 0.0
			for k := range 8 {
				at += math.Min(math.Pow(2, float64(k))+r.Float64(), 32)
				outcome := "refused"
				if k == 7 {
					outcome = "accepted"
				}
				fmt.Fprintf(&csv, "%.3f,dev-%d,%s\n", at, dev, outcome)
			}
		}
		found, _ := recoveriesFound(t, csv.String())
		assert.Empty(t, found, "seed %d: retries refused", seed)

		var b brokerLog
		b.start(-1)
		for dev := range fleet {
			b.connect(5*r.ExpFloat64(), dev)
			// back in one of the rounds of the formula without jitter
			b.connect(600+math.Pow(2, float64(r.IntN(5)+1))-1, dev)
		}
		found, recs := recoveriesFound(t, b.only("New client").String())
		require.Len(t, found, 1, "seed %d: the outage, once", seed)
		assert.Equal(t, []stormstats.Verdict{stormstats.Spread, stormstats.Waves}, stormstatstest.Verdicts(recs), "seed %d", seed)

		b = b[:0]
		b.start(-1)
		for dev := range fleet {
			b.connect(5*r.ExpFloat64(), dev)
			at := 300 + r.Float64() // the link starts flapping
			b.closed(at, dev)
			for k := range 4 {
				at += math.Min(math.Pow(2, float64(k+6)), 600) * r.Float64()
				b.connect(at, dev)
				at += 2 * r.Float64() // and drops each session within seconds
				b.closed(at, dev)
			}
		}
		found, _ = recoveriesFound(t, b.String())
		assert.Len(t, found, 1, "seed %d: the first drop of sessions held since boot, and no more", seed)
	}
}

// Two halves of a fleet losing their connections ten minutes apart (a
// node each, a part of the fleet dropped and later the rest), each half
// back on full jitter through a limiter that refuses some attempts: in a
// log of every attempt (devicesim's outcome column), the second half's
// devices were never in it before, so they are a new disruption, and each
// recovery reads spread. A log of admitted sessions alone cannot tell them
// from a round behind an admission limit, which also admits devices it has
// not shown: there the log is one series, and the summary names the bursts.
func TestNewcomersAfterAQuietMinuteAreANewRecovery(t *testing.T) {
	for seed := range uint64(stormstatstest.Seeds()) {
		r := rand.New(rand.NewPCG(seed, 43))
		var all, admitted strings.Builder
		var attempts [2]int64 // by half
		all.WriteString("t_s,client_id,outcome\n")
		admitted.WriteString("t_s,client_id\n")
		for dev := range fleet {
			at := 0.0
			if dev%2 == 1 {
				at = 600
			}
			for k := 0; ; k++ {
				at += math.Min(32, math.Pow(2, float64(k))) * r.Float64()
				attempts[dev%2]++
				if r.Float64() < 0.6 || k == 6 {
					fmt.Fprintf(&all, "%.3f,dev-%d,accepted\n", at, dev)
					fmt.Fprintf(&admitted, "%.3f,dev-%d\n", at, dev)
					break
				}
				fmt.Fprintf(&all, "%.3f,dev-%d,refused\n", at, dev)
			}
		}
		found, recs := recoveriesFound(t, all.String())
		require.Len(t, found, 1, "seed %d", seed)
		assert.InDelta(t, 600, found[0].AtS, 1, "seed %d", seed)
		assert.Contains(t, found[0].Why, "had not shown before")
		assert.Equal(t, []stormstats.Verdict{stormstats.Spread, stormstats.Spread}, stormstatstest.Verdicts(recs), "seed %d", seed)
		for k, rec := range recs {
			assert.Equal(t, attempts[k], rec.Arrivals.Count, "seed %d: every attempt of half %d, and only those", seed, k)
		}

		found, _ = recoveriesFound(t, admitted.String())
		assert.Empty(t, found, "seed %d: admitted sessions alone", seed)
	}
}

// A fleet that came up together, dropped together by the fault proxy a
// few minutes later: mosquitto logs every session closed within a second,
// all of one length (up to their boot spread), and nothing of its own
// restart. The drop is found, and counts every session it ended, not the
// first crowd of them; the rounds of retries after it are its recovery.
func TestADropOfSessionsOfOneLengthIsFound(t *testing.T) {
	for seed := range uint64(5) {
		r := rand.New(rand.NewPCG(seed, 11))
		var b brokerLog
		b.start(0)
		for dev := range fleet {
			b.connect(5+2*r.Float64(), dev) // a boot within 2 s
		}
		const drop = 185.0
		for dev := range fleet {
			b.closed(drop+0.3*r.Float64(), dev)
		}
		for dev := range fleet { // back in rounds, 1, 3, 7 s after
			b.connect(drop+[]float64{1, 3, 7}[dev%3]+0.05*r.Float64(), dev)
		}
		found, _ := recoveriesFound(t, b.String())
		require.Len(t, found, 1, "seed %d: %v", seed, found)
		assert.InDelta(t, drop, found[0].AtS-float64(unix.Milliseconds()/1000), 1, "seed %d", seed)
		assert.Contains(t, found[0].Why, "the sessions of 2000 devices ended within", "seed %d", seed)
	}
}

func TestParseTimes(t *testing.T) {
	at, err := disruption.ParseTimes("1700000600, 1700000000.5,2023-11-14T22:13:20Z")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{1_700_000_000 * time.Second, 1_700_000_000*time.Second + 500*time.Millisecond,
		1_700_000_600 * time.Second}, at)
	for _, bad := range []string{"", "soon", "1,x"} {
		_, err := disruption.ParseTimes(bad)
		assert.Error(t, err, bad)
	}
}
