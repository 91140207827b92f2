package arrivallog_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/disruption"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// A fleet's night, as each broker, service and carrier here writes it:
// the devices connect at boot, the broker drops every session at once (or
// stops and starts again) at 200 s, and the fleet comes back
// either smoothly or in rounds. Every format must say, from its own lines,
// where the disruption was and what the recovery was.

// nightEvent is one thing a log records: a connect, a session's end, a
// refused attempt, the broker's stop or start.
type nightEvent struct {
	t    float64 // seconds after the night began
	kind arrivallog.Kind
	dev  int
	seq  int // the connection's number, for the formats that name it
}

const (
	nightDevices = 300
	nightDrop    = 200.0            // when the disruption strikes
	nightEpoch   = 1795755600 * 1e9 // 2026-11-27T05:00:00Z, the night's 0
	roundGap     = 8.0              // the waves' rounds, 8 s apart
	berlin       = "Europe/Berlin"  // where the syslog and mosquitto stamps are written
	nightHost    = "gw-7"           // the broker's host
	nightListen  = "10.0.0.2:1883"  // its listener
	nightCluster = "/SUBSCRIPTIONS/0000/RESOURCEGROUPS/iot/PROVIDERS/MICROSOFT.DEVICES/IOTHUBS/fleet-hub"
)

// night is the events of one night, sorted by time: 300 devices booting
// over a minute; at 200 s a drop (every session's end logged within 200
// ms) or a restart (a stop line, 30 s without the broker, a start line);
// then the recovery, smooth (a step up decaying with tau 20 s) or in four
// rounds 8 s apart, a quarter of the fleet admitted in each within a
// second, the others refused until their round.
func night(r *rand.Rand, waves, restart bool) []nightEvent {
	var ev []nightEvent
	seq := 0
	last := make([]int, nightDevices) // each device's connection
	conn := func(t float64, dev int) {
		seq++
		last[dev] = seq
		ev = append(ev, nightEvent{t, arrivallog.KindConnect, dev, seq})
	}
	ev = append(ev, nightEvent{t: 0, kind: arrivallog.KindStart})
	for dev := range nightDevices {
		conn(1+60*r.Float64(), dev)
	}
	back := nightDrop + 1
	if restart {
		ev = append(ev, nightEvent{t: nightDrop, kind: arrivallog.KindStop}, nightEvent{t: nightDrop + 30, kind: arrivallog.KindStart})
		back = nightDrop + 30.5
	} else {
		for dev := range nightDevices {
			ev = append(ev, nightEvent{t: nightDrop + 0.2*r.Float64(), kind: arrivallog.KindDisconnect, dev: dev, seq: last[dev]})
		}
	}
	for dev := range nightDevices {
		if !waves {
			conn(back+20*r.ExpFloat64(), dev)
			continue
		}
		round := dev % 4
		for k := range round {
			ev = append(ev, nightEvent{t: back + roundGap*float64(k) + r.Float64(), kind: arrivallog.KindRefused, dev: dev})
		}
		conn(back+roundGap*float64(round)+r.Float64(), dev)
	}
	slices.SortStableFunc(ev, func(a, b nightEvent) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	return ev
}

// at is an event's time on the night's clock.
func (e nightEvent) at() time.Time { return time.Unix(0, int64(nightEpoch+e.t*1e9)).UTC() }

func (e nightEvent) unix() int64 { return e.at().Unix() }

func (e nightEvent) client() string { return fmt.Sprintf("dev-%d", e.dev) }

// peer is the device's address and source port for this connection.
func (e nightEvent) peer() string {
	return fmt.Sprintf("10.1.%d.%d:%d", e.dev/250, e.dev%250, 30000+e.seq%30000)
}

func inZone(t time.Time, zone string) time.Time { return t.In(mustZone(zone)) }

// mosquittoMessage is what mosquitto 2.0 writes for an event (src/loop.c,
// handle_connect.c, mosquitto.c at v2.0.11), before its stamp: the lines
// of its own log file, of syslog and of its container.
func mosquittoMessage(e nightEvent) []string {
	switch e.kind {
	case arrivallog.KindConnect:
		return []string{fmt.Sprintf("New connection from %s on port 1883.", e.peer()),
			fmt.Sprintf("New client connected from %s as %s (p2, c1, k30).", e.peer(), e.client())}
	case arrivallog.KindDisconnect:
		return []string{fmt.Sprintf("Client %s closed its connection.", e.client())}
	case arrivallog.KindRefused:
		return []string{fmt.Sprintf("New connection from %s on port 1883.", e.peer()), "Client <unknown> disconnected, not authorised."}
	case arrivallog.KindStart:
		return []string{"mosquitto version 2.0.11 starting", "Config loaded from /etc/mosquitto/mosquitto.conf.",
			"Opening ipv4 listen socket on port 1883.", "mosquitto version 2.0.11 running"}
	case arrivallog.KindStop:
		return []string{"mosquitto version 2.0.11 terminating", "Saving in-memory database to /var/lib/mosquitto/mosquitto.db."}
	}
	return nil
}

// withStamp puts mosquitto's own stamp before each of its messages, as
// log__vprintf writes it ("%s: %s"; src/logging.c at v2.0.11).
func withStamp(stamp string, msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = stamp + ": " + m
	}
	return out
}

