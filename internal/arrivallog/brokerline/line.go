// Package brokerline says what a line of a broker's own log means: a
// session accepted, ended or refused, the broker started or stopped, lines
// the logger lost. It knows the messages of mosquitto, RabbitMQ, EMQX,
// HiveMQ and VerneMQ, and systemd's about their units; it reads a message,
// not its time stamp or the envelope around it.
package brokerline

// Kind is what a log line says happened.
type Kind uint8

const (
	KindOther      Kind = iota // all else: the broker's business, subscriptions, a TCP accept ...
	KindConnect                // a session accepted: an arrival, the only kind judged
	KindDisconnect             // a session ended
	KindRefused                // a connect refused: credentials, a limit, a ban
	KindStart                  // the broker started
	KindStop                   // the broker stopped
	KindLost                   // the log says it lost lines (a logger in drop mode, a rate limit)
)

// String names the kind as the summary counts it.
func (k Kind) String() string {
	switch k {
	case KindConnect:
		return "connect"
	case KindDisconnect:
		return "disconnect"
	case KindRefused:
		return "refused"
	case KindStart:
		return "broker start"
	case KindStop:
		return "broker stop"
	case KindLost:
		return "lost-lines note"
	}
	return "other"
}

// Line is what one line of a broker's log said: its kind, the client it
// names, and for a line of another kind what it was. It is a plain value.
type Line struct {
	Kind   Kind
	Client string
	// Conn names the connection where the line does not name its client
	// (RabbitMQ's closing lines: the process or the address pair). A
	// session's end thus finds the client its accepting line named.
	Conn string
	// Label says what an Other line is ("tcp accept", "subscribe" ...),
	// counted under it; for a start, a stop or a lost line, its text.
	Label string
	// Broker is whose line it is, as the format's name gives it.
	Broker string
	// Gap is, on a KindLost line, +1 where the logger began dropping lines
	// and -1 where it stopped (OTP's "switched from async to drop mode"
	// and back).
	Gap int8
}

// CleanClient is id, or nothing where id is what brokers log for a
// client whose ID they never read: no device.
func CleanClient(id string) string {
	switch id {
	case "<unknown>", "UNKNOWN", "undefined":
		return ""
	}
	return id
}
