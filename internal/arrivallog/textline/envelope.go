package textline

import (
	"bytes"

	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
)

// Envelope is what a log's carrier writes before a broker's own line:
// syslog, journald, docker, the kubelet. The broker's own stamp, if it
// wrote one, is inside (mosquitto keeps its own under syslog and docker).
type Envelope uint8

const (
	// None: the broker's own line, as it wrote it.
	None Envelope = iota
	// Syslog: STAMP [HOST] TAG[PID]: MSG, after an optional <PRI>.
	// rsyslog's traditional (RFC 3164) and default (RFC 3339) file
	// formats, journalctl -o short, short-precise, short-iso,
	// short-iso-precise, short-unix and short-full.
	Syslog
	// RFC5424: <PRI>1 STAMP HOST APP PROCID MSGID SD MSG.
	RFC5424
	// Stamped: an RFC 3339 stamp and a space: docker logs
	// --timestamps, kubectl logs --timestamps, a CloudWatch Logs export.
	Stamped
	// CRI: STAMP stdout|stderr F|P MSG, the kubelet's log files.
	CRI
)

// Envelopes are every Envelope, in the order detection prefers them when
// they read as many lines.
var Envelopes = []Envelope{None, Syslog, RFC5424, CRI, Stamped}

// Wrapped is a line's envelope taken apart. Ident and Msg share the
// line's bytes, valid while the line is. The zero value is a line with no
// envelope read.
type Wrapped struct {
	Stamp logtime.Civil
	Timed bool   // Stamp was read
	Ident []byte // the syslog tag without its [pid]: "mosquitto", "systemd"
	Msg   []byte // what the envelope carried
	Form  string // the stamp's form, for the format's name
}

// Strip takes the envelope off a line; ok false when the line does not
// have its shape.
func (e Envelope) Strip(line []byte) (w Wrapped, ok bool) {
	switch e {
	case None:
		return Wrapped{Msg: line}, true
	case Syslog:
		return stripSyslog(line)
	case RFC5424:
		return stripRFC5424(line)
	case Stamped:
		c, n, ok := logtime.ScanStamp(line)
		if !ok || c.Unix || c.Zone != logtime.ZoneOffset || c.Year == 0 || n >= len(line) || line[n] != ' ' {
			return w, false
		}
		return Wrapped{Stamp: c, Timed: true, Msg: line[n+1:]}, true
	case CRI:
		c, n, ok := logtime.ScanStamp(line)
		if !ok || c.Unix || c.Year == 0 || n+10 > len(line) {
			return w, false
		}
		rest := line[n:]
		if !bytes.HasPrefix(rest, []byte(" stdout ")) && !bytes.HasPrefix(rest, []byte(" stderr ")) {
			return w, false
		}
		rest = rest[8:]
		if len(rest) < 2 || rest[0] != 'F' && rest[0] != 'P' || rest[1] != ' ' {
			return w, false
		}
		return Wrapped{Stamp: c, Timed: true, Msg: rest[2:]}, true
	}
	return w, false
}

// String names the envelope in the format taken.
func (e Envelope) String() string {
	switch e {
	case Syslog:
		return "syslog"
	case RFC5424:
		return "syslog (RFC 5424)"
	case Stamped:
		return "docker or kubectl logs --timestamps"
	case CRI:
		return "the kubelet's CRI log files"
	}
	return ""
}

// skipPRI skips a syslog priority, "<30>".
func skipPRI(line []byte) int {
	if len(line) < 3 || line[0] != '<' {
		return 0
	}
	d := logtime.DigitsAt(line, 1)
	if d < 1 || d > 3 || 1+d >= len(line) || line[1+d] != '>' {
		return 0
	}
	return d + 2
}

// stripSyslog reads STAMP [HOST] TAG[PID]: MSG.
func stripSyslog(line []byte) (w Wrapped, ok bool) {
	i := skipPRI(line)
	c, n, ok := logtime.ScanStamp(line[i:])
	if !ok || c.Unix && c.Digits == 0 {
		return w, false // short-unix writes µs: a bare number is a broker's own stamp
	}
	w.Stamp, w.Timed, w.Form = c, true, syslogForm(c, line[i:i+n])
	j := i + n
	if j >= len(line) || line[j] != ' ' {
		return w, false
	}
	j++
	// A host, then the tag; or the tag alone (a datagram, journalctl --no-hostname).
	first := bytes.IndexByte(line[j:], ' ')
	if tagEnd, found := syslogTag(line[j:], first); found {
		w.Ident, w.Msg = tagIdent(line[j:j+tagEnd]), trimOne(line[j+tagEnd:])
		return w, true
	}
	if first <= 0 {
		return w, false
	}
	j += first + 1
	tagEnd, found := syslogTag(line[j:], bytes.IndexByte(line[j:], ' '))
	if !found {
		return w, false
	}
	w.Ident, w.Msg = tagIdent(line[j:j+tagEnd]), trimOne(line[j+tagEnd:])
	return w, true
}