// nightFormat writes a night as one log.
type nightFormat struct {
	name string // as the test names it
	want string // what Log.Format must start with
	opts arrivallog.Options
	// lines writes an event's lines (nil for a document format)
	lines func(e nightEvent, r *rand.Rand) []string
	// doc writes the whole night as one document
	doc func(ev []nightEvent, r *rand.Rand) string
	// restarts: the format can show a broker's stop and start
	restarts bool
	// copies: a log shipper repeats some of its lines (at-least-once)
	copies bool
}

func mosquittoFormats() []nightFormat {
	unixStamp := func(e nightEvent) string { return fmt.Sprint(e.unix()) }
	return []nightFormat{
		{name: "mosquitto's file", want: "mosquitto", restarts: true,
			lines: func(e nightEvent, _ *rand.Rand) []string { return withStamp(unixStamp(e), mosquittoMessage(e)) }},
		{name: "mosquitto, log_timestamp_format %Y-%m-%dT%H:%M:%S%z in Berlin", want: "mosquitto (ISO times)", restarts: true,
			lines: func(e nightEvent, _ *rand.Rand) []string {
				return withStamp(inZone(e.at(), berlin).Format("2006-01-02T15:04:05-0700"), mosquittoMessage(e))
			}},
		{name: "mosquitto, log_timestamp_format %Y-%m-%d %H:%M:%S in Berlin, -tz", want: "mosquitto (ISO times)", restarts: true,
			opts: arrivallog.Options{Location: mustZone(berlin)},
			lines: func(e nightEvent, _ *rand.Rand) []string {
				return withStamp(inZone(e.at(), berlin).Format("2006-01-02 15:04:05"), mosquittoMessage(e))
			}},
		{name: "mosquitto, a log_timestamp_format of the user's, -time-layout", want: "mosquitto", restarts: true,
			opts: arrivallog.Options{TimeLayout: "%d/%m/%Y %H:%M:%S"},
			lines: func(e nightEvent, _ *rand.Rand) []string {
				return withStamp(e.at().Format("02/01/2006 15:04:05"), mosquittoMessage(e))
			}},
		// rsyslog's traditional file format (RSYSLOG_TraditionalFileFormat, tools/smtradfile.c):
		// an RFC 3164 stamp in local time, the host, the tag; mosquitto keeps its own stamp.
		{name: "mosquitto under rsyslog, traditional format", want: "mosquitto under syslog, RFC 3164", restarts: true,
			lines: func(e nightEvent, _ *rand.Rand) []string {
				prefix := inZone(e.at(), berlin).Format("Jan _2 15:04:05") + " " + nightHost + " mosquitto[612]: "
				return prefixed(prefix, withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// rsyslog's default on Debian 12 (RSYSLOG_FileFormat): RFC 3339 with µs and the offset.
		{name: "mosquitto under rsyslog, Debian's default", want: "mosquitto under syslog, RFC 3339", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(900)) * time.Microsecond)
				prefix := inZone(at, berlin).Format("2006-01-02T15:04:05.000000-07:00") + " " + nightHost + " mosquitto[612]: "
				return prefixed(prefix, withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// RSYSLOG_SyslogProtocol23Format: <PRI>1, two spaces after the structured data.
		{name: "mosquitto under rsyslog, RFC 5424", want: "mosquitto under syslog (RFC 5424)", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(900)) * time.Microsecond)
				prefix := "<29>1 " + at.Format("2006-01-02T15:04:05.000000Z07:00") + " " + nightHost + " mosquitto 612 - -  "
				return prefixed(prefix, withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// log_dest syslog with log_timestamp false: the envelope's stamp alone,
		// local time without a zone.
		{name: "mosquitto under syslog without its own stamp, -tz", want: "mosquitto under syslog, RFC 3164", restarts: true,
			opts: arrivallog.Options{Location: mustZone(berlin), Written: time.Unix(0, nightEpoch).Add(24 * time.Hour)},
			lines: func(e nightEvent, _ *rand.Rand) []string {
				return prefixed(inZone(e.at(), berlin).Format("Jan _2 15:04:05")+" "+nightHost+" mosquitto[612]: ", mosquittoMessage(e))
			}},
		// journalctl -o short-iso-precise (systemd src/shared/logs-show.c, output_short), systemd
		// 252's offset.
		{name: "mosquitto under journalctl -o short-iso-precise", want: "mosquitto under syslog, RFC 3339", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(900)) * time.Microsecond)
				prefix := inZone(at, berlin).Format("2006-01-02T15:04:05.000000-0700") + " " + nightHost + " mosquitto[612]: "
				return prefixed(prefix, withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// journalctl -o short-unix.
		{name: "mosquitto under journalctl -o short-unix", want: "mosquitto under journalctl -o short-unix", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(900)) * time.Microsecond)
				prefix := fmt.Sprintf("%d.%06d %s mosquitto[612]: ", at.Unix(), at.Nanosecond()/1000, nightHost)
				return prefixed(prefix, withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// journalctl -o json: every value a string, __REALTIME_TIMESTAMP in µs.
		{name: "mosquitto under journalctl -o json", want: "mosquitto under journalctl -o json", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range withStamp(unixStamp(e), mosquittoMessage(e)) {
					at := e.at().Add(time.Duration(r.IntN(900)) * time.Microsecond)
					b, _ := json.Marshal(map[string]string{"__REALTIME_TIMESTAMP": fmt.Sprint(at.UnixMicro()), "MESSAGE": m,
						"SYSLOG_IDENTIFIER": "mosquitto", "_PID": "612", "PRIORITY": "5", "_HOSTNAME": nightHost,
						"__CURSOR": fmt.Sprintf("s=1;i=%x", r.Int64()), "_BOOT_ID": "4eacfb40187d4912b31aebcc2a731554"})
					out = append(out, string(b))
				}
				return out
			}},
		// docker logs --timestamps (moby api/server/httputils/write_log_stream.go:
		// RFC3339NanoFixed).
		{name: "mosquitto under docker logs --timestamps", want: "mosquitto under docker or kubectl logs --timestamps", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(900_000)) * time.Nanosecond)
				return prefixed(at.Format("2006-01-02T15:04:05.000000000Z07:00")+" ", withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// The kubelet's CRI files (containerd internal/cri/io/logger.go: RFC3339Nano, trimmed).
		{name: "mosquitto in the kubelet's CRI files", want: "mosquitto under the kubelet's CRI log files", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(900_000)) * time.Nanosecond)
				return prefixed(at.Format(time.RFC3339Nano)+" stderr F ", withStamp(unixStamp(e), mosquittoMessage(e)))
			}},
		// docker's json-file (moby daemon/logger/jsonfilelog/jsonlog/jsonlogbytes.go).
		{name: "mosquitto in docker's json-file", want: "mosquitto under docker's json-file", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range withStamp(unixStamp(e), mosquittoMessage(e)) {
					at := e.at().Add(time.Duration(r.IntN(900_000)) * time.Nanosecond)
					b, _ := json.Marshal(map[string]string{"log": m + "\n", "stream": "stderr", "time": at.Format(time.RFC3339Nano)})
					out = append(out, string(b))
				}
				return out
			}},
	}
}

