package brokerline

import "strings"

// HiveMQ's event.log (hivemq-community-edition
// src/main/java/com/hivemq/logging/EventLog.java; the logback pattern
// "%-24(%d)- %msg%n" in conf/logback.xml):
//
//	2024-05-06 10:11:12,345 - Client ID: sensor-17, IP: 192.168.1.50, Clean Start: true, Sessi ...
//	2024-05-06 10:12:01,900 - Client ID: sensor-17, IP: 192.168.1.50 disconnected gracefully.
//	2024-05-06 10:13:22,007 - Client ID: dashboard-1, IP: 10.0.0.8 disconnected ungracefully f ...
//	2024-05-06 10:14:00,550 - Client ID: intruder, IP: 203.0.113.4 was disconnected. reason: A ...
//
// and hivemq.log's "Starting HiveMQ ..." and "Shutting down HiveMQ. ..."
// (HiveMQServer.java:109, ShutdownHooks.java:103).
func classifyHiveMQ(s string) (Line, bool) {
	s = strings.TrimSpace(s)
	e := Line{Broker: "hivemq"}
	if rest, ok := strings.CutPrefix(s, "Client ID: "); ok {
		id, tail, found := strings.Cut(rest, ", IP: ")
		if !found {
			id, tail, _ = strings.Cut(rest, " ")
		}
		e.Client = CleanClient(id)
		switch {
		case strings.HasSuffix(tail, " connected."):
			e.Kind = KindConnect
		case strings.Contains(tail, " disconnected gracefully"), strings.Contains(tail, " disconnected ungracefully"):
			e.Kind = KindDisconnect
		case strings.Contains(tail, " was disconnected. reason: "):
			_, reason, _ := strings.Cut(tail, " reason: ")
			e.Kind = KindDisconnect
			if hivemqRefusal(reason) {
				e.Kind = KindRefused
			}
		case strings.HasPrefix(tail, "session has expired"):
			e.Label = "session expired"
		default:
			return e, false
		}
		return e, true
	}
	switch {
	case strings.HasPrefix(s, "Outgoing publish message was dropped"), strings.HasPrefix(s, "Outgoing MQTT packet was dropped"):
		e.Label = "message dropped"
	case strings.HasPrefix(s, "Starting HiveMQ"):
		e.Kind, e.Label = KindStart, s
	case strings.HasPrefix(s, "Shutting down HiveMQ"):
		e.Kind, e.Label = KindStop, s
	case strings.HasPrefix(s, "Started HiveMQ in "), s == "Shutdown completed.":
		e.Label = "broker lifecycle"
	default:
		return e, false
	}
	return e, true
}

// hivemqRefusal tells a CONNECT refused (ConnectHandler.java,
// ConnectAuthContext.java, ReasonStrings.java) from a session the broker
// ended ("Client was idle for too long", "Another client connected with
// the same client id.").
func hivemqRefusal(reason string) bool {
	for _, p := range []string{"Authentication failed", "Authorization failed", "Sent CONNECT", "Connection prevented",
		"Not authorized", "Server busy", "Quota exceeded", "Connection rate exceeded", "Banned"} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}
