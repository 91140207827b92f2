package device

import (
	"log/slog"

	"github.com/herdguard/herdguard/device/internal/transport"
)

// RoutePahoLogs sends paho's own log output to logger, at the agent's
// levels rather than paho's. paho v1.5.1 logs a failed attempt in three
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
func RoutePahoLogs(logger *slog.Logger) { transport.RoutePahoLogs(logger) }
