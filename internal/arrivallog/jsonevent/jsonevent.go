// Package jsonevent says what a JSON event is: one object a line (JSON
// lines), or a document holding arrays of them (Walk: a CloudWatch Logs
// export, an Event Grid delivery, Azure's {"records": [...]}). Each
// object says what it is by its own fields:
//
//   - journald (journalctl -o json): __REALTIME_TIMESTAMP and MESSAGE, a
//     broker's line inside.
//   - docker's json-file: log, stream and time, a broker's line inside.
//   - a CloudWatch Logs event: timestamp and message (a JSON event or a
//     line), with ingestionTime, logStreamName or eventId.
//   - AWS IoT Core's lifecycle events: eventType connected, disconnected,
//     connect_failed, subscribed, unsubscribed; clientId; timestamp (ms).
//   - AWS IoT Core's CloudWatch logs (AWSIotLogsV2): eventType Connect,
//     Disconnect ..., status Success or Failure.
//   - Azure IoT Hub: eventType (Event Grid) or type (CloudEvents)
//     Microsoft.Devices.DeviceConnected or DeviceDisconnected. The
//     Connections resource logs have operationName deviceConnect or
//     deviceDisconnect.
//   - a broker's JSON log (RabbitMQ's log.file.formatter = json, EMQX's
//     formatter = json, VerneMQ's): its msg.
//   - any other: its time in the first of ts, timestamp, @timestamp,
//     time, t, eventTime, date and datetime it has. Its event is in
//     event, eventType, event_type, type, action, operation or
//     operationName where it has one. Otherwise it is an arrival.
package jsonevent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/arrivallog/textline"
	"github.com/herdguard/herdguard/internal/decimal"
	"github.com/herdguard/herdguard/internal/fileline"
)

// The fields a generic object's time, client and event are looked for in.
var (
	timeFields   = []string{"ts", "timestamp", "@timestamp", "time", "t", "eventTime", "date", "datetime"}
	clientFields = []string{"clientid", "client_id", "clientId", "client", "deviceId", "device_id", "device"}
	eventFields  = []string{"event", "eventType", "event_type", "type", "action", "operation", "operationName"}
)

// Reader says what JSON objects are. It learns as it reads: each time
// field's form from its first value, and a generic log's time field from
// its first object. A Reader is not safe for concurrent use.
type Reader struct {
	text     *textline.Reader           // a broker's line inside journald's or docker's object
	stamps   map[string]*logtime.Stamps // each time field's form, from its first value
	dialects map[string]int             // objects of each kind, for the format's name
	generic  string                     // the time field a generic object's time came from
	loc      *time.Location
	ref      time.Time
	zone     *logtime.ZoneNote
	// Doc: the objects came from a JSON document rather than JSON lines,
	// as Name says.
	Doc bool
}

// NewReader reads objects whose stamps name no zone or year as
// logtime.NewClock reads them, with loc, ref and zone, and a broker's own
// line inside an object with layout lay where it is not nil.
func NewReader(lay *logtime.Layout, loc *time.Location, ref time.Time, zone *logtime.ZoneNote) *Reader {
	return &Reader{text: textline.NewReader(textline.None, lay, loc, ref, zone), stamps: map[string]*logtime.Stamps{},
		dialects: map[string]int{}, loc: loc, ref: ref, zone: zone}
}

// Event is what an object says: what happened (Said), when, and the kind
// of log that wrote it. Known false: an object that carries nothing to
// count (a journald entry of another program's), as is the zero value.
type Event struct {
	Said    brokerline.Line
	Times   logtime.LineTimes
	Dialect string
	Known   bool
}

// Classify says what an object on line n is; an envelope around it (a
// text line's, a CSV row's) stamped it at env where envTimed. A connect
// without a time is an error.
func (r *Reader) Classify(n int, obj map[string]json.RawMessage, env time.Duration, envTimed bool) (Event, error) {
	e, t, dialect, known, err := r.classify(n, obj, env, envTimed)
	if err != nil || !known {
		return Event{}, err
	}
	if e.Kind != brokerline.KindOther {
		r.dialects[dialect]++
	}
	if !t.OwnTimed && !t.EnvTimed && e.Kind == brokerline.KindConnect {
		return Event{}, fmt.Errorf("a JSON line needs a time field, one of %s; this one has: %s",
			fileline.OneOf(timeFields), fileline.Names(slices.Sorted(maps.Keys(obj))))
	}
	return Event{Said: e, Times: t, Dialect: dialect, Known: true}, nil
}

