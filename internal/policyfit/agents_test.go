package policyfit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/policyfit"
	"github.com/herdguard/herdguard/internal/proxystorm"
	"github.com/herdguard/herdguard/internal/stormstatstest"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/testbroker"
)

// agentDevices is how many of the firmware's agents a cell runs.
const agentDevices = 100

// agentsThroughTheProxy storms a fleet of the firmware's own agents
// (device.Agent, paho and all) on policy spec with cap maxBackoff, as
// devicesim proxy storms anyone's: the proxy stands before the in-process
// broker, waits for every session, refuses as a down broker for outage
// (reading each CONNECT, as -identify does), and infers the policy from
// what it saw, as the command does. It runs in a synctest bubble, so that
// the times are exact. The flood guard is lifted (guard=600), so that the
// policy alone sets the waits.
func agentsThroughTheProxy(t *testing.T, spec string, maxBackoff time.Duration, outage time.Duration, seed uint64) policyfit.Inference {
	var r policyfit.Inference
	synctest.Test(t, func(t *testing.T) {
		b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
		require.NoError(t, err)
		defer b.Close()
		p := plan.Default()
		p.Scenario, p.Outage, p.Seed = plan.BrokerRestart, outage, seed
		s, err := proxystorm.New(proxystorm.Config{Plan: p, Identify: true, AwaitSessions: agentDevices,
			Upstreams: []func(context.Context) (net.Conn, error){func(ctx context.Context) (net.Conn, error) { return b.DialContext(ctx, nil) }}})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()

		shape, err := plan.Shape(spec, maxBackoff)
		require.NoError(t, err)
		policy, err := reconnect.New(shape, reconnect.Limits{MaxRetries: reconnect.RetryForever})
		require.NoError(t, err)
		agents := make([]*device.Agent, agentDevices)
		for i := range agents {
			tm := device.DefaultTiming()
			tm.Policy, tm.BootSpread = policy, 5*time.Second
			tm.Guard = plan.Guard(spec + ":guard=600")
			a, err := device.New(device.Config{Broker: "tcp://node-0", ClientID: fmt.Sprintf("dev-%d", i), Timing: &tm,
				Source: rand.NewPCG(seed, uint64(i)),
				Dial:   func(ctx context.Context, _ *url.URL) (net.Conn, error) { return s.Dial(ctx, 0) }})
			require.NoError(t, err)
			require.NoError(t, a.Start(context.Background()))
			agents[i] = a
		}
		defer func() {
			for _, a := range agents {
				_ = a.Stop(context.Background())
			}
		}()
		_, err = s.Run(context.Background())
		require.NoError(t, err)
		r, err = s.InferPolicy()
		require.NoError(t, err)
	})
	return r
}

// agentCells are the simulator's policies the agents run, as the virtual
// engine's cells run them (virtualTruths), through each outage; specs
// are the cells' policy specs.
func agentCells(outages ...time.Duration) (cells []cell, specs []string) {
	for _, v := range virtualTruths {
		for _, o := range outages {
			cells = append(cells, cell{truths: []truth{v.truth}, devices: agentDevices, outage: o})
			specs = append(specs, v.spec)
		}
	}
	return cells, specs
}

// The measured error rates of Infer on fleets of the firmware's own
// agents stormed through devicesim proxy's storm (proxystorm), each of
// the simulator's policies through a broker restart of 10 s, 1 min and
// 5 min, held to the same bounds as the synthetic fleets: seeds() seeds
// a cell, at most 5 unless -policyfit.seeds says.
func TestInferenceAccuracyOnAgentsThroughTheProxy(t *testing.T) {
	outages := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute}
	if stormstatstest.RaceDetector && *accuracySeeds == 0 {
		outages = outages[1:2]
	}
	cells, specs := agentCells(outages...)
	tallies := make([]*tally, len(cells))
	for i, c := range cells {
		tallies[i] = &tally{cell: c}
	}
	n := seeds()
	if *accuracySeeds == 0 {
		n = min(n, 5) // 0.13 s a run: make stats keeps to a few seeds
	}
	var mu sync.Mutex
	t.Run("cells", func(t *testing.T) {
		for seed := 1; seed <= n; seed++ {
			for i, c := range cells {
				spec := specs[i]
				t.Run(fmt.Sprintf("%s/%v/%d", spec, c.outage, seed), func(t *testing.T) {
					t.Parallel()
					r := agentsThroughTheProxy(t, spec, c.truths[0].cap, c.outage, uint64(seed))
					mu.Lock()
					defer mu.Unlock()
					tl := tallies[i]
					switch tl.judge(r) {
					case right:
						tl.right++
					case wrong:
						tl.wrong++
					default:
						tl.cannot++
					}
					tl.runs++
				})
			}
		}
	})
	checkTallies(t, tallies, true)
	writeTable(t, "agents", tallies)
}
