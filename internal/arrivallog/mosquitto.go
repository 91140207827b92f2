package arrivallog

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// mosquitto: the log as mosquitto writes it by default (log_dest file or
// stderr, log_timestamp true):
//
//	1700000000: New connection from 127.0.0.1:57648 on port 1883.
//	1700000000: New client connected from 127.0.0.1:57648 as dev-1 (p2, c1, k30).
//	1700000000: New client connected from 127.0.0.1:57668 as dev-3 (p2, c1, k30, u'fleet').
//	1700000003: Client dev-1 closed its connection.
//
// A session is an arrival when mosquitto has accepted its CONNECT: the
// "New client connected" line, not "New connection" (a TCP connection,
// which may never send one). Bridges ("New bridge connected") are not the
// fleet's and are skipped with every other line.

const mosquittoArrival = "New client connected from "

type mosquittoParser struct{}

func (p *mosquittoParser) parse(l *Log, lr *lineReader, text []byte) error {
	if l.Format == "" {
		l.Format = "mosquitto"
	}
	stamp, msg, stamped := cutMosquittoStamp(bytes.TrimSpace(text))
	if !bytes.HasPrefix(msg, []byte(mosquittoArrival)) {
		l.Skipped++
		if stamped {
			p.other(l, lr.n, stamp, string(msg))
		}
		return nil
	}
	if !stamped {
		return &ParseError{Line: lr.n, Err: fmt.Errorf("expected mosquitto's time stamp (such as \"1700000000: \") before %q: "+
			"judging needs log_timestamp true, mosquitto's default", excerpt(msg))}
	}
	t, err := mosquittoTime(stamp)
	if err != nil {
		return &ParseError{Line: lr.n, Err: err}
	}
	if len(l.Times) == 0 && isISOStamp(stamp) {
		l.Format = "mosquitto (ISO times, read as UTC)"
	}
	l.add(t, lr.n, mosquittoClientID(string(msg[len(mosquittoArrival):])), true)
	return nil
}

// other keeps what a line that is not an arrival says about disruptions:
// the broker starting or stopping, or a client's session ending (Log.Disruptions). A
// stamp it cannot read leaves the line skipped and nothing more.
func (p *mosquittoParser) other(l *Log, n int, stamp []byte, msg string) {
	if strings.HasPrefix(msg, "mosquitto version ") {
		starts, stops := strings.HasSuffix(msg, " starting"), strings.HasSuffix(msg, " terminating")
		if t, err := mosquittoTime(stamp); err == nil && (starts || stops) {
			l.brokers = append(l.brokers, brokerLine{at: t, line: int32(n), stops: stops, text: msg})
		}
		return
	}
	if client, ok := mosquittoSessionEnd(msg); ok {
		if t, err := mosquittoTime(stamp); err == nil {
			l.ends = append(l.ends, sessionEnd{at: t, line: int32(n), client: client})
		}
	}
}

func isISOStamp(stamp []byte) bool { return len(stamp) == 19 && stamp[4] == '-' }

// mosquittoTime reads a stamp cutMosquittoStamp found.
func mosquittoTime(stamp []byte) (time.Duration, error) {
	if isISOStamp(stamp) {
		t, err := parseISOTime(string(stamp))
		return t, expected("mosquitto's ISO time stamp (such as 2024-01-02T03:04:05)", stamp, err)
	}
	return parseSeconds(stamp)
}

// cutMosquittoStamp splits a mosquitto line into its stamp, Unix seconds
// (1700000000) or ISO (2024-01-02T03:04:05), and its message; stamped false
// when it has none (msg is then all of it).
func cutMosquittoStamp(line []byte) (stamp, msg []byte, stamped bool) {
	i := bytes.Index(line, []byte(": "))
	if i <= 0 {
		return nil, line, false
	}
	stamp = line[:i]
	unix := true
	for _, c := range stamp {
		unix = unix && c >= '0' && c <= '9'
	}
	iso := len(stamp) == 19 && stamp[4] == '-' && stamp[7] == '-' && (stamp[10] == 'T' || stamp[10] == ' ') && stamp[13] == ':'
	if !unix && !iso {
		return nil, line, false
	}
	return stamp, line[i+2:], true
}

// isMosquittoLine recognises a line of mosquitto's log: stamped, or one of
// its first or its connection lines without a stamp.
func isMosquittoLine(line []byte) bool {
	if _, _, stamped := cutMosquittoStamp(line); stamped {
		return true
	}
	for _, p := range []string{"mosquitto version ", "New connection from ", mosquittoArrival} {
		if bytes.HasPrefix(line, []byte(p)) {
			return true
		}
	}
	return false
}

// mosquittoClientID finds the client ID in the end of an arrival line,
// "127.0.0.1:57648 as ID (p2, c1, k30).": the ID may hold spaces and
// parentheses itself, so it ends at the first " (" that the connection's
// flags follow. Without them (another version's line), all that follows
// " as " is the ID.
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

// mosquittoSessionEnd reads the client ID from a line of mosquitto's saying
// a session ended ("Client ID closed its connection.", "Client ID
// disconnected.", "Client ID has exceeded timeout, disconnecting.",
// "Socket error on client ID, disconnecting.", "Client ID already
// connected, closing old connection."); ok false for any other line.
func mosquittoSessionEnd(msg string) (client string, ok bool) {
	if rest, ok := strings.CutPrefix(msg, "Socket error on client "); ok {
		return strings.CutSuffix(rest, ", disconnecting.")
	}
	rest, ok := strings.CutPrefix(msg, "Client ")
	if !ok {
		return "", false
	}
	for _, marker := range []string{" closed its connection.", " has exceeded timeout, disconnecting.",
		" already connected, closing old connection.", " been disconnected by administrative action.", " disconnected"} {
		if i := strings.LastIndex(rest, marker); i > 0 {
			return rest[:i], true
		}
	}
	return "", false
}
