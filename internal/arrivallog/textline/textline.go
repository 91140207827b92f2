// Package textline takes a line of a broker's text log apart: the
// envelope that carried it (syslog, journald, docker, the kubelet), the
// broker's own stamp, level and process, and what its message says
// (brokerline).
package textline

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/fileline"
)

// Reader reads a broker's text log, in whatever envelope carries it, in
// two layers. The first is the envelope (Envelope), the second the broker's
// own line. Any broker here writes that line's parts in this order, each
// optional:
//
//	STAMP [: | - ] LEVEL [- ] PROCESS MESSAGE
//	1700000000: New client connected from ...                          mosquitto
//	2026-11-27 04:02:33.046092+00:00 [info] <0.521.0> accepting MQTT ... RabbitMQ
//	2024-01-02T03:04:05.547202+00:00 [debug] tag: MQTT, clientid: ...     EMQX
//	2024-05-06 10:11:12,345 - Client ID: sensor-17, IP: ...               HiveMQ event.log
//	2024-05-06 10:00:00,101 INFO  - Starting HiveMQ ...                   hivemq.log
//	2024-05-06T10:11:12.345678+00:00 [warning] <0.2345.0> vmq_mqtt_fsm:check_user/2:764: ...
//
// The message is then recognised by what each broker writes
// (brokerline.Classify). One reader thus takes them all. A log that
// merges several brokers' lines is read whole. Use NewReader; a Reader is
// not safe for concurrent use.
type Reader struct {
	env      Envelope
	layout   *logtime.Layout // -time-layout, for the broker's own stamps
	envClock *logtime.Clock  // the envelope's stamps
	clock    *logtime.Clock  // the broker's own
	forms    map[string]int  // the broker's own stamps of each form
	// envForm is the form of the envelope's stamps, as the format's name
	// gives it
	envForm string
}

// Line is what a line said, taken apart. Times are those of the Reader's
// clocks; a time not read is zero, with its Timed false. The zero value
// is a line that did not fit.
type Line struct {
	Fits bool // the line has the envelope's shape
	Env  Wrapped
	// JSON: the envelope, its stamp read, carries a JSON message (a
	// CloudWatch Logs export), in Msg, for a JSON reader to take apart.
	JSON     bool
	EnvAt    time.Duration // the envelope's stamp
	EnvTimed bool
	At       time.Duration // the broker's own stamp
	Timed    bool
	Digits   int   // the broker's stamp's fraction digits
	StampErr error // why the broker's own stamp could not be read
	Proc     string
	Ident    string // the syslog tag without its [pid]
	Msg      []byte // the broker's message, its prefix taken off
	Said     brokerline.Line
	Known    bool   // a line of a broker this reader knows
	Form     string // the form of the broker's own stamp
}

// NewReader reads lines in envelope env. The broker's own stamps are read
// in layout lay when it is not nil. Stamps that name no zone or year are
// read as logtime.NewClock reads them, with loc, ref and zone.
func NewReader(env Envelope, lay *logtime.Layout, loc *time.Location, ref time.Time, zone *logtime.ZoneNote) *Reader {
	return &Reader{env: env, layout: lay, envClock: logtime.NewClock(loc, ref, zone), clock: logtime.NewClock(loc, ref, zone), forms: map[string]int{}}
}

// Envelope is the envelope r reads lines in.
func (r *Reader) Envelope() Envelope { return r.env }

// Saw counts the lines of a known broker read whose own stamp had form
// (Line.Form).
func (r *Reader) Saw(form string) int { return r.forms[form] }

// Carrier names what carried the broker's lines, as a format's name ends:
// "journalctl -o short-iso", "syslog, RFC 3339", "the kubelet's CRI log
// files"; "" for lines read as the broker wrote them.
func (r *Reader) Carrier() string {
	switch {
	case r.env == None:
		return ""
	case r.env == Syslog && strings.HasPrefix(r.envForm, "journalctl"):
		return r.envForm
	case r.env == Syslog:
		return "syslog, " + r.envForm
	}
	return r.env.String()
}

// Assumed says what r's clocks assumed of the broker's own stamps and of
// the envelope's (logtime.Clock.Assumed).
func (r *Reader) Assumed() (own, env string) { return r.clock.Assumed(), r.envClock.Assumed() }

// Read takes a line apart and recognises it.
func (r *Reader) Read(line []byte) Line {
	var tl Line
	w, ok := r.env.Strip(line)
	if !ok {
		return tl
	}
	tl.Fits, tl.Env, tl.Ident = true, w, string(w.Ident)
	if w.Form != "" {
		r.envForm = w.Form
	}
	if w.Timed {
		tl.EnvAt, tl.EnvTimed = r.envAt(w.Stamp)
	}
	msg := w.Msg
	if r.env == Stamped && len(msg) > 0 && msg[0] == '{' {
		tl.Msg, tl.JSON = msg, tl.EnvTimed // a CloudWatch Logs export's: jsonevent's
		return tl
	}
	msg = r.broker(msg, &tl)
	tl.Msg = msg
	tl.Said, tl.Known = brokerline.Classify(msg, tl.Proc, tl.Ident)
	if !tl.Known && !tl.Timed && tl.StampErr == nil {
		// A stamp of the user's own layout, before a mosquitto message.
		if at := brokerline.MosquittoMessageAt(w.Msg); at > 0 {
			stamp := bytes.TrimSuffix(w.Msg[:at], []byte(": "))
			tl.StampErr = fmt.Errorf("cannot read the time stamp %q: name its layout with -time-layout (as mosquitto's "+
				"log_timestamp_format, such as %%Y-%%m-%%d %%H:%%M:%%S)", fileline.Excerpt(stamp))
			tl.Msg = w.Msg[at:]
			tl.Said, tl.Known = brokerline.Mosquitto(string(tl.Msg))
		}
	}
	if tl.Known && tl.Timed {
		r.forms[tl.Form]++
	}
	return tl
}