var zones sync.Map // name -> *time.Location

func mustZone(name string) *time.Location {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	zones.Store(name, loc)
	return loc
}

func prefixed(prefix string, lines []string) []string {
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return lines
}

// rabbitLine is a line of RabbitMQ's text formatter
// (deps/rabbit/apps/rabbitmq_prelaunch/src/rabbit_logger_text_fmt.erl at
// v3.10.8: time with µs and offset, level, process).
func rabbitLine(at time.Time, level string, pid int, msg string) string {
	return fmt.Sprintf("%s [%s] <0.%d.0> %s", at.Format("2006-01-02 15:04:05.000000-07:00"), level, pid, msg)
}

// rabbitMessages are the MQTT plugin's lines for an event
// (deps/rabbitmq_mqtt/src/rabbit_mqtt_reader.erl and
// rabbit_mqtt_processor.erl at v3.10.8; the node's in
// deps/rabbit/src/rabbit.erl): level, process, message.
func rabbitMessages(e nightEvent, v313 bool) [][3]string {
	pid := fmt.Sprint(1000 + e.seq)
	conn := e.peer() + " -> " + nightListen
	switch e.kind {
	case arrivallog.KindConnect:
		if v313 { // rabbit_mqtt_reader.erl:356 at v3.13.7
			return [][3]string{{"info", pid, fmt.Sprintf("Accepted MQTT connection %s for client ID %s", conn, e.client())}}
		}
		return [][3]string{{"info", pid, fmt.Sprintf("accepting MQTT connection <0.%s.0> (%s, client id: %s)", pid, conn, e.client())}}
	case arrivallog.KindDisconnect:
		quoted := `"` + conn + `"`
		if v313 {
			quoted = `<<"` + conn + `">>`
		}
		return [][3]string{{"info", pid, fmt.Sprintf("MQTT connection %s will terminate because peer closed TCP connection", quoted)}}
	case arrivallog.KindRefused:
		if v313 {
			return [][3]string{{"error", "77", "MQTT connection failed: access refused for user 'guest':user 'guest' - invalid credentials"},
				{"error", "77", fmt.Sprintf("Rejected MQTT connection %s with Connect Reason Code 134", conn)}}
		}
		return [][3]string{{"error", "77", "MQTT login failed for user 'guest', authentication failed: Refused"},
			{"error", "77", fmt.Sprintf("MQTT connection %s is closing due to an authentication failure", conn)}}
	case arrivallog.KindStart:
		return [][3]string{{"info", "223", ""}, {"info", "223", " Starting RabbitMQ 3.10.8 on Erlang 25.2.3 [jit]"},
			{"info", "223", " Copyright (c) 2007-2022 VMware, Inc. or its affiliates."},
			{"info", "653", "Server startup complete; 1 plugins started."}, {"info", "653", " * rabbitmq_mqtt"}}
	case arrivallog.KindStop:
		return [][3]string{{"info", "1185", "RabbitMQ is asked to stop..."},
			{"info", "686", "stopped MQTT TCP listener on 0.0.0.0:1883"},
			{"info", "1185", "Successfully stopped RabbitMQ and its dependencies"}}
	}
	return nil
}

