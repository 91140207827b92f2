package device

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	paho "github.com/eclipse/paho.mqtt.golang"
)

var (
	pahoTarget  atomic.Pointer[slog.Logger]
	pahoInstall sync.Once
)

// RoutePahoLogs sends paho's own log output to logger at matching levels.
// It drops the spurious "BUG BUG BUG reconnection function is nil". paho
// v1.5.1 logs that line on every loss when its reconnect is off, as it is
// here.
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

// Formatting waits for the level check: paho logs a debug line per packet.
func (p pahoLogger) Println(v ...any) {
	if l := p.enabled(); l != nil {
		p.log(l, strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
	}
}

func (p pahoLogger) Printf(format string, v ...any) {
	if l := p.enabled(); l != nil {
		p.log(l, fmt.Sprintf(format, v...))
	}
}

func (p pahoLogger) enabled() *slog.Logger {
	if l := pahoTarget.Load(); l != nil && l.Enabled(context.Background(), p.level) {
		return l
	}
	return nil
}

func (p pahoLogger) log(l *slog.Logger, msg string) {
	if strings.Contains(msg, "BUG BUG BUG reconnection function is nil") {
		return
	}
	l.Log(context.Background(), p.level, strings.TrimSpace(msg), "source", "paho")
}
