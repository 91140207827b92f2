package virtual_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

var goldenMillion = flag.Bool("golden.million", false, "also the million-device runs of TestVirtualEngineGolden")

// The virtual engine's output for fixed seeds, byte for byte: report.json
// (its wall time and memory aside, which are the machine's; its keys in
// sorted order, so that the report's layout is not its figures) and
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
			"64b75b40359b4ee4d68b78cd71b041c5f8be6fa23a32fbca81efd5bb2229b48a",
			"4617a0966195070ba1519492d01c9eef3c24dd9fbd14da7cfd825d4e7318990b", 0, 0},
		{plan.BrokerRestart, "fleet-safe", 100_000,
			"3e1b6bce42f8f3e6869b2e90eb95558217bc61464f743fd2031017f8629d469c",
			"a41e700fcb240bd5aece0e59c81e5540e9d2cd036b132d1cc1f5e2d04c040ef5", 0, 0},
		{plan.BrokerRestart, "fleet-safe", 1_000_000,
			"9a48c47ab05dc6c9ca62abaa6e2d6eab59851b33f456ffc1ae4523c24b8910e5",
			"cd5fc46fd9b7f1628dd2d389786827fea8c829e2f209cf36372711836558f472", 0, 0},
		{plan.ThrottledRestart, "full", 2_000,
			"f20055d6947869ac8454ef17fffe6df3d8328aff200cddae2997055f7f184998",
			"4615ba78635ef7cfa5b324d06c1e3b3be7990091d09dace4c894d280e97f90ec", 0, 0},
		{plan.ThrottledRestart, "full", 100_000,
			"70ea46a3a82ebbf91f377dc829fca5d53f82c8f2644f3886ccda454ece7eb983",
			"ef409bf4c030f5497aa0e73f63a3a9a8da1f6ca49993f6af9d4e81081c918c63", 0, 0},
		{plan.ThrottledRestart, "full", 1_000_000,
			"7b16b432a0b9a2879f8347a6ecac5a401bef23a1ae363efef17d7f63ad9b5c31",
			"df4339dbd60b2031a7382f197e6dc4290558707be2eac3dd6c4b06e235b2f0bf", 0, 0},
		{plan.ThrottledRestart, "full", 2_000,
			"9a072dfe7a66ce0334f44b12c9f802b1dff5dff42637f523693bcb529772f351",
			"c615e0a156f80879eeed3cccab2ce255e22cd8bb11840650d20fd1de5a448860", fault.PauseOverLimit, 20},
		{plan.ThrottledRestart, "full", 100_000,
			"5918011730f5f32c19a0c2bcc245e38e1f5f785d864ac6d82ce30fa35e10d5d9",
			"0c7f4b2a7ec3a6bb2dd2828b537fe532bddf9acecc6cc811d00cab5c95dc0ca3", fault.PauseOverLimit, 500},
		{plan.ThrottledRestart, "full", 2_000,
			"acf7d1045d4c5f1e2b97f60182606cd22d2f01792e9ce7f5db01fd7cc7f2fd16",
			"4e9c7f8c0b0cd8f225bf4600dbfd2424d24454b37b257082c23bb6d46cfdc25e", fault.DisconnectOverLimit, 20},
		{plan.ThrottledRestart, "full", 100_000,
			"e9598478253c3759934e2adb18fac1ebc4dd0e4cab4f336220c4d93b33f9f495",
			"cc9cebce0156b615e6196790e3c316250b8a997cf07e44401366ddd5f19f8292", fault.DisconnectOverLimit, 500},
		{plan.Flapping, "iotcore", 2_000,
			"93fc714f886958f1e9b39177a31c4cbdfb30d70226b960965125280e58fcc681",
			"178b38a31eceeaa6272d5ef94e5487426b27d953be839def3db88af4ee7911c5", 0, 0},
		{plan.Flapping, "iotcore", 100_000,
			"b325b6783af436e996162ba3a63777891df4b8670ad5fb6530da75ea91732c6b",
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
				b, err := canonical(r)
				require.NoError(t, err)
				report := sha256.Sum256(b)
				t.Logf("%s: report %s events %s", name, hex.EncodeToString(report[:]), hex.EncodeToString(events.Sum(nil)))
				assert.Equal(t, tc.report, hex.EncodeToString(report[:]), "%s: report.json", name)
				assert.Equal(t, tc.events, hex.EncodeToString(events.Sum(nil)), "%s: events.csv", name)
			})
		})
	}
}

// canonical is r's report.json with every object's keys in sorted order.
func canonical(r *report.Report) ([]byte, error) {
	b, err := r.JSON()
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // every figure as it was written
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
