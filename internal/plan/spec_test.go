package plan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// A policy spec is a family, and the base and jitter it takes where they
// are not 1 s; Shape builds what it says, and refuses what no family takes.
func TestPolicySpecs(t *testing.T) {
	for spec, want := range map[string]reconnect.Shape{
		"iotcore":                       reconnect.IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: time.Minute},
		"iotcore:base=2s,jitter=4s":     reconnect.IoTCore{Base: 2 * time.Second, Jitter: 4 * time.Second, MaxBackoff: time.Minute},
		"iotcore:jitter=10s":            reconnect.IoTCore{Base: time.Second, Jitter: 10 * time.Second, MaxBackoff: time.Minute},
		"full:base=500ms":               reconnect.FullJitter{Base: 500 * time.Millisecond, Max: time.Minute},
		"fleet-safe:base=4s":            reconnect.FleetSafe{Base: 4 * time.Second, Max: time.Minute},
		"linear:base=2s":                reconnect.Linear{Initial: 2 * time.Second, Step: 2 * time.Second, Max: time.Minute},
		"iotcore-jitter-at-cap:base=2s": reconnect.IoTCore{Base: 2 * time.Second, Jitter: time.Second, MaxBackoff: time.Minute, JitterAtCap: true},
		"full:base=2s,guard=4":          reconnect.FullJitter{Base: 2 * time.Second, Max: time.Minute},
	} {
		got, err := plan.Shape(spec, time.Minute)
		require.NoError(t, err, spec)
		assert.Equal(t, want, got, spec)
	}
	for spec, why := range map[string]string{
		"nope":                    "unknown policy",
		"full:jitter=2s":          "only the iotcore formulas take a jitter",
		"iotcore:base=2s,base=3s": "given twice",
		"iotcore:base":            "is not key=duration",
		"iotcore:base=0s":         "below 1 ms",
		"iotcore:speed=2s":        "is not base, jitter or guard",
		"full:guard=0":            "guard is the connect attempts a minute",
		"full:guard=4s":           "guard is the connect attempts a minute",
		"full:guard=601":          "1 to 600",
		"full:guard=4,guard=5":    "guard is given twice",
		"constant:base=2s":        "takes no base",
		"paho-default:base=2s":    "takes no parameters",
		"paho-default":            "paho's own reconnect",
		"iotcore:base=2m":         "below the 2m0s base",
	} {
		_, err := plan.Shape(spec, time.Minute)
		assert.ErrorContains(t, err, why, spec)
	}
}

// A spec's guard is the firmware's flood guard at that many attempts a
// minute, its window and burst kept; no guard keeps the firmware's own.
func TestAPolicySpecNamesTheFloodGuard(t *testing.T) {
	g := plan.Guard("fleet-safe:guard=4")
	require.NotNil(t, g)
	firmware := *device.DefaultTiming().Guard
	assert.Equal(t, reconnect.FloodGuardConfig{Requests: 4, Window: firmware.Window, Burst: firmware.Burst}, *g)
	assert.NoError(t, g.Validate())
	assert.Nil(t, plan.Guard("fleet-safe"))
	assert.Nil(t, plan.Guard("nope:guard=4"))
}