// Inner says what a broker's line carried in a message field is (a CSV
// row's), with the times its carrier gave it.
func (r *Reader) Inner(msg []byte, t logtime.LineTimes) (Event, error) {
	e, t, dialect, known, err := r.inner(msg, "", t, "")
	return Event{Said: e, Times: t, Dialect: dialect, Known: known}, err
}

// Dialects counts the kinds of object read that said something (Name
// names the most common).
func (r *Reader) Dialects() int { return len(r.dialects) }

// classify says what an object is (Classify). known false: an object of a kind that
// carries nothing to count (a journald entry of another program's).
func (r *Reader) classify(n int, obj map[string]json.RawMessage, env time.Duration, envTimed bool) (
	e brokerline.Line, t logtime.LineTimes, dialect string, known bool, err error) {
	t.Env, t.EnvTimed = env, envTimed
	if envTimed {
		t.EnvDigits = 9
	}
	if c, ok := r.envelope(n, obj, t); ok {
		return c.e, c.t, c.dialect, c.known, c.err
	}
	if c, ok := r.cloudEvent(n, obj, t); ok {
		return c.e, c.t, c.dialect, c.known, c.err
	}
	// A broker's JSON log.
	if msg, ok := scalar(obj, "msg"); ok {
		pid, _ := scalar(obj, "pid")
		known := false
		if e, known = brokerline.Classify([]byte(msg), pid, ""); !known {
			client, _ := scalar(obj, "clientid")
			packet, _ := scalar(obj, "packet")
			reason, _ := scalar(obj, "reason")
			e, known = brokerline.EMQX(brokerline.EMQXFields{Msg: msg, ClientID: client, Packet: packet, Reason: reason})
			if known && e.Label == "other" {
				e, known = genericMessage(msg, obj)
			}
		}
		if known {
			if e.Client == "" {
				e.Client = first(obj, clientFields...)
			}
			d := "jsonl"
			if e.Broker != "" {
				d = e.Broker
			}
			return r.timed(n, obj, e, t, d, timeFields...)
		}
	}
	// Anything else.
	e = brokerline.Line{Kind: brokerline.KindConnect, Client: first(obj, clientFields...)}
	if ev, ok := scalarAny(obj, eventFields...); ok {
		e.Kind = KeywordKind(ev)
		if e.Kind == brokerline.KindOther {
			e.Label = ev
		}
	} else if msg, ok := scalarAny(obj, "msg", "message"); ok {
		e, _ = genericMessage(msg, obj)
	}
	return r.timed(n, obj, e, t, "jsonl", timeFields...)
}

// classified is what classify says of an object.
type classified struct {
	e       brokerline.Line
	t       logtime.LineTimes
	dialect string
	known   bool
	err     error
}

func classifiedOf(e brokerline.Line, t logtime.LineTimes, dialect string, known bool, err error) classified {
	return classified{e, t, dialect, known, err}
}

// envelope classifies an object that carries a broker's line inside it:
// journald's, docker's json-file, a CloudWatch Logs export; ok false for
// any other.
func (r *Reader) envelope(n int, obj map[string]json.RawMessage, t logtime.LineTimes) (c classified, ok bool) {
	var e brokerline.Line
	if us, ok := scalar(obj, "__REALTIME_TIMESTAMP"); ok {
		msg := journalMessage(obj["MESSAGE"])
		at, err := decimal.Parse(us, 3)
		if err != nil {
			return classified{e: e, t: t, err: fmt.Errorf(`__REALTIME_TIMESTAMP: expected Unix µs, got %q`, fileline.Excerpt(us))}, true
		}
		ident, _ := scalar(obj, "SYSLOG_IDENTIFIER")
		return classifiedOf(r.inner(msg, ident, logtime.LineTimes{Env: time.Duration(at), EnvTimed: true, EnvDigits: 6}, "journalctl -o json")), true
	}
	if msg, ok := scalar(obj, "log"); ok {
		if ts, ok := scalar(obj, "time"); ok {
			at, err := r.read("time", ts, n)
			if err != nil {
				return classified{e: e, t: t, err: err}, true
			}
			return classifiedOf(r.inner([]byte(strings.TrimRight(msg, "\r\n")), "", logtime.LineTimes{Env: at, EnvTimed: true, EnvDigits: 9}, "docker's json-file")), true
		}
	}
	if msg, ok := scalar(obj, "message"); ok && hasAny(obj, "ingestionTime", "logStreamName", "eventId") {
		if ms, ok := scalar(obj, "timestamp"); ok {
			at, err := decimal.Parse(ms, 6)
			if err != nil {
				return classified{e: e, t: t, err: fmt.Errorf(`timestamp: expected Unix ms, got %q`, fileline.Excerpt(ms))}, true
			}
			var inner map[string]json.RawMessage
			if json.Unmarshal([]byte(msg), &inner) == nil && inner != nil {
				return classifiedOf(r.classify(n, inner, time.Duration(at), true)), true
			}
			return classifiedOf(r.inner([]byte(msg), "", logtime.LineTimes{Env: time.Duration(at), EnvTimed: true, EnvDigits: 3}, "a CloudWatch Logs export")), true
		}
	}
	return c, false
}