// emqxPairs are EMQX 5's key: value pairs for an event at debug
// (apps/emqx/src/emqx_channel.erl:575, emqx_connection.erl:666 and :893,
// emqx_machine_boot.erl at v5.8.9), in the text formatter's order
// (emqx_logger_textfmt.erl): tag, clientid, msg, peername, the rest.
func emqxPairs(e nightEvent) []map[string]any {
	base := func(msg string) map[string]any {
		return map[string]any{"clientid": e.client(), "msg": msg, "peername": e.peer(), "pid": fmt.Sprintf("<0.%d.0>", 4000+e.seq)}
	}
	switch e.kind {
	case arrivallog.KindConnect:
		in, out := base("mqtt_packet_received"), base("mqtt_packet_sent")
		in["tag"], out["tag"] = "MQTT", "MQTT"
		in["packet"] = fmt.Sprintf("CONNECT(Q0, R0, D0, ClientId=%s, ProtoName=MQTT, ProtoVsn=4, CleanStart=true, KeepAlive=30, Username=undefined, Password=)", e.client())
		out["packet"] = "CONNACK(Q0, R0, D0, AckFlags=0, ReasonCode=0)"
		return []map[string]any{in, out}
	case arrivallog.KindDisconnect:
		m := base("terminate")
		m["reason"], m["line"] = "{shutdown,tcp_closed}", 666
		return []map[string]any{m}
	case arrivallog.KindRefused:
		m := base("mqtt_packet_sent")
		m["tag"], m["packet"] = "MQTT", "CONNACK(Q0, R0, D0, AckFlags=0, ReasonCode=137)"
		return []map[string]any{m}
	case arrivallog.KindStart:
		return []map[string]any{{"msg": "(re)starting_emqx_apps"}}
	case arrivallog.KindStop:
		return []map[string]any{{"msg": "stopping_emqx_apps"}}
	}
	return nil
}

func emqxLevel(m map[string]any) string {
	switch m["msg"] {
	case "terminate":
		return "info"
	case "(re)starting_emqx_apps", "stopping_emqx_apps":
		return "notice"
	}
	return "debug"
}

