package deploy_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/deploy"
)

// A storm file that is not one shard a pod, or that its shards would
// refuse, renders nothing, and says why.
func TestRenderRefusesAStormItCannotShard(t *testing.T) {
	base, err := os.ReadFile("testdata/three-shards.yaml")
	require.NoError(t, err)
	o := deploy.Options{Name: "storm-a", Image: "devicesim:v1", Storage: "1Gi"}
	for _, c := range []struct{ name, from, to, want string }{
		{"a fixed shard", `"${JOB_COMPLETION_INDEX}/3"`, `"0/3"`, "${JOB_COMPLETION_INDEX}/N"},
		{"no disrupt_at", "disrupt_at: +30s\n", "", "-disrupt-at"},
		{"an unknown variable", "tcp://mqtt.iot.svc:1883", "${MQTT_BROKER}", "MQTT_BROKER"},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := bytes.Replace(base, []byte(c.from), []byte(c.to), 1)
			require.NotEqual(t, base, changed)
			_, err := deploy.Render(changed, o)
			assert.ErrorContains(t, err, c.want)
		})
	}
	_, err = deploy.Render(base, deploy.Options{Name: "Storm_A", Image: "devicesim:v1"})
	assert.ErrorContains(t, err, "lower-case")
}