// cloudEvent classifies a cloud service's event: AWS IoT's lifecycle
// events and logs, Azure IoT Hub's; ok false for any other.
func (r *Reader) cloudEvent(n int, obj map[string]json.RawMessage, t logtime.LineTimes) (c classified, ok bool) {
	var e brokerline.Line
	if ev, ok := scalar(obj, "eventType"); ok {
		if kind, known := awsLifecycle[ev]; known {
			e = brokerline.Line{Kind: kind, Broker: "aws-iot", Client: first(obj, "clientId", "clientid")}
			if kind == brokerline.KindOther {
				e.Label = ev
			}
			return classifiedOf(r.timed(n, obj, e, t, "aws-iot lifecycle events", "timestamp")), true
		}
		if _, hasStatus := obj["status"]; hasStatus && awsLogEvent(ev) {
			status, _ := scalar(obj, "status")
			e = brokerline.Line{Broker: "aws-iot", Client: first(obj, "clientId", "clientid")}
			switch {
			case ev == "Connect" && status == "Success":
				e.Kind = brokerline.KindConnect
			case ev == "Connect":
				e.Kind = brokerline.KindRefused
			case ev == "Disconnect":
				e.Kind = brokerline.KindDisconnect
			default:
				e.Label = ev
			}
			return classifiedOf(r.timedUTC(n, obj, e, t, "aws-iot CloudWatch logs", "timestamp")), true
		}
	}
	if ev, ok := scalarAny(obj, "eventType", "type"); ok && strings.HasPrefix(ev, "Microsoft.Devices.") {
		e = brokerline.Line{Broker: "azure-iot", Client: azureDevice(obj)}
		switch ev {
		case "Microsoft.Devices.DeviceConnected":
			e.Kind = brokerline.KindConnect
		case "Microsoft.Devices.DeviceDisconnected":
			e.Kind = brokerline.KindDisconnect
		default:
			e.Label = strings.TrimPrefix(ev, "Microsoft.Devices.")
		}
		return classifiedOf(r.timed(n, obj, e, t, "azure-iot device connection events", "eventTime", "time")), true
	}
	if op, ok := scalar(obj, "operationName"); ok && (op == "deviceConnect" || op == "deviceDisconnect") {
		e = brokerline.Line{Broker: "azure-iot", Client: azureDevice(obj), Kind: brokerline.KindDisconnect}
		if op == "deviceConnect" {
			e.Kind = brokerline.KindConnect
			if level, _ := scalar(obj, "level"); strings.EqualFold(level, "Error") {
				e.Kind = brokerline.KindRefused
			}
		}
		return classifiedOf(r.timed(n, obj, e, t, "azure-iot Connections logs", "time")), true
	}
	if op, ok := scalar(obj, "opType"); ok && (op == "deviceConnected" || op == "deviceDisconnected") {
		e = brokerline.Line{Broker: "azure-iot", Client: first(obj, "deviceId", "iothub-connection-device-id"), Kind: brokerline.KindDisconnect}
		if op == "deviceConnected" {
			e.Kind = brokerline.KindConnect
		}
		return classifiedOf(r.timed(n, obj, e, t, "azure-iot device connection events", "operationTimestamp", "time")), true
	}
	return c, false
}

// inner reads a broker's line inside an envelope's object.
func (r *Reader) inner(msg []byte, ident string, t logtime.LineTimes, dialect string) (brokerline.Line, logtime.LineTimes, string, bool, error) {
	tl := r.text.Read(msg)
	if !tl.Known && ident == "systemd" {
		tl.Said, tl.Known = brokerline.Systemd(string(tl.Msg))
	}
	t.Own, t.OwnTimed, t.OwnDigits = tl.At, tl.Timed, tl.Digits
	if tl.StampErr != nil && tl.Said.Kind == brokerline.KindConnect {
		return tl.Said, t, "", false, tl.StampErr
	}
	if tl.Said.Broker != "" {
		dialect = tl.Said.Broker + " under " + dialect
	}
	return tl.Said, t, dialect, tl.Known, nil
}

