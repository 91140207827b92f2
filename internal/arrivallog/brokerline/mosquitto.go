package brokerline

import (
	"bytes"
	"strconv"
	"strings"
)

// mosquitto's messages, as 2.0 (src/loop.c, handle_connect.c, net.c,
// mosquitto.c, send_connack.c) and 1.6 write them, after its stamp:
//
//	1700000000: New connection from 127.0.0.1:57648 on port 1883.
//	1700000000: New client connected from 127.0.0.1:57648 as dev-1 (p2, c1, k30).
//	1700000000: New client connected from 127.0.0.1:57668 as dev-3 (p5, c1, k30, u'fleet').
//	1700000003: Client dev-1 closed its connection.
//	1700000004: Client <unknown> disconnected, not authorised.
//	1700000005: mosquitto version 2.0.11 terminating
//
// A session is an arrival when mosquitto has accepted its CONNECT. That
// is the "New client connected" line, not "New connection" (a TCP
// connection, which may never send one). Bridges are not the fleet's.
const mosquittoArrival = "New client connected from "

// Mosquitto reads a message mosquitto wrote; ok false for one it did not.
func Mosquitto(s string) (Line, bool) {
	e := Line{Broker: "mosquitto"}
	switch {
	case strings.HasPrefix(s, mosquittoArrival):
		e.Kind, e.Client = KindConnect, CleanClient(mosquittoClientID(s[len(mosquittoArrival):]))
		return e, true
	case strings.HasPrefix(s, "New connection from "):
		e.Label = "tcp accept"
		return e, true
	case strings.HasPrefix(s, "New bridge connected from "), strings.HasPrefix(s, "Connecting bridge "):
		e.Label = "bridge"
		return e, true
	case strings.HasPrefix(s, "mosquitto version "):
		switch {
		case strings.HasSuffix(s, " starting"):
			e.Kind, e.Label = KindStart, s
		case strings.HasSuffix(s, " terminating"):
			e.Kind, e.Label = KindStop, s
		default:
			e.Label = "broker running"
		}
		return e, true
	case strings.HasPrefix(s, "Client connection from "): // max_connections, tcpd, a TLS handshake
		e.Kind = KindRefused
		return e, true
	case strings.HasPrefix(s, "Sending CONNACK to "):
		if rc, client, ok := mosquittoConnack(s[len("Sending CONNACK to "):]); ok && rc != 0 {
			e.Kind, e.Client = KindRefused, CleanClient(client)
		} else {
			e.Label = "CONNACK"
		}
		return e, true
	}
	if client, kind, ok := mosquittoSessionEnd(s); ok {
		e.Kind, e.Client = kind, CleanClient(client)
		return e, true
	}
	return e, false
}

// mosquittoConnack reads "dev-1 (0, 5)": the client (or its address) and
// the return code.
func mosquittoConnack(rest string) (rc int, client string, ok bool) {
	i := strings.LastIndex(rest, " (")
	if i < 0 || !strings.HasSuffix(rest, ")") {
		return 0, "", false
	}
	_, code, found := strings.Cut(rest[i+2:len(rest)-1], ", ")
	if !found {
		return 0, "", false
	}
	rc, err := strconv.Atoi(code)
	return rc, rest[:i], err == nil
}

// mosquittoSessionEnd reads a line saying a session ended, or that a
// connect was refused, and the client it names:
//
//	Client ID closed its connection.
//	Client ID disconnected.
//	Client ID has exceeded timeout, disconnecting.
//	Client ID disconnected due to ...
//	Client ID disconnected, not authorised.       (refused)
//	Socket error on client ID, disconnecting.     (1.6)
//	Bad socket read/write on client ID: ...
func mosquittoSessionEnd(msg string) (client string, kind Kind, ok bool) {
	if rest, found := strings.CutPrefix(msg, "Socket error on client "); found {
		client, ok = strings.CutSuffix(rest, ", disconnecting.")
		return client, KindDisconnect, ok
	}
	if rest, found := strings.CutPrefix(msg, "Bad socket read/write on client "); found {
		if i := strings.LastIndex(rest, ": "); i > 0 {
			return rest[:i], KindDisconnect, true
		}
		return "", KindDisconnect, false
	}
	rest, found := strings.CutPrefix(msg, "Client ")
	if !found {
		return "", KindOther, false
	}
	if client, found := strings.CutSuffix(rest, " disconnected, not authorised."); found {
		return client, KindRefused, true
	}
	for _, end := range []string{" closed its connection.", " has exceeded timeout, disconnecting.",
		" already connected, closing old connection.", " been disconnected by administrative action.", " disconnected."} {
		if client, found := strings.CutSuffix(rest, end); found && client != "" {
			return client, KindDisconnect, true
		}
	}
	for _, marker := range []string{" disconnected due to ", " disconnected: "} {
		if i := strings.LastIndex(rest, marker); i > 0 {
			return rest[:i], KindDisconnect, true
		}
	}
	return "", KindOther, false
}

// mosquittoClientID finds the client ID in the end of an arrival line:
//
//	127.0.0.1:57648 as ID (p2, c1, k30).
//
// The ID may hold spaces and parentheses itself. It therefore ends at the
// first " (" that the connection's flags follow. Without them (another
// version's line), all that follows " as " is the ID.
func mosquittoClientID(rest string) string {
	_, id, ok := strings.Cut(rest, " as ")
	if !ok {
		return ""
	}
	id = strings.TrimSuffix(id, ".")
	for i := 0; ; {
		j := strings.Index(id[i:], " (")
		if j < 0 {
			return id
		}
		j += i
		if isConnectFlags(id[j+2:]) {
			return id[:j]
		}
		i = j + 1
	}
}

// isConnectFlags recognises "p2, c1, k30)" and "p2, c1, k30, u'user')"
// (and 1.x's "c1, k30)").
func isConnectFlags(s string) bool {
	s, ok := strings.CutSuffix(s, ")")
	if !ok {
		return false
	}
	if i := strings.Index(s, ", u'"); i >= 0 && strings.HasSuffix(s, "'") {
		s = s[:i]
	}
	items := strings.Split(s, ", ")
	if len(items) == 2 {
		items = append([]string{"p0"}, items...)
	}
	if len(items) != 3 {
		return false
	}
	for k, item := range items {
		if len(item) < 2 || item[0] != "pck"[k] {
			return false
		}
		if _, err := strconv.ParseUint(item[1:], 10, 32); err != nil {
			return false
		}
	}
	return true
}

// MosquittoMessageAt finds where a mosquitto message starts in a line whose
// stamp the reader could not read (a log_timestamp_format of the user's
// own). The message starts after the first ": " that a message it knows
// follows. -1: none.
func MosquittoMessageAt(line []byte) int {
	for i := 0; ; {
		j := bytes.Index(line[i:], []byte(": "))
		if j < 0 || i+j > 64 { // strftime's output is short
			return -1
		}
		at := i + j + 2
		if _, ok := Mosquitto(string(line[at:])); ok {
			return at
		}
		i = at
	}
}
