package device_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/testbroker"
)

// logLines collects JSON log lines, from any goroutine.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines logged so far, each decoded.
func (l *logLines) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// routedPahoLogs routes paho's log and the agent's to one JSON logger at
// debug, until the test ends.
func routedPahoLogs(t *testing.T) (*slog.Logger, *logLines) {
	logs := &logLines{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	device.RoutePahoLogs(log)
	t.Cleanup(func() { device.RoutePahoLogs(nil) })
	return log, logs
}

// A storm as the log tells it, on a fake clock (a synctest bubble): the
// broker is down for two attempts, refuses two with a CONNACK (3 on 3.1.1,
// 0x89 server busy on 5), accepts, ends the session, accepts again, and
// the agent is stopped; it subscribes at each connect. At info and above
// the log holds one line a failed attempt, with its endpoint, attempt
// number, error, the code only when a CONNACK came, and the wait the agent
// chose (the one it then waited) and why; one for the loss with its wait;
// and no line of paho's. paho's own lines on the same events are all at
// debug. Nothing is logged at warn or error, the stop included.
func TestAStormLogsOneInfoLineAnAttemptWithItsWait(t *testing.T) {
	bothProtocols(t, func(t *testing.T, proto device.Protocol) {
		synctest.Test(t, func(t *testing.T) {
			log, logs := routedPahoLogs(t)
			b, err := testbroker.New(testbroker.Config{Transport: testbroker.Memory})
			require.NoError(t, err)
			defer b.Close()
			const down, refused = 2, 2
			b.Faults().BeginOutage()
			var waits []time.Duration // each EventBackingOff's, in order
			failures := 0
			connected := make(chan struct{}, 2)
			tm := device.DefaultTiming()
			agent, err := device.New(device.Config{Broker: "tcp://broker:1883", ClientID: "dev-1", Protocol: proto,
				Dial: b.DialContext, Timing: &tm, Source: rand.NewPCG(1, 1), Logger: log,
				OnEvent: func(e device.Event) { // on the agent's loop: the broker changes before the next attempt
					switch e.Kind {
					case device.EventBackingOff:
						waits = append(waits, e.Delay)
					case device.EventAttemptFailed:
						switch failures++; failures {
						case down:
							assert.NoError(t, b.Faults().EndOutage()) // not require: the agent's goroutine
							assert.NoError(t, b.Faults().BeginBusy(0x89))
						case down + refused:
							b.Faults().EndBusy()
						}
					case device.EventConnected:
						connected <- struct{}{}
					}
				}})
			require.NoError(t, err)
			// made at every connect: paho warns of each SUBACK
			require.NoError(t, agent.Subscribe(context.Background(), "cmd/dev-1", 1, func(string, []byte) {}))
			require.NoError(t, agent.Start(context.Background()))
			<-connected
			require.Equal(t, 1, b.Faults().Drain(0x8B, "")) // server shutting down: DISCONNECT on 5, closed on 3.1.1
			<-connected
			require.NoError(t, agent.Stop(context.Background()))

			var failed, lost []map[string]any
			pahoDebug := 0
			for _, l := range logs.lines(t) {
				switch {
				case l["source"] == "paho":
					assert.Equal(t, "DEBUG", l["level"], "paho's line at debug: %v", l)
					pahoDebug++
				case l["level"] != "INFO" && l["level"] != "DEBUG":
					t.Errorf("a line at %v: %v", l["level"], l)
				case l["msg"] == "connect failed":
					failed = append(failed, l)
				case l["msg"] == "connection lost":
					lost = append(lost, l)
				}
			}
			if proto == device.MQTT311 {
				assert.NotZero(t, pahoDebug, "paho's lines are there, at debug")
			}
			require.Len(t, failed, down+refused, "one line a failed attempt")
			require.Len(t, lost, 1)
			require.Len(t, waits, down+refused+2, "the boot spread's, the failures', the loss's")
			for i, l := range failed {
				assert.Equal(t, float64(i+1), l["attempt"])
				assert.Equal(t, "tcp://broker:1883", l["endpoint"])
				assert.NotEmpty(t, l["error"])
				assert.Equal(t, float64(waits[i+1].Round(time.Millisecond)), l["wait"], "the wait it then waited: %v", l)
				code, hasCode := l["code"]
				if i < down {
					assert.False(t, hasCode, "no CONNACK, no code: %v", l)
					assert.Contains(t, l["why"], "policy iotcore(")
					continue
				}
				if proto == device.MQTT5 {
					assert.Equal(t, float64(0x89), code)
					assert.Equal(t, "broker back-pressure: the policy's wait stretched", l["why"])
				} else {
					assert.Equal(t, float64(3), code, "CONNACK 3, server unavailable")
					assert.Contains(t, l["why"], "policy iotcore(")
				}
			}
			assert.Equal(t, float64(waits[len(waits)-1].Round(time.Millisecond)), lost[0]["wait"])
			assert.Contains(t, lost[0]["why"], "policy iotcore(")
		})
	})
}

// paho's lines are known by the function that logs them: the same text
// from elsewhere keeps its level, and so does any line of paho's that is
// not routine.
func TestPahoLinesAreKnownByWhereTheyComeFrom(t *testing.T) {
	_, logs := routedPahoLogs(t)
	paho.WARN.Println("[store]   ", "memorystore wiped") // not from paho's store
	paho.ERROR.Println("[client]  ", "Failed to connect to a broker")
	store := paho.NewMemoryStore()
	store.Del("o.1") // a packet that crossed a stop
	store.Open()
	store.Reset()    // at every connect
	store.Del("o.1") // at every SUBACK
	store.Get("o.1") // paho never asks for what it has not stored
	store.Close()
	got := map[string]string{}
	for _, l := range logs.lines(t) {
		got[l["msg"].(string)] += l["level"].(string) + " "
	}
	assert.Equal(t, map[string]string{
		"[store]    memorystore wiped":                        "WARN DEBUG ",
		"[client]   Failed to connect to a broker":            "ERROR ",
		"[store]    Trying to use memory store, but not open": "DEBUG ",
		"[store]    memorystore del: message 1 not found":     "DEBUG ",
		"[store]    memorystore get: message 1 not found":     "ERROR ",
	}, got)
}
