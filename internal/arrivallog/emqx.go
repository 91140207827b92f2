package arrivallog

import (
	"strconv"
	"strings"
)

// EMQX 5's log (apps/emqx/src/emqx_logger_textfmt.erl and
// emqx_logger_jsonfmt.erl at v5.8.9): a text line is its time, its level
// and "key: value" pairs, the client first, then msg:
//
//	2024-01-02T03:04:05.547202+00:00 [debug] tag: MQTT, clientid: dev-1, msg: mqtt_packet_sent ...
//	2024-01-02T03:04:06.394694+00:00 [info] clientid: dev-1, msg: terminate, peername: 192.168 ...
//	1704164647454059 [warning] clientid: dev-1, msg: socket_error, peername: 192.168.1.20 ...
//
// A JSON line holds the same pairs as an object, its time in Unix µs.
// EMQX logs a successful connect only at debug (the CONNACK it sent,
// ReasonCode=0; emqx_connection.erl:893). At info it logs each TCP
// session's end ("terminate", emqx_connection.erl:666). At its default,
// warning, it logs socket errors (emqx_connection.erl:963) and flapping
// (emqx_flapping.erl). Versions up to 5.5 write msg first and the client
// after the peer.
type emqxFields struct {
	msg, clientid, packet, reason string
}

// emqxTextFields reads the pairs EMQX's text formatter writes; ok false
// when the body has no "msg: ".
func emqxTextFields(body string) (emqxFields, bool) {
	var f emqxFields
	i := strings.Index(body, "msg: ")
	if i < 0 || i != 0 && (i < 2 || body[i-2:i] != ", ") {
		return f, false
	}
	f.msg, _, _ = strings.Cut(body[i+len("msg: "):], ", ")
	if c := strings.Index(body, "clientid: "); c >= 0 && (c == 0 || c >= 2 && body[c-2:c] == ", ") {
		from := c + len("clientid: ")
		if c < i && from <= i-2 { // 5.6 on: the client ID comes before msg and may hold ", "
			f.clientid = body[from : i-2]
		} else if c > i {
			f.clientid, _, _ = strings.Cut(body[from:], ", ")
		}
	}
	if p := strings.Index(body, "packet: "); p >= 0 {
		f.packet = body[p+len("packet: "):]
	}
	if r := strings.Index(body, "reason: "); r >= 0 {
		f.reason, _, _ = strings.Cut(body[r+len("reason: "):], ", ")
	}
	return f, true
}

func classifyEMQX(f emqxFields) (entry, bool) {
	e := entry{broker: "emqx", client: cleanClient(f.clientid)}
	switch f.msg {
	case "mqtt_packet_sent":
		rc, ok := emqxConnack(f.packet)
		switch {
		case !ok:
			e.label = "packet sent"
		case rc == 0:
			e.kind = KindConnect
		default:
			e.kind = KindRefused
		}
	case "mqtt_packet_received":
		e.label = "packet received"
		if strings.HasPrefix(f.packet, "CONNECT(") {
			e.label = "CONNECT received"
		}
	case "client_connected", "client.connected", "session_created":
		e.kind = KindConnect
	case "terminate", "socket_error", "client_disconnected", "client.disconnected", "kicked":
		e.kind = KindDisconnect
	case "failed_to_start_connection_process", "clientid_registration_throttled", "client_banned", "authentication_failure":
		e.kind = KindRefused
	case "flapping_detected":
		e.label = "flapping detected"
	case "authentication_result", "authenticator_result":
		e.label = "authentication"
	case "(re)starting_emqx_apps":
		e.kind, e.label = KindStart, "EMQX (re)starting_emqx_apps"
	case "stopping_emqx_apps", "received_terminate_signal":
		e.kind, e.label = KindStop, "EMQX "+f.msg
	case "":
		return e, false
	default:
		e.label = "other"
	}
	return e, true
}

// emqxConnack reads a CONNACK's reason code: "CONNACK(Q0, R0, D0,
// AckFlags=0, ReasonCode=0)".
func emqxConnack(packet string) (int, bool) {
	if !strings.HasPrefix(packet, "CONNACK(") {
		return 0, false
	}
	i := strings.Index(packet, "ReasonCode=")
	if i < 0 {
		return 0, false
	}
	code := packet[i+len("ReasonCode="):]
	if j := strings.IndexAny(code, ",)"); j >= 0 {
		code = code[:j]
	}
	rc, err := strconv.Atoi(code)
	return rc, err == nil
}

// classifyEMQXConsole reads what EMQX writes to its console besides the
// log: "EMQX 5.8.9 is running now!" (emqx_machine_boot.erl:55).
func classifyEMQXConsole(msg string) (entry, bool) {
	switch {
	case strings.HasPrefix(msg, "EMQX ") && strings.HasSuffix(msg, " is running now!"):
		return entry{broker: "emqx", kind: KindStart, label: msg}, true
	case strings.HasPrefix(msg, "received_terminate_signal, shutting down now"):
		return entry{broker: "emqx", kind: KindStop, label: msg}, true
	}
	return entry{}, false
}
