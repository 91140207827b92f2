package brokerline

import (
	"strings"
)

// RabbitMQ's MQTT plugin (deps/rabbitmq_mqtt/src/rabbit_mqtt_reader.erl
// and rabbit_mqtt_processor.erl; deps/rabbit/src/rabbit.erl for the
// node), after the text formatter's prefix (rabbit_logger_text_fmt.erl:
// time, level, the process):
//
//	2026-11-27 05:06:56.613778+00:00 [info] <0.707.0> accepting MQTT connection <0.707.0> ...
//	2026-11-27 05:06:56.615168+00:00 [info] <0.707.0> closing MQTT connection <0.707.0> ...
//	2026-11-27 05:07:14.068225+00:00 [error] <0.833.0> closing MQTT connection "127.0.0.1 ...
//	2026-11-27 05:06:57.619999+00:00 [error] <0.742.0> MQTT connection 127.0.0.1:56886 -> ...
//
// 3.12 and later accept with "Accepted MQTT connection A -> B for client
// ID dev-1". They refuse with "Rejected MQTT connection A -> B with
// CONNACK return code 5" (3.13: "with Connect Reason Code 135"). Only the
// accept names the client. The lines that end a session name the
// connection (the process, or the address pair), which Line.Conn carries.
func classifyRabbitMQ(s, proc string) (Line, bool) {
	s = strings.TrimSpace(s)
	e := Line{Broker: "rabbitmq", Conn: proc}
	if proc == "" {
		e.Conn = addressPair(s)
	}
	switch {
	case strings.HasPrefix(s, "accepting MQTT connection "):
		// accepting MQTT connection <0.707.0> (A -> B, client id: dev-1)
		i := strings.LastIndex(s, ", client id: ")
		if i < 0 || !strings.HasSuffix(s, ")") {
			return e, false
		}
		e.Kind, e.Client = KindConnect, s[i+len(", client id: "):len(s)-1]
	case strings.HasPrefix(s, "Accepted MQTT connection "):
		i := strings.LastIndex(s, " for client ID ")
		if i < 0 {
			return e, false
		}
		e.Kind, e.Client = KindConnect, s[i+len(" for client ID "):]
	case strings.HasPrefix(s, "closing MQTT connection ") && strings.HasSuffix(s, "(login timeout)"):
		e.Label = "login timeout"
	// "closing MQTT connection": after a DISCONNECT, or (keepalive timeout)
	case strings.HasPrefix(s, "closing MQTT connection "),
		strings.HasPrefix(s, "MQTT connection ") && strings.HasSuffix(s, " will terminate because peer closed TCP connection"),
		strings.HasPrefix(s, "MQTT detected network error"), strings.HasPrefix(s, "MQTT closing connection "):
		e.Kind = KindDisconnect
	case strings.HasPrefix(s, "MQTT disconnecting client "):
		// MQTT disconnecting client "A -> B" with duplicate id 'dup-1'
		e.Kind = KindDisconnect
		for _, marker := range []string{" with duplicate id '", " with client ID '"} {
			if i := strings.Index(s, marker); i >= 0 {
				e.Client, _, _ = strings.Cut(s[i+len(marker):], "'")
				break
			}
		}
	case strings.HasPrefix(s, "MQTT connection ") && (strings.HasSuffix(s, "is closing due to an authentication failure") ||
		strings.HasSuffix(s, "is closing due to an authorization failure")),
		strings.HasPrefix(s, "MQTT cannot accept"), strings.HasPrefix(s, "Rejected MQTT connection "):
		e.Kind = KindRefused
	case strings.HasPrefix(s, "MQTT login failed"), strings.HasPrefix(s, "MQTT connection failed"):
		e.Label = "refusal reason"
	case strings.HasPrefix(s, "Starting RabbitMQ "):
		e.Kind, e.Label = KindStart, s
	case strings.HasSuffix(s, " is asked to stop..."):
		e.Kind, e.Label = KindStop, s
	case strings.HasPrefix(s, "Server startup complete"), strings.HasPrefix(s, "Successfully stopped RabbitMQ"),
		strings.HasPrefix(s, "started MQTT TCP listener"), strings.HasPrefix(s, "stopped MQTT TCP listener"):
		e.Label = "broker lifecycle"
	case strings.HasPrefix(s, "Received a SUBSCRIBE"), strings.HasPrefix(s, "Received an UNSUBSCRIBE"):
		e.Label = "subscribe"
	default:
		return e, false
	}
	return e, true
}

// addressPair is the "127.0.0.1:36832 -> 127.0.0.1:1883" a line names,
// without the quotes or <<"...">> it may be printed in; "" for none.
func addressPair(s string) string {
	i := strings.Index(s, " -> ")
	if i < 0 {
		return ""
	}
	start := strings.LastIndexAny(s[:i], " \"'(<") + 1
	end := i + 4
	for end < len(s) && !strings.ContainsRune(" \"',)>", rune(s[end])) {
		end++
	}
	return s[start:end]
}