// emqxText writes the pairs as the text formatter does: tag, clientid,
// msg, peername, then the rest sorted by key.
func emqxText(m map[string]any) string {
	var parts []string
	for _, k := range []string{"tag", "clientid", "msg", "peername"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s: %v", k, v))
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains([]string{"tag", "clientid", "msg", "peername", "pid"}, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%s: %v", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func brokerFormats() []nightFormat {
	return []nightFormat{
		{name: "RabbitMQ 3.10, text", want: "rabbitmq", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range rabbitMessages(e, false) {
					out = append(out, strings.TrimRight(rabbitLine(e.at().Add(time.Duration(r.IntN(999))*time.Microsecond), m[0], atoiMust(m[1]), m[2]), " "))
				}
				return out
			}},
		{name: "RabbitMQ 3.13, text", want: "rabbitmq", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range rabbitMessages(e, true) {
					out = append(out, rabbitLine(e.at().Add(time.Duration(r.IntN(999))*time.Microsecond), m[0], atoiMust(m[1]), m[2]))
				}
				return out
			}},
		// The JSON formatter (rabbit_logger_json_fmt.erl): time, level, msg, then the rest sorted.
		{name: "RabbitMQ 3.10, JSON formatter", want: "rabbitmq (JSON lines)", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range rabbitMessages(e, false) {
					at := e.at().Add(time.Duration(r.IntN(999)) * time.Microsecond)
					out = append(out, fmt.Sprintf(`{"time":%q,"level":%q,"msg":%q,"domain":"rabbitmq.connection","pid":"<0.%s.0>"}`,
						at.Format("2006-01-02 15:04:05.000000-07:00"), m[0], m[2], m[1]))
				}
				return out
			}},
		{name: "EMQX 5, text at debug", want: "emqx", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range emqxPairs(e) {
					at := e.at().Add(time.Duration(r.IntN(999)) * time.Microsecond)
					out = append(out, fmt.Sprintf("%s [%s] %s", at.Format("2006-01-02T15:04:05.000000-07:00"), emqxLevel(m), emqxText(m)))
				}
				return out
			}},
		{name: "EMQX 5, text with timestamp_format = epoch", want: "emqx", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range emqxPairs(e) {
					at := e.at().Add(time.Duration(r.IntN(999)) * time.Microsecond)
					out = append(out, fmt.Sprintf("%d [%s] %s", at.UnixMicro(), emqxLevel(m), emqxText(m)))
				}
				return out
			}},
		// The JSON formatter (emqx_logger_jsonfmt.erl): time in Unix µs.
		{name: "EMQX 5, JSON formatter", want: "emqx (JSON lines)", restarts: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var out []string
				for _, m := range emqxPairs(e) {
					at := e.at().Add(time.Duration(r.IntN(999)) * time.Microsecond)
					m["time"], m["level"] = at.UnixMicro(), emqxLevel(m)
					b, _ := json.Marshal(m)
					out = append(out, string(b))
				}
				return out
			}},
		// HiveMQ's event.log (src/main/java/com/hivemq/logging/EventLog.java;
		// logback "%-24(%d)- %msg%n").
		{name: "HiveMQ event.log", want: "hivemq",
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(999)) * time.Millisecond).Format("2006-01-02 15:04:05,000")
				ip, _, _ := strings.Cut(e.peer(), ":")
				switch e.kind {
				case arrivallog.KindConnect:
					return []string{fmt.Sprintf("%s - Client ID: %s, IP: %s, Clean Start: true, Session Expiry: 0 connected.", at, e.client(), ip)}
				case arrivallog.KindDisconnect:
					return []string{fmt.Sprintf("%s - Client ID: %s, IP: %s disconnected ungracefully from TCP Listener on port: 1883.", at, e.client(), ip)}
				case arrivallog.KindRefused:
					return []string{fmt.Sprintf("%s - Client ID: %s, IP: %s was disconnected. reason: Authentication failed.", at, e.client(), ip)}
				}
				return nil
			}},
		// VerneMQ's tracer (apps/vmq_server/src/vmq_tracer.erl) for the CONNACKs, and console.log
		// (vmq_ranch.erl:211, the logger template in files/vmq.schema) for the sessions' ends.
		{name: "VerneMQ, traced", want: "vernemq",
			lines: func(e nightEvent, r *rand.Rand) []string {
				pid := fmt.Sprintf("<0.%d.0>", 2000+e.seq)
				switch e.kind {
				case arrivallog.KindConnect:
					at := e.at().Format("2006-01-02T15:04:05Z")
					return []string{fmt.Sprintf(`%s %s MQTT RECV: CID: "%s" CONNECT(c: %s, v: 4, u: undefined, p: undefined, cs: 1, ka: 30)`, at, pid, e.client(), e.client()),
						fmt.Sprintf(`%s %s MQTT SEND: CID: "%s" CONNACK(sp: 0, rc: 0)`, at, pid, e.client())}
				case arrivallog.KindDisconnect:
					at := e.at().Add(time.Duration(r.IntN(999)) * time.Microsecond).Format("2006-01-02T15:04:05.000000-07:00")
					return []string{fmt.Sprintf(`%s [warning] %s vmq_ranch:teardown/2:211: session for {[],<<"%s">>} stopped abnormally due to 'econnreset'`, at, pid, e.client())}
				case arrivallog.KindRefused:
					at := e.at().Add(time.Duration(r.IntN(999)) * time.Microsecond).Format("2006-01-02T15:04:05.000000-07:00")
					return []string{fmt.Sprintf(`%s [warning] %s vmq_mqtt_fsm:check_user/2:764: can't authenticate client {[],<<"%s">>} from %s due to invalid_credentials`, at, pid, e.client(), e.peer())}
				}
				return nil
			}},
	}
}

func atoiMust(s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		panic(err)
	}
	return n
}

// awsLifecycle is an AWS IoT Core lifecycle event
// (docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
func awsLifecycle(e nightEvent, r *rand.Rand) map[string]any {
	m := map[string]any{"clientId": e.client(), "timestamp": e.at().UnixMilli(),
		"sessionIdentifier": fmt.Sprintf("%08x-0000-4000-8000-%012x", e.seq, e.dev), "principalIdentifier": "d1f0c0ffee", "versionNumber": e.seq}
	switch e.kind {
	case arrivallog.KindConnect:
		m["eventType"], m["ipAddress"] = "connected", strings.Split(e.peer(), ":")[0]
	case arrivallog.KindDisconnect:
		m["eventType"], m["clientInitiatedDisconnect"], m["disconnectReason"] = "disconnected", false, "CONNECTION_LOST"
	case arrivallog.KindRefused:
		m["eventType"], m["connectFailureReason"] = "connect_failed", "AUTHORIZATION_FAILED"
	default:
		return nil
	}
	return m
}

