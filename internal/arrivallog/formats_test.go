package arrivallog_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog"
)

// Every broker log in testdata/brokers (README.md there says what wrote
// each, or the source file or page it follows): the format taken, the
// connects read as arrivals, every other line counted by what it says,
// exact copies dropped.
func TestBrokerLogFixtures(t *testing.T) {
	written := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for file, want := range map[string]struct {
		format   string
		connects int
		kinds    string
		copies   int
	}{
		"mosquitto-2.0.11-file-epoch.log": {"mosquitto", 10,
			"10 connect, 11 disconnect, 4 refused, 1 broker start, 1 broker stop, 21 other (tcp accept 15, bridge 5, broker running 1)", 0},
		"mosquitto-2.0.11-file-isoz.log": {"mosquitto (ISO times)", 10,
			"10 connect, 11 disconnect, 4 refused, 1 broker start, 1 broker stop, 23 other (tcp accept 15, bridge 7, broker running 1)", 0},
		"mosquitto-2.0.11-file-iso-debug.log": {"mosquitto (ISO times); times without a zone read as UTC (-tz names another zone)", 10,
			"10 connect, 11 disconnect, 7 refused, 1 broker start, 1 broker stop, 34 other (tcp accept 15, CONNACK 11, bridge 7, broker running 1)", 0},
		"mosquitto-2.0.11-devlog-datagrams.txt": {"mosquitto under syslog, RFC 3164 stamps (rsyslog's traditional format, journalctl -o short); " +
			"times without a zone read as UTC (-tz names another zone); year 2026 assumed", 6,
			"6 connect, 6 disconnect, 2 broker start, 2 broker stop, 8 other (tcp accept 6, broker running 2)", 0},
		"mosquitto-2.0.11-rsyslog-traditional.log": {"mosquitto under syslog, RFC 3164 stamps (rsyslog's traditional format, journalctl -o short)", 3,
			"3 connect, 3 disconnect, 1 broker start, 1 broker stop, 4 other (tcp accept 3, broker running 1)", 0},
		"mosquitto-2.0.11-rsyslog-debian12-default.log": {"mosquitto under syslog, RFC 3339 stamps (rsyslog's default, journalctl -o short-iso); " +
			"the envelope's finer stamps taken", 3, "3 connect, 3 disconnect, 1 broker start, 1 broker stop, 4 other (tcp accept 3, broker running 1)", 0},
		"mosquitto-2.0.11-rsyslog-rfc5424.log": {"mosquitto under syslog (RFC 5424); the envelope's finer stamps taken", 3,
			"3 connect, 3 disconnect, 1 broker start, 1 broker stop, 4 other (tcp accept 3, broker running 1)", 0},
		"mosquitto-2.0.11-journalctl-short.txt": {"mosquitto under syslog, RFC 3164 stamps (rsyslog's traditional format, journalctl -o short)", 4,
			"4 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		"mosquitto-2.0.11-journalctl-short-precise.txt": {"mosquitto under syslog, RFC 3164 stamps (rsyslog's traditional format, journalctl -o short)", 4,
			"4 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		"mosquitto-2.0.11-journalctl-short-iso.txt": {"mosquitto under syslog, RFC 3339 stamps (rsyslog's default, journalctl -o short-iso)", 4,
			"4 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		"mosquitto-2.0.11-journalctl-short-iso-precise.txt": {"mosquitto under syslog, RFC 3339 stamps (rsyslog's default, journalctl -o short-iso); " +
			"the envelope's finer stamps taken", 4, "4 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		"mosquitto-2.0.11-journalctl-short-unix.txt": {"mosquitto under journalctl -o short-unix; the envelope's finer stamps taken", 4,
			"4 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		"mosquitto-2.0.11-journalctl-short-full.txt": {"mosquitto under journalctl -o short-full", 4,
			"4 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		// journald's stdout stream stamps a chunk of lines alike: its stamps are not taken.
		"mosquitto-2.0.11-journalctl-json.txt": {"mosquitto under journalctl -o json", 5,
			"5 connect, 4 disconnect, 2 broker start, 2 broker stop, 6 other (tcp accept 4, broker running 2)", 0},
		"rabbitmq-3.10.8-text.log": {"rabbitmq", 10,
			"10 connect, 10 disconnect, 8 refused, 1 broker start, 1 broker stop, 15 other (refusal reason 8, subscribe 4, broker lifecycle 3)", 0},
		"rabbitmq-3.10.8-json.log": {"rabbitmq (JSON lines)", 3,
			"3 connect, 3 disconnect, 2 refused, 1 broker start, 1 broker stop, 26 other (other 20, broker lifecycle 4, refusal reason 2)", 0},
		"emqx-5.8.9-text.log": {"emqx", 1,
			"1 connect, 6 disconnect, 2 refused, 1 broker start, 2 broker stop, 4 other (authentication 2, CONNECT received 1, flapping detected 1)", 0},
		"emqx-5.8.9-json.log": {"emqx (JSON lines)", 1,
			"1 connect, 2 disconnect, 2 refused, 1 broker start, 2 broker stop, 3 other (CONNECT received 1, authentication 1, flapping detected 1)", 0},
		"hivemq-event.log": {"hivemq; times without a zone read as UTC (-tz names another zone)", 3,
			"3 connect, 5 disconnect, 2 refused, 3 other (message dropped 2, session expired 1)", 0},
		"vernemq-trace.log":          {"vernemq", 1, "1 connect, 1 refused, 2 other (CONNECT received 2)", 0},
		"aws-iot-lifecycle.jsonl":    {"aws-iot lifecycle events (JSON lines)", 1, "1 connect, 1 disconnect, 1 refused, 1 other (subscribed 1)", 1},
		"aws-iot-logs-v2.jsonl":      {"aws-iot CloudWatch logs (JSON lines)", 1, "1 connect, 2 disconnect, 1 refused, 1 other (Subscribe 1)", 0},
		"aws-cloudwatch-export.json": {"aws-iot lifecycle events (a JSON document); the envelope's finer stamps taken", 1, "1 connect, 1 disconnect", 0},
		"aws-s3-export.log": {"aws-iot lifecycle events under docker or kubectl logs --timestamps; the envelope's finer stamps taken", 1,
			"1 connect, 1 disconnect", 0},
		"azure-eventgrid.json":   {"azure-iot device connection events (JSON lines)", 2, "2 connect, 1 disconnect", 0},
		"azure-connections.json": {"azure-iot Connections logs (a JSON document)", 2, "2 connect, 1 disconnect", 0},
	} {
		f, err := os.Open(filepath.Join("testdata", "brokers", file))
		require.NoError(t, err)
		l, err := arrivallog.ParseLog(f, arrivallog.Options{Written: written})
		f.Close()
		require.NoError(t, err, file)
		assert.Equal(t, want.format, l.Format, file)
		assert.Len(t, l.Times, want.connects, file)
		assert.Equal(t, want.kinds, l.KindSummary(), file)
		assert.Equal(t, want.copies, l.Duplicates, file)
		require.NotNil(t, l.Clients, "%s: the client IDs", file)
	}
}

// A log with no connect names the format taken and the lines it held, and
// what the broker needs to log its connects.
func TestBrokerLogsWithoutConnects(t *testing.T) {
	for file, want := range map[string]string{
		"vernemq-console.log": "no arrivals: 9 lines, read as vernemq; times without a zone read as UTC (-tz names another zone), and none a connect; " +
			"3 disconnect, 3 refused, 1 broker start, 1 broker stop (VerneMQ logs no successful connect at any level: trace the clients " +
			"with vmq-admin trace client, or log them from a plugin and read that with -pattern)",
		"hivemq.log": "no arrivals: 10 lines, read as hivemq; times without a zone read as UTC (-tz names another zone), and none a connect; " +
			"1 broker start, 1 broker stop, 2 other (broker lifecycle 2) (HiveMQ writes connects to event.log, not hivemq.log)",
	} {
		f, err := os.Open(filepath.Join("testdata", "brokers", file))
		require.NoError(t, err)
		_, err = arrivallog.ParseLog(f, arrivallog.Options{})
		f.Close()
		assert.ErrorIs(t, err, arrivallog.ErrNoArrivals, file)
		assert.EqualError(t, err, want, file)
	}
}

// A log's zone is the one its stamps were written in: their own offset,
// the zone taken for stamps without one, none for Unix times.
func TestLogZoneIsTheOneItWasWrittenIn(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, c := range []struct {
		file string
		in   *time.Location
		want string // the first arrival's instant in Log.Zone; "" for no zone
	}{
		{"mosquitto-2.0.11-rsyslog-rfc5424.log", nil, "2026-11-27T06:10:12.716+01:00"},
		{"rabbitmq-3.10.8-text.log", nil, "2026-11-27T05:06:56.613Z"},
		{"mosquitto-2.0.11-file-epoch.log", berlin, ""},
		{"hivemq-event.log", berlin, "2024-05-06T10:11:12.345+02:00"}, // summer time
		{"hivemq-event.log", nil, "2024-05-06T10:11:12.345Z"},
	} {
		f, err := os.Open(filepath.Join("testdata", "brokers", c.file))
		require.NoError(t, err)
		l, err := arrivallog.ParseLog(f, arrivallog.Options{Location: c.in})
		f.Close()
		require.NoError(t, err, c.file)
		if c.want == "" {
			assert.Nil(t, l.Zone, c.file)
			continue
		}
		require.NotNil(t, l.Zone, c.file)
		at := time.Unix(0, 0).Add(slices.Min(l.Times)).In(l.Zone).Format("2006-01-02T15:04:05.999Z07:00")
		assert.True(t, strings.HasSuffix(at, c.want), "%s in %v: %s", c.file, c.in, at)
	}
}
