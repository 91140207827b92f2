package arrivallog

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

// entry is what one line said: its kind, the client it names, and for a
// line of another kind what it was.
type entry struct {
	kind   Kind
	client string
	// conn names the connection where the line does not name its client
	// (RabbitMQ's closing lines: the process or the address pair). A
	// session's end thus finds the client its accepting line named
	conn string
	// label says what an Other line is ("tcp accept", "subscribe" ...),
	// counted under it; for a start, a stop or a lost line, its text
	label string
	// broker is whose line it is, as the format's name gives it
	broker string
	// gap is, on a KindLost line, +1 where the logger began dropping
	// lines and -1 where it stopped (OTP's "switched from async to drop
	// mode" and back)
	gap int8
}

// unknownClient is what brokers log for a client whose ID they never
// read: no device.
func cleanClient(id string) string {
	switch id {
	case "<unknown>", "UNKNOWN", "undefined":
		return ""
	}
	return id
}
