package brokerline

import "strings"

// VerneMQ's console.log (apps/vmq_server/src/vmq_mqtt_fsm.erl,
// vmq_mqtt5_fsm.erl, vmq_ranch.erl; 2.x through OTP's logger, 1.x
// through lager):
//
//	2024-05-06T10:11:12.345678+00:00 [warning] <0.2345.0> vmq_mqtt_fsm:check_user/2:764: can't ...
//	2024-05-06T10:12:00.000100+00:00 [warning] <0.2400.0> vmq_mqtt_fsm:connected/2:585: client ...
//	2017-06-11 08:40:18.004 [warning] <0.2157.0>@vmq_mqtt_fsm:check_user:545 can't authenticat ...
//
// VerneMQ logs no line for a connect it accepts, at any level: its log
// shows refusals and sessions that ended abnormally. The tracer
// (vmq_tracer.erl; vmq-admin trace client) writes the CONNACK each client
// is sent, "MQTT SEND: CID: "sensor-17" CONNACK(sp: 0, rc: 0)": those are
// the arrivals of a traced fleet.
func classifyVerneMQ(s string) (Line, bool) {
	s = strings.TrimSpace(s)
	e := Line{Broker: "vernemq"}
	switch {
	case strings.HasPrefix(s, "can't authenticate client "), strings.HasPrefix(s, "can't register client "):
		e.Kind, e.Client = KindRefused, vernemqClient(s)
	case strings.HasPrefix(s, "client ") && strings.Contains(s, " stopped due to keepalive expired"),
		strings.HasPrefix(s, "session for ") && strings.Contains(s, " stopped abnormally due to "),
		strings.HasPrefix(s, "ws session for client "), strings.HasPrefix(s, "stopped connected session for client "):
		e.Kind, e.Client = KindDisconnect, vernemqClient(s)
	case s == "session normally stopped", s == "ws session normally stopped":
		e.Kind = KindDisconnect
	case strings.Contains(s, "MQTT SEND: CID: ") && strings.Contains(s, " CONNACK("):
		e.Client = vernemqTraceClient(s)
		e.Kind = KindConnect
		if !strings.Contains(s, "rc: 0)") && !strings.Contains(s, "rc:0)") {
			e.Kind = KindRefused
		}
	case strings.Contains(s, "MQTT RECV: CID: ") && strings.Contains(s, " CONNECT("):
		e.Client, e.Label = vernemqTraceClient(s), "CONNECT received"
	case strings.HasPrefix(s, "Trying to start vmq_"):
		e.Kind, e.Label = KindStart, s
	case strings.HasPrefix(s, "Trying to stop vmq_"):
		e.Kind, e.Label = KindStop, s
	case strings.HasPrefix(s, "subscriber ") && strings.Contains(s, " dropped "):
		e.Label = "message dropped"
	case strings.HasPrefix(s, "invalid client id"), strings.HasPrefix(s, "empty client id"), strings.HasPrefix(s, "invalid protocol version"):
		e.Kind = KindRefused
	default:
		return e, false
	}
	return e, true
}

// vernemqClient reads the client of a subscriber ID, {[],<<"sensor-17">>}.
func vernemqClient(s string) string {
	i := strings.Index(s, `<<"`)
	if i < 0 {
		return ""
	}
	id, _, _ := strings.Cut(s[i+3:], `">>`)
	return id
}

// vernemqTraceClient reads the tracer's CID: "sensor-17".
func vernemqTraceClient(s string) string {
	_, rest, _ := strings.Cut(s, `CID: "`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
