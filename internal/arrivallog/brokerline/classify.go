package brokerline

import "strings"

// Classify recognises a message by what the brokers here write;
// ok false for a message none of them wrote.
func Classify(msg []byte, proc, ident string) (Line, bool) {
	s := string(msg)
	if e, ok := lost(s); ok {
		return e, true
	}
	if e, ok := classifyHiveMQ(s); ok { // before mosquitto's "Client ID ..."
		return e, true
	}
	if e, ok := Mosquitto(s); ok {
		return e, true
	}
	if e, ok := classifyRabbitMQ(s, proc); ok {
		return e, true
	}
	if f, ok := emqxTextFields(s); ok {
		if e, ok := EMQX(f); ok {
			return e, true
		}
	}
	if e, ok := classifyVerneMQ(s); ok {
		return e, true
	}
	if e, ok := classifyEMQXConsole(s); ok {
		return e, true
	}
	if ident == "systemd" || ident == "init" {
		return Systemd(s)
	}
	return Line{}, false
}

// lost recognises a logger saying it dropped lines: OTP's logger
// in drop or flush mode (RabbitMQ, EMQX, VerneMQ), journald and rsyslog
// rate limits.
func lost(s string) (Line, bool) {
	switch {
	case strings.Contains(s, " switched from ") && strings.HasSuffix(s, " mode"):
		// OTP's logger_olp: "Handler rmq_1_file_1 switched from  async to drop mode", and back
		e := Line{Kind: KindLost, Label: strings.TrimSpace(s)}
		switch {
		case strings.HasSuffix(s, " to drop mode"), strings.HasSuffix(s, " to flush mode"):
			e.Gap = 1
		case strings.Contains(s, "from  drop to"), strings.Contains(s, "from drop to"), strings.Contains(s, "from  flush to"),
			strings.Contains(s, "from flush to"):
			e.Gap = -1
		default:
			return Line{}, false // between sync and async: nothing lost
		}
		return e, true
	case strings.HasPrefix(s, "Suppressed ") && strings.Contains(s, " messages from "),
		strings.Contains(s, "messages lost due to rate-limiting"), strings.Contains(s, " due to rate-limiting"):
		return Line{Kind: KindLost, Label: strings.TrimSpace(s)}, true
	}
	return Line{}, false
}

// Systemd recognises systemd's lines about a broker's unit, as
// journalctl -u writes them beside the broker's own: "Stopping Mosquitto
// MQTT Broker...", "Started ...", "mosquitto.service: Main process exited,
// code=killed, status=9/KILL".
func Systemd(s string) (Line, bool) {
	if !mentionsBroker(s) {
		return Line{}, false
	}
	e := Line{Broker: "systemd", Label: s}
	switch {
	case strings.HasPrefix(s, "Stopping "), strings.Contains(s, ": Main process exited"):
		e.Kind = KindStop
	case strings.HasPrefix(s, "Starting "):
		e.Kind = KindStart
	default:
		e.Label = "unit lifecycle"
	}
	return e, true
}

func mentionsBroker(s string) bool {
	l := strings.ToLower(s)
	for _, b := range []string{"mosquitto", "mqtt", "rabbitmq", "emqx", "hivemq", "vernemq"} {
		if strings.Contains(l, b) {
			return true
		}
	}
	return false
}
