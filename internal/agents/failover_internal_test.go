package agents

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/plan"
)

// When the primary dies, the run counts recovery from the devices' own word
// for who is connected, which still says "all of them" until each device
// notices. The disruption must not end before that: the wait for the fleet
// to come back would pass at once, before anyone left.
func TestFailoverDisruptionEndsOnceEveryDeviceNoticed(t *testing.T) {
	paho.ERROR, paho.CRITICAL, paho.WARN = paho.NOOPLogger{}, paho.NOOPLogger{}, paho.NOOPLogger{}
	synctest.Test(t, func(t *testing.T) {
		c := plan.Default()
		c.Scenario, c.Policy, c.Devices, c.TimeScale = plan.Failover, "fleet-safe", 50, 1
		require.NoError(t, c.Validate())
		r := &run{c: c, ids: c.Shard.IDs(c.Devices)}
		defer r.close()
		require.NoError(t, r.setup())
		ctx, cancel := context.WithCancel(context.Background())
		for _, m := range r.members {
			require.NoError(t, m.start(ctx))
		}
		defer r.stopMembers(cancel)
		require.NoError(t, r.obs.await(ctx, time.Minute, func(k int) bool { return k == c.Devices }))
		_, err := r.disrupt(ctx, time.Now())
		require.NoError(t, err)
		assert.Zero(t, r.obs.connected(), "the disruption returned while devices still counted as connected")
	})
}
