package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/stormstats"
)

var mosquittoLog = flag.Bool("mosquitto.log", false, "make verdict-mosquitto: storm mosquitto in real time and judge its own log")

// The judge proved on a real broker's own log: mosquitto, logging as its
// package installs it (a file, whole Unix seconds), is stormed through the
// fault proxy by a flapping broker for 150 s: every session is cut 1 s
// after it began, so that the devices keep backing off and, under the
// formula, reach its 16 s cap together. Its log is then judged exactly as
// README.md tells a user to, `devicesim judge -expect VERDICT FILE`, and
// must say what the run says at the proxy (millisecond times): waves for
// the formula, spread for full jitter, five seeds each. Real time, all ten
// storms at once (under three minutes, 3,000 devices): make verdict-mosquitto
// runs it; make test does not.
func TestMosquittosOwnLogIsJudgedAsTheREADMESays(t *testing.T) {
	if !*mosquittoLog {
		t.Skip("make verdict-mosquitto runs it (-mosquitto.log): ten real-time storms")
	}
	for _, tc := range []struct {
		policy string
		want   stormstats.Verdict
	}{{"iotcore", stormstats.Waves}, {"full", stormstats.Spread}} {
		for seed := 1; seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/seed-%d", tc.policy, seed), func(t *testing.T) {
				t.Parallel()
				m := mosquittotest.Start(t, "")
				dir := t.TempDir()
				var out bytes.Buffer
				err := run(context.Background(), []string{"run", "-broker", m.URL(), "-scenario", "flapping",
					"-outage", "150s", "-flap", "1s", "-policy", tc.policy, "-max-backoff", "16s",
					"-devices", "300", "-time-scale", "1", "-seed", fmt.Sprint(seed), "-out", dir}, noenv, nil, &out, &out)
				servedOrBound(t, err, out.String())
				r, err := report.ReadReport(dir)
				require.NoError(t, err)
				require.NotNil(t, r.Broker)
				require.NotNil(t, r.Proxy)
				require.Equal(t, "proxy", r.Broker.MeasuredAt)
				// Every connection the proxy saw mosquitto answer is in its
				// log (the boot's 300 too) before the log is read.
				require.NoError(t, m.AwaitAccepted(300+r.Proxy.Answered))
				m.Stop()

				// The README's recipe, word for word: its exit status is the test.
				var text bytes.Buffer
				recipeErr := run(context.Background(), []string{"judge", "-expect", string(tc.want), m.LogFile()}, noenv, nil, &text, &text)
				// The same log as JSON, for what the judge made of it.
				var o, e bytes.Buffer
				err = run(context.Background(), []string{"judge", "-json", m.LogFile()}, noenv, nil, &o, &e)
				require.NoError(t, err, e.String())
				var j struct {
					Format  string             `json:"format"`
					TickS   float64            `json:"tick_s"`
					Verdict stormstats.Verdict `json:"verdict"`
					Reason  string             `json:"reason"`
				}
				require.NoError(t, json.Unmarshal(o.Bytes(), &j), "%s\n%s", o.String(), e.String())
				t.Logf("at the proxy: %s (%s); mosquitto's log (%s, tick %g s): %s (%s)", r.Broker.Judgement.Verdict,
					r.Broker.Judgement.Reason, j.Format, j.TickS, j.Verdict, j.Reason)
				assert.Equal(t, tc.want, r.Broker.Judgement.Verdict, "the run's own verdict at the proxy")
				assert.NoError(t, recipeErr, "devicesim judge -expect %s on mosquitto's log:\n%s", tc.want, text.String())
				assert.Equal(t, tc.want, j.Verdict)
				assert.Equal(t, "mosquitto", j.Format)
				assert.Equal(t, 1.0, j.TickS, "mosquitto stamps whole seconds")
			})
		}
	}
}