func cloudFormats() []nightFormat {
	return []nightFormat{
		{name: "AWS IoT Core lifecycle events, JSON lines", want: "aws-iot lifecycle events (JSON lines)", copies: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				if m := awsLifecycle(e, r); m != nil {
					b, _ := json.Marshal(m)
					return []string{string(b)}
				}
				return nil
			}},
		// aws logs filter-log-events (API_FilteredLogEvent), pretty-printed as the CLI writes it.
		{name: "AWS IoT Core lifecycle events, a CloudWatch Logs export", want: "aws-iot lifecycle events (a JSON document)",
			doc: func(ev []nightEvent, r *rand.Rand) string {
				var events []map[string]any
				for _, e := range ev {
					if m := awsLifecycle(e, r); m != nil {
						b, _ := json.Marshal(m)
						events = append(events, map[string]any{"logStreamName": "iot-lifecycle", "timestamp": m["timestamp"],
							"message": string(b), "ingestionTime": m["timestamp"].(int64) + 400, "eventId": fmt.Sprintf("%056d", len(events))})
					}
				}
				b, _ := json.MarshalIndent(map[string]any{"events": events, "searchedLogStreams": []any{}}, "", "    ")
				return string(b)
			}},
		// A CloudWatch Logs export to S3
		// (AmazonCloudWatch/latest/logs/S3Export.html): stamp, space, message.
		{name: "AWS IoT Core lifecycle events, exported to S3", want: "aws-iot lifecycle events under docker or kubectl logs --timestamps",
			lines: func(e nightEvent, r *rand.Rand) []string {
				if m := awsLifecycle(e, r); m != nil {
					b, _ := json.Marshal(m)
					return []string{time.UnixMilli(m["timestamp"].(int64)).UTC().Format("2006-01-02T15:04:05.000Z") + " " + string(b)}
				}
				return nil
			}},
		// AWSIotLogsV2 (docs.aws.amazon.com/iot/latest/developerguide/cwl-format.html).
		{name: "AWS IoT Core CloudWatch logs (AWSIotLogsV2)", want: "aws-iot CloudWatch logs (JSON lines)",
			lines: func(e nightEvent, r *rand.Rand) []string {
				m := map[string]any{"timestamp": e.at().Add(time.Duration(r.IntN(999)) * time.Millisecond).Format("2006-01-02 15:04:05.000"),
					"logLevel": "INFO", "traceId": fmt.Sprintf("%08x-d7f1-feae-169f-82263394fbdb", e.seq), "accountId": "123456789012",
					"protocol": "MQTT", "clientId": e.client(), "principalId": "145179c40e", "sourceIp": strings.Split(e.peer(), ":")[0], "sourcePort": 13490}
				switch e.kind {
				case arrivallog.KindConnect:
					m["status"], m["eventType"] = "Success", "Connect"
				case arrivallog.KindDisconnect:
					m["status"], m["eventType"], m["logLevel"], m["reason"] = "Failure", "Disconnect", "ERROR", "MQTT_KEEP_ALIVE_TIMEOUT"
				case arrivallog.KindRefused:
					m["status"], m["eventType"], m["logLevel"], m["reason"] = "Failure", "Connect", "ERROR", "AUTHORIZATION_FAILURE"
				default:
					return nil
				}
				b, _ := json.Marshal(m)
				return []string{string(b)}
			}},
		// Event Grid's schema (learn.microsoft.com/azure/event-grid/event-schema-iot-hub), each
		// delivery an array.
		{name: "Azure IoT Hub events, Event Grid schema", want: "azure-iot device connection events (JSON lines)", copies: true,
			lines: func(e nightEvent, r *rand.Rand) []string {
				var ev string
				switch e.kind {
				case arrivallog.KindConnect:
					ev = "Microsoft.Devices.DeviceConnected"
				case arrivallog.KindDisconnect:
					ev = "Microsoft.Devices.DeviceDisconnected"
				default:
					return nil
				}
				m := map[string]any{"id": fmt.Sprintf("f6bbf8f4-d365-520d-a878-%012x", e.seq), "topic": nightCluster,
					"subject": "devices/" + e.client(), "eventType": ev,
					"eventTime": e.at().Add(time.Duration(r.IntN(9_999_999)) * 100 * time.Nanosecond).Format("2006-01-02T15:04:05.0000000Z"),
					"data": map[string]any{"deviceConnectionStateEventInfo": map[string]string{"sequenceNumber": fmt.Sprintf("%064X", e.seq)},
						"hubName": "fleet-hub", "deviceId": e.client()}, "dataVersion": "1", "metadataVersion": "1"}
				b, _ := json.Marshal([]any{m})
				return []string{string(b)}
			}},
		// The Connections category of IoT Hub's resource logs
		// (learn.microsoft.com/azure/iot-hub/monitor-iot-hub-reference#connections),
		// as {"records": [...]}.
		{name: "Azure IoT Hub Connections resource logs", want: "azure-iot Connections logs (a JSON document)",
			doc: func(ev []nightEvent, r *rand.Rand) string {
				var recs []map[string]any
				for _, e := range ev {
					op, level := "", "Information"
					switch e.kind {
					case arrivallog.KindConnect:
						op = "deviceConnect"
					case arrivallog.KindDisconnect:
						op, level = "deviceDisconnect", "Error"
					case arrivallog.KindRefused:
						op, level = "deviceConnect", "Error"
					default:
						continue
					}
					props, _ := json.Marshal(map[string]any{"deviceId": e.client(), "protocol": "Mqtt", "authType": nil,
						"maskedIpAddress": "24.9.142.XXX", "statusCode": nil})
					recs = append(recs, map[string]any{"time": e.at().Add(time.Duration(r.IntN(999)) * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
						"resourceId": nightCluster, "operationName": op, "category": "Connections", "level": level,
						"properties": string(props), "location": "westeurope"})
				}
				b, _ := json.MarshalIndent(map[string]any{"records": recs}, "", " ")
				return string(b)
			}},
		// Any other log, through -pattern.
		{name: "a log of the user's own, -pattern", want: "pattern",
			opts: arrivallog.Options{Pattern: `^\[(?P<time>[^\]]+)\] CONNECT (?P<client>\S+) accepted`, TimeLayout: "2006/01/02 15:04:05.000"},
			lines: func(e nightEvent, r *rand.Rand) []string {
				at := e.at().Add(time.Duration(r.IntN(999)) * time.Millisecond).Format("2006/01/02 15:04:05.000")
				switch e.kind {
				case arrivallog.KindConnect:
					return []string{fmt.Sprintf("[%s] CONNECT %s accepted", at, e.client())}
				case arrivallog.KindRefused:
					return []string{fmt.Sprintf("[%s] CONNECT %s refused", at, e.client())}
				}
				return nil
			}},
	}
}

