package virtual_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

var goldenMillion = flag.Bool("golden.million", false, "also the million-device runs of TestVirtualEngineGolden")

// The virtual engine's output for fixed seeds, byte for byte: report.json
// (its wall time and memory aside, which are the machine's) and
// events.csv, as sha256. A change meant to change nothing but speed or
// layout keeps every hash; one that changes a figure changes a hash, and
// says so in its commit. The bubble fixes the wall clock the events'
// unix_ms column is anchored to.
func TestVirtualEngineGolden(t *testing.T) {
	for _, tc := range []struct {
		scenario       plan.Scenario
		policy         string
		devices        int
		report, events string
		// a throttled restart's admission, if not the default storm's
		mode fault.AdmissionMode
		rate float64
	}{
		{plan.BrokerRestart, "fleet-safe", 2_000,
			"ed812b84e3cdbefb7096a6621f1f5998e3fbaad7e9bcd5de7e796b65fb8305fa",
			"4617a0966195070ba1519492d01c9eef3c24dd9fbd14da7cfd825d4e7318990b", 0, 0},
		{plan.BrokerRestart, "fleet-safe", 100_000,
			"7f35f055b8d693f8531baf05269ed737d27763080576e38d68cd3f873e6caf2d",
			"a41e700fcb240bd5aece0e59c81e5540e9d2cd036b132d1cc1f5e2d04c040ef5", 0, 0},
		{plan.BrokerRestart, "fleet-safe", 1_000_000,
			"02857470c92fbf64d9c5afa25b63c57b1b3c873a65bcb51d92ef9735bb6e7fa6",
			"cd5fc46fd9b7f1628dd2d389786827fea8c829e2f209cf36372711836558f472", 0, 0},
		{plan.ThrottledRestart, "full", 2_000,
			"225044b5526034b7142a2a2cf060207f02901df46f9e85bf8db9f9ba194ef8d3",
			"4615ba78635ef7cfa5b324d06c1e3b3be7990091d09dace4c894d280e97f90ec", 0, 0},
		{plan.ThrottledRestart, "full", 100_000,
			"7b6c9c1eb4ec8b2d1d64936eeafafdd4e5138a7703719b6f355fd03bd14b5ab6",
			"ef409bf4c030f5497aa0e73f63a3a9a8da1f6ca49993f6af9d4e81081c918c63", 0, 0},
		{plan.ThrottledRestart, "full", 1_000_000,
			"88168ffbbd0bb8e6cc1ec5b057836523e90b4ee2bfa491cd2fc0295971bf601e",
			"df4339dbd60b2031a7382f197e6dc4290558707be2eac3dd6c4b06e235b2f0bf", 0, 0},
		{plan.ThrottledRestart, "full", 2_000,
			"9da9be11db76e12030cc7870176ecc811f18b91564d29cbc2de07da943b71eab",
			"c615e0a156f80879eeed3cccab2ce255e22cd8bb11840650d20fd1de5a448860", fault.PauseOverLimit, 20},
		{plan.ThrottledRestart, "full", 100_000,
			"2f1540f308babb6a8bcbd6b4f468c8ade7f2b35164cb86eced38e00b35573a13",
			"0c7f4b2a7ec3a6bb2dd2828b537fe532bddf9acecc6cc811d00cab5c95dc0ca3", fault.PauseOverLimit, 500},
		{plan.ThrottledRestart, "full", 2_000,
			"9b92e25ff1494a551c2feda19b686de98926125cbdf7011613f5c7c88174da45",
			"4e9c7f8c0b0cd8f225bf4600dbfd2424d24454b37b257082c23bb6d46cfdc25e", fault.DisconnectOverLimit, 20},
		{plan.ThrottledRestart, "full", 100_000,
			"1a085a190e634ad01676476d88b3b753851f32c8c31fa758579e85fe3270e16b",
			"cc9cebce0156b615e6196790e3c316250b8a997cf07e44401366ddd5f19f8292", fault.DisconnectOverLimit, 500},
		{plan.Flapping, "iotcore", 2_000,
			"eaab655137f0f80c27a25d789b33d9d2c637c14ad21b6b07016dc24b0c246141",
			"178b38a31eceeaa6272d5ef94e5487426b27d953be839def3db88af4ee7911c5", 0, 0},
		{plan.Flapping, "iotcore", 100_000,
			"6b763a566e34c98cadb1c1a51b14e2ac98ed644f9d813dbb9612d08912d4f600",
			"763fc95773b1b5c02f0d90576a09926a71707ba0923846c4a6625ba19bd216e8", 0, 0},
	} {
		name := fmt.Sprintf("%s/%s/%d", tc.scenario, tc.policy, tc.devices)
		if tc.rate > 0 {
			name = fmt.Sprintf("%s/%s/%s/%d", tc.scenario, tc.mode, tc.policy, tc.devices)
		}
		if tc.devices > 100_000 && !*goldenMillion || raceDetector && tc.devices > 2_000 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := model(tc.scenario, tc.policy, tc.devices)
				if tc.scenario == plan.ThrottledRestart {
					c.AdmitRate, c.AdmitBurst = 10_000, 500 // the storm of docs/large-fleets.md
				}
				if tc.rate > 0 {
					c.AdmitRate, c.AdmitBurst, c.AdmitMode = tc.rate, 10, tc.mode
				}
				events := sha256.New()
				c.Events = events
				r, err := run(c)
				require.NoError(t, err, name)
				r.Host.WallS, r.Host.MemoryPerDeviceKB = 0, 0
				b, err := r.JSON()
				require.NoError(t, err)
				report := sha256.Sum256(b)
				t.Logf("%s: report %s events %s", name, hex.EncodeToString(report[:]), hex.EncodeToString(events.Sum(nil)))
				assert.Equal(t, tc.report, hex.EncodeToString(report[:]), "%s: report.json", name)
				assert.Equal(t, tc.events, hex.EncodeToString(events.Sum(nil)), "%s: events.csv", name)
			})
		})
	}
}
