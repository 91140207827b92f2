package arrivallog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/fileline"
)

// A broker's text log, in whatever envelope carries it, is read in two
// layers. The first is the envelope (envelope.go), the second the
// broker's own line. Any broker here writes that line's parts in this
// order, each optional:
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
// (brokerline.Classify). One reader thus takes them all. A log that merges several brokers' lines is read whole.
type textReader struct {
	env      envelope
	layout   *logtime.Layout // -time-layout, for the broker's own stamps
	envClock *logtime.Clock  // the envelope's stamps
	clock    *logtime.Clock  // the broker's own
	forms    map[string]int
	// lastEnvForm is the form of the envelope's stamps, as the format's
	// name gives it
	lastEnvForm string
}

// textLine is what a line said, taken apart.
type textLine struct {
	fits      bool // the line has the envelope's shape
	env       wrapped
	envAt     time.Duration
	envTimed  bool
	at        time.Duration // the broker's own stamp
	timed     bool
	digits    int // the broker's stamp's fraction digits
	stampErr  error
	proc      string
	ident     string
	msg       []byte
	e         brokerline.Line
	known     bool // a line of a broker this reader knows
	innerForm string
}

func newTextReader(env envelope, lay *logtime.Layout, loc *time.Location, ref time.Time, zone *logtime.ZoneNote) *textReader {
	return &textReader{env: env, layout: lay, envClock: logtime.NewClock(loc, ref, zone), clock: logtime.NewClock(loc, ref, zone), forms: map[string]int{}}
}

// read takes a line apart and recognises it.
func (r *textReader) read(line []byte) textLine {
	var tl textLine
	w, ok := r.env.strip(line)
	if !ok {
		return tl
	}
	tl.fits, tl.env, tl.ident = true, w, string(w.ident)
	if w.form != "" {
		r.lastEnvForm = w.form
	}
	if w.timed {
		tl.envAt, tl.envTimed = r.envAt(w.stamp)
	}
	msg := w.msg
	if r.env == envStamped && len(msg) > 0 && msg[0] == '{' {
		tl.msg = msg // a JSON message (a CloudWatch Logs export): the JSON reader's
		return tl
	}
	msg = r.broker(msg, &tl)
	tl.msg = msg
	tl.e, tl.known = brokerline.Classify(msg, tl.proc, tl.ident)
	if !tl.known && !tl.timed && tl.stampErr == nil {
		// A stamp of the user's own layout, before a mosquitto message.
		if at := brokerline.MosquittoMessageAt(w.msg); at > 0 {
			stamp := bytes.TrimSuffix(w.msg[:at], []byte(": "))
			tl.stampErr = fmt.Errorf("cannot read the time stamp %q: name its layout with -time-layout (as mosquitto's "+
				"log_timestamp_format, such as %%Y-%%m-%%d %%H:%%M:%%S)", fileline.Excerpt(stamp))
			tl.msg = w.msg[at:]
			tl.e, tl.known = brokerline.Mosquitto(string(tl.msg))
		}
	}
	return tl
}

func (r *textReader) envAt(c logtime.Civil) (time.Duration, bool) {
	t, err := r.envClock.At(c)
	return t, err == nil
}

// broker reads the broker's own prefix (stamp, level, process) off msg
// and returns the message.
func (r *textReader) broker(msg []byte, tl *textLine) []byte {
	if r.layout != nil {
		t, n, err := r.layout.Scan(msg, r.clock)
		switch {
		case err == nil:
			tl.at, tl.timed, tl.innerForm = t, true, "layout "+r.layout.Text
			msg = msg[n:]
		case n > 0:
			tl.stampErr = err
			msg = msg[n:]
		}
	} else if c, n, ok := logtime.ScanStamp(msg); ok && (n == len(msg) || msg[n] == ':' || msg[n] == ' ' || msg[n] == ']') {
		t, err := r.clock.At(c)
		if err != nil {
			tl.stampErr = fmt.Errorf("the time stamp %q: %w", fileline.Excerpt(msg[:n]), err)
		} else {
			tl.at, tl.timed, tl.digits, tl.innerForm = t, true, c.Digits, innerForm(c)
		}
		msg = msg[n:]
	}
	if tl.timed || tl.stampErr != nil {
		msg = bytes.TrimPrefix(msg, []byte(":"))
		msg = bytes.TrimLeft(msg, " ")
		msg = skipDash(msg)
	}
	msg = skipLevel(msg)
	msg = skipDash(msg)
	msg, tl.proc = skipProcess(msg)
	return msg
}

// innerForm names the form of a broker's own stamp.
func innerForm(c logtime.Civil) string {
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

// errNoStamp is a line that says something without a time to say it at.
var errNoStamp = errors.New("no time stamp")