// write renders a night in a format; with copies, a log shipper repeats
// one line in twenty, a few lines later, and how many it repeated.
func (f nightFormat) write(ev []nightEvent, r *rand.Rand) (string, int) {
	if f.doc != nil {
		return f.doc(ev, r), 0
	}
	var lines []string
	for _, e := range ev {
		lines = append(lines, f.lines(e, r)...)
	}
	copies := 0
	if f.copies {
		var out []string
		for i, l := range lines {
			out = append(out, l)
			if r.IntN(20) == 0 && i > 3 {
				out = append(out, lines[i-r.IntN(3)])
				copies++
			}
		}
		lines = out
	}
	return strings.Join(lines, "\n") + "\n", copies
}

// nightJudgement is what devicesim judge makes of a log: the disruptions
// it shows and the verdict by its recoveries (or as one series).
func nightJudgement(t *testing.T, l *arrivallog.Log) ([]disruption.Disruption, stormstats.Verdict) {
	found, recs, err := disruption.Recoveries(l)
	require.NoError(t, err)
	if found != nil {
		return found, stormstats.Overall(recs)
	}
	h, m, prep := l.Histogram()
	j, err := stormstats.Judge(h, m)
	require.NoError(t, err)
	return nil, prep.Qualify(j).Verdict
}

// Every format, on nights whose truth is known: a smooth recovery reads
// spread and four rounds 8 s apart read waves, after a drop whose
// sessions' ends the log shows, and after a restart where the format has
// the broker's stop line; the log's own lines mark the disruption, within
// a second of it; the connects, and only they, are the arrivals; a
// shipper's copies are dropped. 20 seeds each (make test), 200 with
// -stats.seeds 200.
func TestBrokerLogsAsTheyAreWritten(t *testing.T) {
	formats := append(append(mosquittoFormats(), brokerFormats()...), cloudFormats()...)
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			nightVerdicts(t, f)
		})
	}
}

