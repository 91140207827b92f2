package textline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each envelope takes its own lines and leaves others.
func TestEnvelopes(t *testing.T) {
	for _, tc := range []struct {
		env   Envelope
		in    string
		ok    bool
		ident string
		msg   string
	}{
		{Syslog, "Nov 27 06:10:11 vm mosquitto[15612]: 1795756211: mosquitto version 2.0.11 running", true, "mosquitto", "1795756211: mosquitto version 2.0.11 running"},
		{Syslog, "<30>Nov 27 06:07:43 mosquitto[11306]: 1795756063: x", true, "mosquitto", "1795756063: x"},
		{Syslog, "2026-11-27T06:10:12.716781+01:00 vm mosquitto[15612]: x", true, "mosquitto", "x"},
		{Syslog, "1795756079.601235 vm mosquitto[12310]: x", true, "mosquitto", "x"},
		{Syslog, "Fri 2026-11-27 06:08:02 CET vm systemd[1]: Stopping Mosquitto MQTT Broker...", true, "systemd", "Stopping Mosquitto MQTT Broker..."},
		// mosquitto's own stamp
		{Syslog, "1700000000: New client connected from a:1 as b (p2, c1, k30).", false, "", ""},
		// docker's, not a tag
		{Syslog, "2026-11-27T05:08:45.924768120Z 1795756125: mosquitto version 2.0.18 starting", false, "", ""},
		// RabbitMQ's
		{Syslog, "2026-11-27 04:02:33.046092+00:00 [info] <0.521.0> accepting MQTT connection", false, "", ""},
		{RFC5424, "<29>1 2026-11-27T06:08:46.921120+01:00 vm mosquitto 13704 - -  1795756126: x", true, "mosquitto", "1795756126: x"},
		{RFC5424, `<29>1 2026-11-27T06:08:46Z vm mosquitto 13704 ID47 [exampleSDID@32473 iut="3"] ` + "\xef\xbb\xbfx", true, "mosquitto", "x"},
		{RFC5424, "<29>2 2026-11-27T06:08:46Z vm mosquitto 13704 - - x", false, "", ""},
		{Stamped, "2026-11-27T05:08:45.924768120Z 1795756125: x", true, "", "1795756125: x"},
		{Stamped, "2026-11-27 05:08:45 1795756125: x", false, "", ""}, // no zone: not docker's
		{CRI, "2026-11-27T06:08:47.369180000+01:00 stderr F 1795756127: x", true, "", "1795756127: x"},
		{CRI, "2026-11-27T06:08:47.369Z stdin F x", false, "", ""},
	} {
		w, ok := tc.env.Strip([]byte(tc.in))
		require.Equal(t, tc.ok, ok, tc.in)
		if ok {
			assert.Equal(t, tc.ident, string(w.Ident), tc.in)
			assert.Equal(t, tc.msg, string(w.Msg), tc.in)
		}
	}
	assert.True(t, IsJournalMarker([]byte("-- Boot 4eacfb40187d4912b31aebcc2a731554 --")))
	assert.True(t, IsJournalMarker([]byte("-- No entries --")))
	assert.False(t, IsJournalMarker([]byte("-- a line of a broker")))
}
