package brokerline

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
//
// EMQXFields are the pairs of one such line that say what happened: msg,
// clientid, packet and reason, each "" where the line has none.
type EMQXFields struct {
	Msg, ClientID, Packet, Reason string
}

// emqxTextFields reads the pairs EMQX's text formatter writes; ok false
// when the body has no "msg: ".
func emqxTextFields(body string) (EMQXFields, bool) {
	var f EMQXFields
	i := strings.Index(body, "msg: ")
	if i < 0 || i != 0 && (i < 2 || body[i-2:i] != ", ") {
		return f, false
	}
	f.Msg, _, _ = strings.Cut(body[i+len("msg: "):], ", ")
	if c := strings.Index(body, "clientid: "); c >= 0 && (c == 0 || c >= 2 && body[c-2:c] == ", ") {
		from := c + len("clientid: ")
		if c < i && from <= i-2 { // 5.6 on: the client ID comes before msg and may hold ", "
			f.ClientID = body[from : i-2]
		} else if c > i {
			f.ClientID, _, _ = strings.Cut(body[from:], ", ")
		}
	}
	if p := strings.Index(body, "packet: "); p >= 0 {
		f.Packet = body[p+len("packet: "):]
	}
	if r := strings.Index(body, "reason: "); r >= 0 {
		f.Reason, _, _ = strings.Cut(body[r+len("reason: "):], ", ")
	}
	return f, true
}

// EMQX reads the pairs of an EMQX line, text or JSON; ok false for a
// message it does not know.
func EMQX(f EMQXFields) (Line, bool) {
	e := Line{Broker: "emqx", Client: CleanClient(f.ClientID)}
	switch f.Msg {
	case "mqtt_packet_sent":
		rc, ok := emqxConnack(f.Packet)
		switch {
		case !ok:
			e.Label = "packet sent"
		case rc == 0:
			e.Kind = KindConnect
		default:
			e.Kind = KindRefused
		}
	case "mqtt_packet_received":
		e.Label = "packet received"
		if strings.HasPrefix(f.Packet, "CONNECT(") {
			e.Label = "CONNECT received"
		}
	case "client_connected", "client.connected", "session_created":
		e.Kind = KindConnect
	case "terminate", "socket_error", "client_disconnected", "client.disconnected", "kicked":
		e.Kind = KindDisconnect
	case "failed_to_start_connection_process", "clientid_registration_throttled", "client_banned", "authentication_failure":
		e.Kind = KindRefused
	case "flapping_detected":
		e.Label = "flapping detected"
	case "authentication_result", "authenticator_result":
		e.Label = "authentication"
	case "(re)starting_emqx_apps":
		e.Kind, e.Label = KindStart, "EMQX (re)starting_emqx_apps"
	case "stopping_emqx_apps", "received_terminate_signal":
		e.Kind, e.Label = KindStop, "EMQX "+f.Msg
	case "":
		return e, false
	default:
		e.Label = "other"
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
func classifyEMQXConsole(msg string) (Line, bool) {
	switch {
	case strings.HasPrefix(msg, "EMQX ") && strings.HasSuffix(msg, " is running now!"):
		return Line{Broker: "emqx", Kind: KindStart, Label: msg}, true
	case strings.HasPrefix(msg, "received_terminate_signal, shutting down now"):
		return Line{Broker: "emqx", Kind: KindStop, Label: msg}, true
	}
	return Line{}, false
}