func nightVerdicts(t *testing.T, f nightFormat) {
	{
		for _, restart := range []bool{false, true} {
			if restart && !f.restarts {
				continue
			}
			for _, waves := range []bool{false, true} {
				want := stormstats.Spread
				if waves {
					want = stormstats.Waves
				}
				wrong := 0
				for seed := range uint64(seeds()) {
					r := rand.New(rand.NewPCG(seed, 53))
					ev := night(r, waves, restart)
					log, copies := f.write(ev, r)
					o := f.opts
					if o.Written.IsZero() {
						o.Written = time.Unix(0, nightEpoch).Add(24 * time.Hour)
					}
					l, err := arrivallog.ParseLog(strings.NewReader(log), o)
					require.NoError(t, err, "%s, seed %d:\n%s", f.name, seed, head(log))
					require.True(t, strings.HasPrefix(l.Format, f.want), "%s: format %q", f.name, l.Format)
					connects := 0
					for _, e := range ev {
						if e.kind == arrivallog.KindConnect {
							connects++
						}
					}
					require.Len(t, l.Times, connects, "%s, seed %d: the connects, and only they", f.name, seed)
					// A shipper's copies are dropped, and lines that are the same by chance may be.
					require.GreaterOrEqual(t, l.Duplicates, copies, "%s, seed %d: a shipper's copies", f.name, seed)
					require.LessOrEqual(t, l.Duplicates, repeated(log), "%s, seed %d: only lines that repeat", f.name, seed)
					found, got := nightJudgement(t, l)
					if f.want == "pattern" {
						// its lines show no disruption: -disruptions names it
						found = []disruption.Disruption{{AtS: nightDrop}}
						recs, _, err := l.Recoveries([]time.Duration{0, time.Duration(nightEpoch + nightDrop*1e9)})
						require.NoError(t, err)
						got = stormstats.Overall(recs)
					}
					if got != want {
						wrong++
						t.Logf("%s, restart %v, seed %d: %s, want %s (disruptions %v)", f.name, restart, seed, got, want, found)
					}
					if assert.NotEmpty(t, found, "%s, seed %d: the disruption", f.name, seed) && f.want != "pattern" {
						assert.InDelta(t, float64(nightEpoch)/1e9+nightDrop, found[0].AtS, 1, "%s, seed %d: %s", f.name, seed, found[0].Why)
						why := "the sessions of" // a crowd of them ended at once
						if restart {
							why = "the broker logged"
						}
						assert.Contains(t, found[0].Why, why, "%s, seed %d", f.name, seed)
					}
				}
				assert.Zero(t, wrong, "%s, restart %v, %s: wrong verdicts in %d seeds", f.name, restart, want, seeds())
			}
		}
	}
}

// repeated counts the lines of a log that repeat one before them.
func repeated(log string) int {
	seen, n := map[string]bool{}, 0
	for _, l := range strings.Split(log, "\n") {
		if seen[l] && l != "" {
			n++
		}
		seen[l] = true
	}
	return n
}

func head(s string) string {
	lines := strings.SplitN(s, "\n", 8)
	return strings.Join(lines[:min(7, len(lines))], "\n")
}

// AWS IoT Core's lifecycle stream carries both kinds of event. A fleet
// dropped twice, 20 s apart, coming back smoothly each time (a step up
// decaying with tau 8 s), was read as a burst every 20 s, waves, when
// every line counted as an arrival. Its disconnected events now mark both
// drops, and the fleet reads spread; four rounds 8 s apart after the
// second drop read waves. 20 seeds (make test), 200 with -stats.seeds 200.
func TestAWSStreamDroppedTwiceIsTwoRecoveries(t *testing.T) {
	for _, waves := range []bool{false, true} {
		want := stormstats.Spread
		if waves {
			want = stormstats.Waves
		}
		for seed := range uint64(seeds()) {
			r := rand.New(rand.NewPCG(seed, 59))
			var ev []nightEvent
			seq := 0
			up := make([]float64, nightDevices) // when each device is next connected
			for dev := range nightDevices {
				seq++
				up[dev] = 1 + 30*r.Float64()
				ev = append(ev, nightEvent{up[dev], arrivallog.KindConnect, dev, seq})
			}
			for k, drop := range []float64{100, 120} {
				for dev := range nightDevices {
					if up[dev] > drop { // still on its way back from the first drop
						continue
					}
					ev = append(ev, nightEvent{drop + 0.05*r.Float64(), arrivallog.KindDisconnect, dev, seq})
					back := drop + 1 + 8*r.ExpFloat64()
					if waves && k == 1 {
						back = drop + 1 + roundGap*float64(dev%4) + r.Float64()
					}
					seq++
					up[dev] = back
					ev = append(ev, nightEvent{back, arrivallog.KindConnect, dev, seq})
				}
			}
			slices.SortStableFunc(ev, func(a, b nightEvent) int { return cmp.Compare(a.t, b.t) })
			var b strings.Builder
			for _, e := range ev {
				m := awsLifecycle(e, r)
				line, _ := json.Marshal(m)
				b.Write(line)
				b.WriteByte('\n')
			}
			l, err := arrivallog.ParseLog(strings.NewReader(b.String()), arrivallog.Options{})
			require.NoError(t, err)
			found, got := nightJudgement(t, l)
			require.Len(t, found, 2, "seed %d: both drops", seed)
			for k, drop := range []float64{100, 120} {
				assert.InDelta(t, float64(nightEpoch)/1e9+drop, found[k].AtS, 0.1, "seed %d: %s", seed, found[k].Why)
			}
			assert.Equal(t, want, got, "seed %d", seed)
		}
	}
}