func (r *Reader) envAt(c logtime.Civil) (time.Duration, bool) {
	t, err := r.envClock.At(c)
	return t, err == nil
}

// broker reads the broker's own prefix (stamp, level, process) off msg
// and returns the message.
func (r *Reader) broker(msg []byte, tl *Line) []byte {
	if r.layout != nil {
		t, n, err := r.layout.Scan(msg, r.clock)
		switch {
		case err == nil:
			tl.At, tl.Timed, tl.Form = t, true, "layout "+r.layout.Text
			msg = msg[n:]
		case n > 0:
			tl.StampErr = err
			msg = msg[n:]
		}
	} else if c, n, ok := logtime.ScanStamp(msg); ok && (n == len(msg) || msg[n] == ':' || msg[n] == ' ' || msg[n] == ']') {
		t, err := r.clock.At(c)
		if err != nil {
			tl.StampErr = fmt.Errorf("the time stamp %q: %w", fileline.Excerpt(msg[:n]), err)
		} else {
			tl.At, tl.Timed, tl.Digits, tl.Form = t, true, c.Digits, stampForm(c)
		}
		msg = msg[n:]
	}
	if tl.Timed || tl.StampErr != nil {
		msg = bytes.TrimPrefix(msg, []byte(":"))
		msg = bytes.TrimLeft(msg, " ")
		msg = skipDash(msg)
	}
	msg = skipLevel(msg)
	msg = skipDash(msg)
	msg, tl.Proc = skipProcess(msg)
	return msg
}

// stampForm names the form of a broker's own stamp.
func stampForm(c logtime.Civil) string {
	switch {
	case c.Unix && c.Digits == 0:
		return "Unix seconds"
	case c.Unix:
		return "Unix time"
	case c.Year == 0:
		return "syslog times"
	}
	return "ISO times"
}

func skipDash(msg []byte) []byte {
	if len(msg) >= 2 && msg[0] == '-' && msg[1] == ' ' {
		return bytes.TrimLeft(msg[1:], " ")
	}
	return msg
}

// levels are the words loggers write for a level, as lower case.
var levels = map[string]bool{
	"trace": true, "debug": true, "dbg": true, "info": true, "inf": true, "notice": true, "warn": true, "warning": true,
	"wrn": true, "error": true, "err": true, "erro": true, "critical": true, "crit": true, "alert": true,
	"emergency": true, "emerg": true, "fatal": true, "panic": true,
}

// skipLevel skips a level: [info], <info>, INFO, info: (and the spaces
// after it).
func skipLevel(msg []byte) []byte {
	open, close := byte(0), byte(' ')
	i := 0
	if len(msg) > 0 && (msg[0] == '[' || msg[0] == '<') {
		open, i = msg[0], 1
		close = ']'
		if open == '<' {
			close = '>'
		}
	}
	j := i
	for j < len(msg) && logtime.IsLetter(msg[j]) {
		j++
	}
	if j == i || j-i > 9 || !levels[strings.ToLower(string(msg[i:j]))] {
		return msg
	}
	if open != 0 {
		if j >= len(msg) || msg[j] != close {
			return msg
		}
		j++
	} else if j < len(msg) && msg[j] == ':' {
		j++
	}
	if j < len(msg) && msg[j] != ' ' {
		return msg
	}
	return bytes.TrimLeft(msg[j:], " ")
}

// skipProcess skips an Erlang process, <0.707.0>, with what follows it
// where the logger adds its module: lager's "@mod:fun:line " or OTP's
// " mod:fun/arity:line: " (VerneMQ).
func skipProcess(msg []byte) ([]byte, string) {
	if len(msg) < 7 || msg[0] != '<' {
		return msg, ""
	}
	j := 1
	for part := 0; part < 3; part++ {
		d := logtime.DigitsAt(msg, j)
		if d == 0 {
			return msg, ""
		}
		j += d
		if part < 2 {
			if j >= len(msg) || msg[j] != '.' {
				return msg, ""
			}
			j++
		}
	}
	if j >= len(msg) || msg[j] != '>' {
		return msg, ""
	}
	proc := string(msg[:j+1])
	rest := msg[j+1:]
	if len(rest) > 0 && rest[0] == '@' { // lager: <0.2157.0>@vmq_mqtt_fsm:check_user:545 msg
		if k := bytes.IndexByte(rest, ' '); k >= 0 {
			rest = rest[k:]
		}
	}
	rest = bytes.TrimLeft(rest, " ")
	if k := bytes.Index(rest, []byte(": ")); k > 0 && isMFA(rest[:k]) {
		rest = rest[k+2:]
	}
	return rest, proc
}

// isMFA recognises OTP's "vmq_mqtt_fsm:check_user/2:764".
func isMFA(s []byte) bool {
	colon := bytes.IndexByte(s, ':')
	slash := bytes.IndexByte(s, '/')
	return colon > 0 && slash > colon && bytes.IndexByte(s, ' ') < 0 && bytes.Count(s, []byte(":")) == 2
}
