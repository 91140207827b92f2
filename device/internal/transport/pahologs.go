package transport

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	paho "github.com/eclipse/paho.mqtt.golang"
)

var (
	pahoTarget  atomic.Pointer[slog.Logger]
	pahoInstall sync.Once
)

// RoutePahoLogs sends paho's own log output to logger, at the agent's
// levels rather than paho's (device.RoutePahoLogs documents it). paho v1.5.1 logs a failed attempt in three
// lines at error and warn, a lost connection and a stop at error. The agent
// logs each of those itself, once, at info, with the wait it chose. So
// paho's lines on them go to debug. So does its routine chatter:
// "memorystore wiped" at every connect, "memorystore del: message 1 not
// found" at every SUBACK, and "BUG BUG BUG reconnection function is nil" at
// every loss (its reconnect is off here). Anything else paho logs keeps its
// level, error or warn. paho's own debug output, a line a packet, goes
// below slog's debug. A nil logger discards it all.
//
// paho's loggers are package-level variables that its goroutines read
// without synchronisation. They are therefore assigned only once per
// process, on the first call. Make that call before creating clients. Later
// calls only change where the output goes, safely.
func RoutePahoLogs(logger *slog.Logger) {
	pahoTarget.Store(logger)
	pahoInstall.Do(func() {
		paho.CRITICAL = pahoLogger{slog.LevelError}
		paho.ERROR = pahoLogger{slog.LevelError}
		paho.WARN = pahoLogger{slog.LevelWarn}
		paho.DEBUG = pahoLogger{slog.LevelDebug - 4} // paho's debug is a firehose
	})
}

type pahoLogger struct{ level slog.Level }

func (p pahoLogger) Println(v ...any) { p.log(func() string { return fmt.Sprintln(v...) }) }

func (p pahoLogger) Printf(format string, v ...any) {
	p.log(func() string { return fmt.Sprintf(format, v...) })
}

// log logs the line text makes. A debug line is formatted only once it is
// known to be logged: paho logs one a packet. An error or a warning is
// formatted first, to be classed: which of them is routine depends on its
// text. They are few: one a connect, three a failed attempt.
func (p pahoLogger) log(text func() string) {
	l := pahoTarget.Load()
	if l == nil {
		return
	}
	level, msg := p.level, ""
	if level > slog.LevelDebug {
		if msg = strings.TrimSpace(text()); pahoRoutine(pahoCaller(), msg) {
			level = slog.LevelDebug
		}
	}
	if !l.Enabled(context.Background(), level) {
		return
	}
	if msg == "" {
		msg = strings.TrimSpace(text())
	}
	l.Log(context.Background(), level, msg, "source", "paho")
}

// pahoRoutineLines are paho v1.5.1's error and warning lines that are
// routine here. Each is known by the function that logs it, without its
// package and closures' suffixes ("(*T)." for any method of T). A line of
// another error's text (a dial's) is known only so. text, if set, picks
// that function's line.
var pahoRoutineLines = []struct{ fn, text string }{
	// A failed attempt, which the agent logs with its wait: the dial's
	// error and "failed to connect to broker, trying next", the refusing
	// CONNACK, a CONNECT not written, no CONNACK read.
	{"(*client).attemptConnection", ""},
	{"connectMQTT", ""},
	{"verifyCONNACK", "connect got error"},
	{"(*client).Connect", "Failed to connect to a broker"},
	// A Connect paho refused while its status settled: the agent retries it.
	{"(*client).Connect", "status "},
	// A lost connection, which the agent logs with its wait: the read or
	// the write that failed, the missing PINGRESP.
	{"(*client).startCommsWorkers", "Connect comms goroutine - error triggered"},
	{"startOutgoingComms", " reporting error"},
	{"keepalive", "pingresp not received"},
	{"(*client).internalConnLost", "BUG BUG BUG reconnection function is nil"},
	// A stop the agent asked for, while paho was noticing the connection
	// close, or had noticed it, or was too busy to queue the DISCONNECT
	// within the quiesce (the connection is closed all the same).
	{"(*client).internalConnLost", "disconnection already in progress"},
	{"(*client).Disconnect", "status is already disconnected"},
	{"(*client).Disconnect", "Disconnect packet not sent due to timeout"},
	// Every connect with a clean session.
	{"(*MemoryStore).Reset", "memorystore wiped"},
	// Every SUBACK: paho stores no SUBSCRIBE with ResumeSubs off, as here,
	// yet deletes it. And an acknowledgement of what a reconnect wiped.
	{"(*MemoryStore).Del", "memorystore del: message"},
	// A publish or an acknowledgement that crossed a stop: paho's
	// Disconnect closes the store, and may return before its goroutines
	// are done with it.
	{"(*MemoryStore).", "Trying to use memory store, but not open"},
}

// pahoRoutine says whether the line text, logged by paho's function fn, is
// one of pahoRoutineLines.
func pahoRoutine(fn, text string) bool {
	for _, r := range pahoRoutineLines {
		method := strings.HasSuffix(r.fn, ".") && strings.HasPrefix(fn, r.fn)
		if (r.fn == fn || method) && strings.Contains(text, r.text) {
			return true
		}
	}
	return false
}

// pahoPackage begins the name of each of paho's functions, as the runtime
// spells it: its path's last element has its dots escaped
// ("paho%2emqtt%2egolang.").
var pahoPackage = strings.TrimSuffix(runtime.FuncForPC(reflect.ValueOf(paho.NewClient).Pointer()).Name(), "NewClient")

// pahoCaller names the paho function that called the logger, without its
// package and the suffixes of closures: "(*client).Connect" for the
// goroutine Connect starts.
func pahoCaller() string {
	var pcs [8]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, pahoPackage); ok {
			return trimClosure(name)
		}
		if !more {
			return ""
		}
	}
}

// trimClosure drops a function name's closure suffixes: ".func1", ".1".
func trimClosure(name string) string {
	for {
		dot := strings.LastIndexByte(name, '.')
		last := strings.TrimPrefix(name[dot+1:], "func")
		if dot < 0 || last == "" || strings.Trim(last, "0123456789") != "" { // not a closure's
			return name
		}
		name = name[:dot]
	}
}
