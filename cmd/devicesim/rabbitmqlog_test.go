package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/rabbitmqtest"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
	"github.com/herdguard/herdguard/internal/stormstatstest"
)

// The judge proved on a second real broker's own log: RabbitMQ 3.10 with
// its MQTT plugin (Debian's rabbitmq-server) takes three storms in a row,
// seeds 1 to 3, each through the fault proxy: a fleet boots over 12 s,
// then a link that flaps for 100 s cuts every session a second after it
// began, so that the devices keep backing off and, under the formula,
// reach its 16 s cap together; then the fleet stops. RabbitMQ's log file,
// as it wrote it, holds all three, with the boots between them. Judged as
// a user would (`devicesim judge -expect VERDICT FILE`), it must say what
// every run measured at the proxy: waves for the formula, spread for full
// jitter; and, found by its own lines, each storm's recovery must read as
// that storm did at the proxy. The formula's node writes RabbitMQ's text
// formatter, full jitter's its JSON formatter; the two nodes run at once.
// The storms run at 6x (100 s in 17 s; RabbitMQ stamps the µs), 100
// devices each.
//
// Not under the race detector, which would make the host, not the fleet,
// set the times: make test runs it on its own after the race step.
func TestRabbitMQsOwnLogIsJudgedAsItsStormsWere(t *testing.T) {
	if stormstatstest.RaceDetector {
		t.Skip("real-time storms: make test runs them without the race detector (make interop)")
	}
	t.Parallel() // beside the shards' storm: real time, mostly waiting
	for _, tc := range []struct {
		policy string
		want   stormstats.Verdict
		json   bool
	}{{"iotcore", stormstats.Waves, false}, {"full", stormstats.Spread, true}} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			b := rabbitmqtest.Start(t, rabbitmqtest.Options{JSON: tc.json})
			type storm struct {
				from, to time.Time
				verdict  stormstats.Verdict
			}
			var storms []storm
			for seed := 1; seed <= 3; seed++ {
				dir := t.TempDir()
				var out bytes.Buffer
				from := time.Now()
				err := run(context.Background(), []string{"run", "-broker", b.URL(), "-scenario", "flapping",
					"-outage", "100s", "-flap", "1s", "-policy", tc.policy, "-max-backoff", "16s", "-devices", "100",
					"-boot-spread", "12s", "-time-scale", "6", "-seed", fmt.Sprint(seed), "-out", dir}, noenv, nil, &out, &out)
				servedOrBound(t, err, out.String())
				r, err := report.ReadReport(dir)
				require.NoError(t, err)
				require.NotNil(t, r.Broker)
				storms = append(storms, storm{from, time.Now(), r.Broker.Judgement.Verdict})
				t.Logf("seed %d at the proxy: %s (%s)", seed, r.Broker.Judgement.Verdict, r.Broker.Judgement.Reason)
				assert.Equal(t, tc.want, r.Broker.Judgement.Verdict, "seed %d: the run's own verdict at the proxy", seed)
			}
			b.Stop() // its log written out whole

			// The README's recipe, word for word: its exit status is the test.
			var text bytes.Buffer
			recipeErr := run(context.Background(), []string{"judge", "-expect", string(tc.want), b.LogFile()}, noenv, nil, &text, &text)
			t.Logf("RabbitMQ's log:\n%s", text.String())
			assert.NoError(t, recipeErr, "devicesim judge -expect %s on RabbitMQ's log", tc.want)

			var o, e bytes.Buffer
			require.NoError(t, run(context.Background(), []string{"judge", "-json", b.LogFile()}, noenv, nil, &o, &e), e.String())
			var j struct {
				Format     string `json:"format"`
				Recoveries []struct {
					AtS     float64            `json:"at_s"`
					Verdict stormstats.Verdict `json:"verdict"`
					Count   int64              `json:"count"`
				} `json:"recoveries"`
			}
			require.NoError(t, json.Unmarshal(o.Bytes(), &j), o.String())
			want := "rabbitmq"
			if tc.json {
				want = "rabbitmq (JSON lines)"
			}
			assert.Equal(t, want, j.Format)
			for k, s := range storms {
				// The recoveries the log found within the storm: its flapping, from its first cut.
				var in []stormstats.Recovery
				for _, r := range j.Recoveries {
					at := time.Unix(0, int64(r.AtS*1e9))
					if at.After(s.from) && at.Before(s.to) && r.Count > 0 {
						in = append(in, stormstats.Recovery{Judgement: stormstats.Judgement{Verdict: r.Verdict}})
					}
				}
				if assert.NotEmpty(t, in, "seed %d: the log shows the storm's first cut", k+1) {
					assert.Equal(t, s.verdict, stormstats.Overall(in), "seed %d: the storm's recovery in the log, as at the proxy", k+1)
				}
			}
		})
	}
}