// timed reads the object's time from the first of fields it has.
func (r *Reader) timed(n int, obj map[string]json.RawMessage, e brokerline.Line, t logtime.LineTimes, dialect string, fields ...string) (
	brokerline.Line, logtime.LineTimes, string, bool, error) {
	if dialect == "jsonl" && r.generic != "" {
		fields = []string{r.generic} // a log of its own: its first line's field
	}
	for _, f := range fields {
		raw, ok := obj[f]
		if !ok {
			continue
		}
		v, ok := jsonScalar(raw)
		if !ok {
			return e, t, "", false, fmt.Errorf("expected %s in field %q, got %s", logtime.StampExpected, f, fileline.Excerpt([]byte(raw)))
		}
		at, err := r.read(f, v, n)
		if err != nil {
			return e, t, "", false, fmt.Errorf("field %q: %w", f, err)
		}
		t.Own, t.OwnTimed, t.OwnDigits = at, true, r.stamps[f].Digits(v)
		if dialect == "jsonl" && r.generic == "" {
			r.generic = f
		}
		return e, t, dialect, true, nil
	}
	if e.Kind == brokerline.KindConnect && !t.EnvTimed {
		if r.generic != "" {
			return e, t, "", false, fmt.Errorf("expected a time in field %q, as on line %d; this one has: %s",
				r.generic, r.stamps[r.generic].First, fileline.Names(slices.Sorted(maps.Keys(obj))))
		}
		return e, t, "", false, fmt.Errorf("a JSON line needs a time field, one of %s; this one has: %s",
			fileline.OneOf(fields), fileline.Names(slices.Sorted(maps.Keys(obj))))
	}
	return e, t, dialect, true, nil
}

// timedUTC is timed for a service that writes UTC without saying so (AWS
// IoT's CloudWatch logs: "2017-08-10 15:37:23.476").
func (r *Reader) timedUTC(n int, obj map[string]json.RawMessage, e brokerline.Line, t logtime.LineTimes, dialect, field string) (
	brokerline.Line, logtime.LineTimes, string, bool, error) {
	v, ok := scalar(obj, field)
	if !ok {
		return r.timed(n, obj, e, t, dialect, field)
	}
	c, k, ok := logtime.ScanStamp([]byte(v))
	if !ok || k != len(v) {
		return r.timed(n, obj, e, t, dialect, field)
	}
	at, err := logtime.NewClock(time.UTC, r.ref, r.zone).At(c)
	if err != nil {
		return e, t, "", false, fmt.Errorf("field %q: %w", field, err)
	}
	t.Own, t.OwnTimed, t.OwnDigits = at, true, c.Digits
	return e, t, dialect, true, nil
}

// read reads a time field's value, in the form its first value had.
func (r *Reader) read(field, v string, n int) (time.Duration, error) {
	s := r.stamps[field]
	if s == nil {
		s = &logtime.Stamps{Clock: logtime.NewClock(r.loc, r.ref, r.zone)}
		r.stamps[field] = s
	}
	return s.Read(v, n)
}

// Name names the format taken from the objects' kinds: "jsonl (field ts,
// RFC 3339)", "aws-iot lifecycle events (JSON lines)", "mosquitto under
// journalctl -o json" ...
func (r *Reader) Name() string {
	best, n := "", 0
	for d, c := range r.dialects {
		if c > n || c == n && d < best {
			best, n = d, c
		}
	}
	container := "JSON lines"
	if r.Doc {
		container = "a JSON document"
	}
	switch {
	case best == "" || best == "jsonl":
		if r.generic != "" {
			if s := r.stamps[r.generic]; s != nil {
				return withAssumed(fmt.Sprintf("jsonl (field %s, %s)", r.generic, s.Kind), s.Clock)
			}
		}
		return "jsonl"
	case strings.Contains(best, " under "):
		return best
	}
	return best + " (" + container + ")"
}

func withAssumed(name string, k *logtime.Clock) string {
	if a := k.Assumed(); a != "" {
		return name + "; " + a
	}
	return name
}

// awsLifecycle are the eventTypes of AWS IoT Core's lifecycle events
// (docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
var awsLifecycle = map[string]brokerline.Kind{"connected": brokerline.KindConnect, "disconnected": brokerline.KindDisconnect, "connect_failed": brokerline.KindRefused,
	"subscribed": brokerline.KindOther, "unsubscribed": brokerline.KindOther}