// syslogTag finds the end of "tag[pid]:" at the start of s, whose first
// space is at space (-1: none): the index after the colon.
func syslogTag(s []byte, space int) (int, bool) {
	end := len(s)
	if space >= 0 {
		end = space
	}
	if end < 2 || s[end-1] != ':' {
		return 0, false
	}
	tag := s[:end-1]
	if b := bytes.IndexByte(tag, '['); b >= 0 {
		if tag[len(tag)-1] != ']' || logtime.DigitsAt(tag, b+1) != len(tag)-b-2 || b == 0 {
			return 0, false
		}
		tag = tag[:b]
	}
	letter := false
	for _, c := range tag {
		if c == ':' || c == '[' || c == ']' || c < ' ' {
			return 0, false
		}
		letter = letter || logtime.IsLetter(c)
	}
	return end, letter // a program's name, not a broker's own stamp
}

func tagIdent(tag []byte) []byte {
	tag = bytes.TrimSuffix(tag, []byte(":"))
	if b := bytes.IndexByte(tag, '['); b >= 0 {
		tag = tag[:b]
	}
	return tag
}

// trimOne drops the one space after a tag's colon.
func trimOne(s []byte) []byte {
	if len(s) > 0 && s[0] == ' ' {
		return s[1:]
	}
	return s
}

// syslogForm names a syslog stamp's form as the tools that write it do.
func syslogForm(c logtime.Civil, text []byte) string {
	switch {
	case c.Unix:
		return "journalctl -o short-unix"
	case c.Year == 0:
		return "RFC 3164 stamps (rsyslog's traditional format, journalctl -o short)"
	case len(text) > 0 && logtime.IsLetter(text[0]):
		return "journalctl -o short-full"
	}
	return "RFC 3339 stamps (rsyslog's default, journalctl -o short-iso)"
}

// stripRFC5424 reads <PRI>1 STAMP HOST APP PROCID MSGID SD [BOM]MSG.
func stripRFC5424(line []byte) (w Wrapped, ok bool) {
	i := skipPRI(line)
	if i == 0 || i+2 > len(line) || line[i] != '1' || line[i+1] != ' ' {
		return w, false
	}
	j := i + 2
	if j < len(line) && line[j] == '-' {
		j++
	} else {
		c, n, ok := logtime.ScanStamp(line[j:])
		if !ok {
			return w, false
		}
		w.Stamp, w.Timed = c, true
		j += n
	}
	fields := make([][]byte, 0, 4)
	for k := 0; k < 4; k++ { // HOST APP PROCID MSGID
		if j >= len(line) || line[j] != ' ' {
			return w, false
		}
		j++
		e := bytes.IndexByte(line[j:], ' ')
		if e <= 0 {
			return w, false
		}
		fields = append(fields, line[j:j+e])
		j += e
	}
	if j >= len(line) || line[j] != ' ' {
		return w, false
	}
	j++
	switch {
	case j < len(line) && line[j] == '-':
		j++
	case j < len(line) && line[j] == '[':
		for j < len(line) && line[j] == '[' {
			e := bytes.IndexByte(line[j:], ']')
			if e < 0 {
				return w, false
			}
			j += e + 1
		}
	default:
		return w, false
	}
	for k := 0; k < 2 && j < len(line) && line[j] == ' '; k++ { // rsyslog writes two
		j++
	}
	msg := bytes.TrimPrefix(line[j:], []byte("\xef\xbb\xbf"))
	w.Ident, w.Msg, w.Form = fields[1], msg, "RFC 5424"
	return w, true
}

// IsJournalMarker recognises the lines journalctl writes between entries:
// "-- Boot 4eac... --", "-- No entries --", "-- Logs begin at ... --".
func IsJournalMarker(line []byte) bool {
	t := bytes.TrimSpace(line)
	return bytes.HasPrefix(t, []byte("-- ")) && (bytes.HasSuffix(t, []byte(" --")) || bytes.HasPrefix(t, []byte("-- cursor: ")))
}
