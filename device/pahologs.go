package device

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// RoutePahoLogs sends paho's own log output (package-level loggers, so this
// affects every paho client in the process) to logger at matching levels,
// dropping the spurious "BUG BUG BUG reconnection function is nil" that paho
// v1.5.1 logs on every loss when its reconnect is off, as it is here.
func RoutePahoLogs(logger *slog.Logger) {
	paho.CRITICAL = pahoLogger{logger, slog.LevelError}
	paho.ERROR = pahoLogger{logger, slog.LevelError}
	paho.WARN = pahoLogger{logger, slog.LevelWarn}
	paho.DEBUG = pahoLogger{logger, slog.LevelDebug - 4} // paho's debug is a firehose
}

type pahoLogger struct {
	l     *slog.Logger
	level slog.Level
}

func (p pahoLogger) Println(v ...any) { p.log(strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }

func (p pahoLogger) Printf(format string, v ...any) { p.log(fmt.Sprintf(format, v...)) }

func (p pahoLogger) log(msg string) {
	if strings.Contains(msg, "BUG BUG BUG reconnection function is nil") {
		return
	}
	p.l.Log(context.Background(), p.level, strings.TrimSpace(msg), "source", "paho")
}