// awsLogEvent recognises an eventType of AWS IoT's CloudWatch logs
// (docs.aws.amazon.com/iot/latest/developerguide/cwl-format.html).
func awsLogEvent(ev string) bool {
	switch ev {
	case "Connect", "Disconnect", "Publish-In", "Publish-Out", "Subscribe", "Unsubscribe", "Queued", "DeleteConnection",
		"GetRetainedMessage", "ListRetainedMessage", "Ping", "Connection.AuthNError":
		return true
	}
	return false
}

// azureDevice is the device an Azure event names: data.deviceId (and its
// module), properties.deviceId (a JSON string or an object), or the
// subject's devices/ID.
func azureDevice(obj map[string]json.RawMessage) string {
	for _, key := range []string{"data", "properties"} {
		raw, ok := obj[key]
		if !ok {
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) != nil {
			var s string
			if json.Unmarshal(raw, &s) != nil || json.Unmarshal([]byte(s), &inner) != nil {
				continue
			}
		}
		if id, ok := scalar(inner, "deviceId"); ok {
			if m, ok := scalar(inner, "moduleId"); ok && m != "" {
				return id + "/" + m
			}
			return id
		}
	}
	if s, ok := scalar(obj, "subject"); ok {
		if id, found := strings.CutPrefix(s, "devices/"); found {
			return id
		}
	}
	return first(obj, "deviceId")
}

// KeywordKind reads an event field's value: connected, client.connected,
// DeviceConnected, connect_failed, offline ...
func KeywordKind(v string) brokerline.Kind {
	l := strings.ToLower(v)
	switch {
	case strings.Contains(l, "disconnect"), strings.Contains(l, "offline"), strings.Contains(l, "connection_lost"),
		strings.Contains(l, "connectionlost"):
		return brokerline.KindDisconnect
	case strings.Contains(l, "connect") && (strings.Contains(l, "fail") || strings.Contains(l, "refus") ||
		strings.Contains(l, "reject") || strings.Contains(l, "denied")):
		return brokerline.KindRefused
	case strings.Contains(l, "connect"), l == "online":
		return brokerline.KindConnect
	}
	return brokerline.KindOther
}

// genericMessage reads a msg or message field that is, all of it, an
// event's name ("connected", "client disconnected"); any other message is
// a line of another kind.
func genericMessage(msg string, obj map[string]json.RawMessage) (brokerline.Line, bool) {
	norm := strings.NewReplacer("_", " ", ".", " ", "-", " ").Replace(strings.ToLower(strings.TrimSpace(msg)))
	e := brokerline.Line{Client: first(obj, clientFields...)}
	switch norm {
	case "connected", "client connected", "device connected", "session created", "connect", "online":
		e.Kind = brokerline.KindConnect
	case "disconnected", "client disconnected", "device disconnected", "connection lost", "disconnect", "offline":
		e.Kind = brokerline.KindDisconnect
	case "connect failed", "connection refused", "authentication failed", "client connect failed":
		e.Kind = brokerline.KindRefused
	default:
		e.Label = "other"
	}
	return e, true
}

// Canonical writes an object's members in the order of their keys: the
// same object, the same bytes, to know a copy by.
func Canonical(obj map[string]json.RawMessage) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		b = append(append(append(b, k...), 0), obj[k]...)
		b = append(b, 0)
	}
	return b
}

// scalar is a field's value where it is a string or a number.
func scalar(obj map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := obj[key]
	if !ok {
		return "", false
	}
	return jsonScalar(raw)
}

func scalarAny(obj map[string]json.RawMessage, keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := scalar(obj, k); ok {
			return v, true
		}
	}
	return "", false
}

// first is the first of keys that the object has as a string or number.
func first(obj map[string]json.RawMessage, keys ...string) string {
	v, _ := scalarAny(obj, keys...)
	return v
}

func hasAny(obj map[string]json.RawMessage, keys ...string) bool {
	for _, k := range keys {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

// journalMessage is journald's MESSAGE: a string, or an array of its
// bytes where it is not UTF-8.
func journalMessage(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	var b []byte
	var nums []int
	if json.Unmarshal(raw, &nums) == nil {
		for _, c := range nums {
			b = append(b, byte(c))
		}
	}
	return b
}

// jsonScalar is a JSON string's value or a number's digits; ok false for
// anything else (null, true, an object).
func jsonScalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return strings.TrimSpace(s), true
	}
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return string(raw), true
	}
	return "", false
}
