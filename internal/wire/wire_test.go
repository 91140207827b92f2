package wire_test

import (
	"fmt"
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/internal/fleetsimtest"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

func TestMain(m *testing.M) {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	goleak.VerifyTestMain(m)
}

// on runs p on engine e in a synctest bubble.
func on(t *testing.T, e plan.Engine, p plan.Plan) *report.Report {
	t.Helper()
	p.Engine = e
	r, err := fleetsimtest.InVirtualTime(t, p)
	require.NoError(t, err)
	return r
}

// The same devices through the same storms, in virtual time: the wire
// engine's cores on their own MQTT sessions retry exactly as the agents'
// paho clients do, to the nanosecond, in MQTT 3.1.1 and 5. The in-process
// broker's refusals (3.1.1's 3, MQTT 5's 0x88 and the back-pressure codes
// that stretch a wait), a silent path noticed by keepalive, a busy node's
// 0x89: each heard the same. Not here: a slow path on MQTT 5, where
// paho.golang writes a CONNECT as two buffers and the fault proxy delays
// each on its own, which one write of the wire engine's is not. Under the
// race detector, which slows the agents tenfold, three of the scenarios.
func TestWireDevicesRetryAsTheAgentsDo(t *testing.T) {
	scenarios := []plan.Scenario{plan.BrokerRestart, plan.ThrottledRestart, plan.DropAll, plan.Flapping, plan.Blackhole,
		plan.RateLimited, plan.BusyNode, plan.BootStorm, plan.Failover}
	if fleetsimtest.RaceDetector {
		scenarios = []plan.Scenario{plan.ThrottledRestart, plan.Blackhole, plan.BusyNode}
	}
	for _, sc := range scenarios {
		for _, v5 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mqtt5=%v", sc, v5), func(t *testing.T) {
				p := fleetsimtest.Plan(sc, "iotcore", 60)
				p.MQTT5 = v5
				agents, wired := on(t, plan.Agents, p), on(t, plan.Wire, p)
				assert.Equal(t, plan.Wire, wired.Engine)
				assert.True(t, wired.Recovery.AllRecovered)
				assert.Equal(t, agents.Recovery, wired.Recovery)
				assert.Equal(t, agents.Attempts, wired.Attempts)
				assert.Equal(t, agents.Verdict, wired.Verdict)
				assert.Equal(t, agents.Broker.Arrivals, wired.Broker.Arrivals)
			})
		}
	}
	for _, policy := range []string{"exponential", "decorrelated", "full", "fleet-safe"} {
		t.Run(policy, func(t *testing.T) {
			p := fleetsimtest.Plan(plan.BrokerRestart, policy, 60)
			agents, wired := on(t, plan.Agents, p), on(t, plan.Wire, p)
			assert.Equal(t, agents.Recovery, wired.Recovery)
			assert.Equal(t, agents.Attempts, wired.Attempts)
		})
	}
}

// Telemetry through storms: each wire device makes its readings when its
// agent would and sends them QoS 1 in the publisher's envelope, one in
// flight, so the broker counts the same readings, each once, and none is
// lost. Under the race detector, the restart on MQTT 5 alone.
func TestWireTelemetryLosesNothing(t *testing.T) {
	scenarios, protocols := []plan.Scenario{plan.BrokerRestart, plan.Flapping}, []bool{false, true}
	if fleetsimtest.RaceDetector {
		scenarios, protocols = scenarios[:1], protocols[1:]
	}
	for _, sc := range scenarios {
		for _, v5 := range protocols {
			t.Run(fmt.Sprintf("%s/mqtt5=%v", sc, v5), func(t *testing.T) {
				p := fleetsimtest.Plan(sc, "full", 60)
				p.Telemetry, p.MQTT5 = 5, v5
				agents, wired := on(t, plan.Agents, p), on(t, plan.Wire, p)
				require.NotNil(t, wired.Telemetry)
				w := *wired.Telemetry
				assert.Zero(t, w.Lost)
				assert.Zero(t, w.QueuedAtEnd)
				assert.Equal(t, agents.Telemetry.Enqueued, w.Enqueued, "the readings the agents made")
				assert.EqualValues(t, w.Enqueued, w.ReceivedUnique, "each reached the broker")
				assert.Equal(t, agents.Recovery, wired.Recovery, "the readings do not move a reconnect")
			})
		}
	}
}
