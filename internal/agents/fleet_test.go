package agents_test

import (
	"context"
	"testing"
	"testing/synctest"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/herdguard/herdguard/internal/agents"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

func TestMain(m *testing.M) {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	goleak.VerifyTestMain(m)
}

// When the primary dies, the fleet counts recovery from the devices' own
// word for who is connected, which still says "all of them" until each
// device notices. The wait for the fleet's return must not end before
// that: it would pass at once, before anyone left, and the report would
// miss the move to the standby.
func TestAwaitRecoveryWaitsForEveryDeviceToNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := plan.Default()
		p.Scenario, p.Policy, p.Devices, p.TimeScale = plan.Failover, "fleet-safe", 50, 1
		require.NoError(t, p.Validate())
		ctx := context.Background()
		f, err := agents.Start(ctx, p)
		require.NoError(t, err)
		defer f.Stop()
		require.NoError(t, f.AwaitUp(ctx))
		require.NoError(t, f.Disrupt(ctx, p.Timeline()[0]))
		rec, err := f.AwaitRecovery(ctx)
		require.NoError(t, err)
		r, err := f.Report(rec, report.End{Finished: rec.Recovered})
		require.NoError(t, err)
		require.NotNil(t, r.Broker)
		assert.EqualValues(t, 50, r.Broker.Arrivals.Count, "every device arrived at the standby before the fleet was called back")
		assert.Equal(t, 50, rec.SessionsLost)
	})
}
