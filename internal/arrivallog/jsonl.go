package arrivallog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// JSON: one object a line (JSON lines), or a document holding arrays of
// them (a CloudWatch Logs export, an Event Grid delivery, Azure's
// {"records": [...]}). Each object says what it is by its own fields:
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
//   - any other: its time in the first of jsonTimeFields it has. Its event
//     is in event, eventType, type, action or status where it has one.
//     Otherwise it is an arrival.
var (
	jsonTimeFields   = []string{"ts", "timestamp", "@timestamp", "time", "t", "eventTime", "date", "datetime"}
	jsonClientFields = []string{"clientid", "client_id", "clientId", "client", "deviceId", "device_id", "device"}
	jsonEventFields  = []string{"event", "eventType", "event_type", "type", "action", "operation", "operationName"}
)

// jsonReader reads JSON objects as JSON lines, inside a document, or as
// the message of a text envelope.
type jsonReader struct {
	text     *textline.Reader           // a broker's line inside journald's or docker's object
	stamps   map[string]*logtime.Stamps // each time field's form, from its first value
	dialects map[string]int             // objects of each kind, for the format's name
	generic  string                     // the time field a generic object's time came from
	doc      bool
}

func newJSONReader(p *parser) *jsonReader {
	p.rec.dedupe = true
	return &jsonReader{text: textline.NewReader(textline.None, p.layout, p.o.Location, p.written, &p.zone), stamps: map[string]*logtime.Stamps{},
		dialects: map[string]int{}}
}

// parse reads one line of JSON lines: an object, or an array of them.
func (j *jsonReader) parse(p *parser, src *source, text []byte) error {
	t := bytes.TrimSpace(text)
	if t[0] == '[' {
		var objs []map[string]json.RawMessage
		if err := json.Unmarshal(t, &objs); err != nil {
			return &fileline.Error{Line: src.n, Err: fmt.Errorf("expected a JSON array of objects, got %q", fileline.Excerpt(t))}
		}
		for _, obj := range objs {
			if err := j.object(p, src.n, obj, nil, 0, false); err != nil {
				return err
			}
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(t, &obj); err != nil || obj == nil {
		return &fileline.Error{Line: src.n, Err: fmt.Errorf("expected a JSON object (JSON lines: one a line), got %q", fileline.Excerpt(t))}
	}
	return j.object(p, src.n, obj, t, 0, false)
}

// line reads a JSON message that a text envelope stamped at env.
func (j *jsonReader) line(p *parser, n int, msg []byte, env time.Duration, raw []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(msg, &obj); err != nil || obj == nil {
		p.log.Skipped++
		return nil
	}
	return j.object(p, n, obj, raw, env, true)
}

// object reads one object, whose envelope (if any) stamped it at env.
func (j *jsonReader) object(p *parser, n int, obj map[string]json.RawMessage, raw []byte, env time.Duration, envTimed bool) error {
	e, t, dialect, known, err := j.classify(p, n, obj, env, envTimed)
	if err != nil {
		return &fileline.Error{Line: n, Err: err}
	}
	if !known {
		p.log.Skipped++
		return nil
	}
	if e.Kind != brokerline.KindOther {
		j.dialects[dialect]++
	}
	if !t.ownTimed && !t.envTimed && e.Kind == brokerline.KindConnect {
		return &fileline.Error{Line: n, Err: fmt.Errorf("a JSON line needs a time field, one of %s; this one has: %s",
			orList(jsonTimeFields), listNames(slices.Sorted(maps.Keys(obj))))}
	}
	if raw == nil {
		raw = canonical(obj)
	}
	return p.rec.record(e, t, n, raw)
}

// classify says what an object is. known false: an object of a kind that
// carries nothing to count (a journald entry of another program's).
func (j *jsonReader) classify(p *parser, n int, obj map[string]json.RawMessage, env time.Duration, envTimed bool) (
	e brokerline.Line, t lineTimes, dialect string, known bool, err error) {
	t.env, t.envTimed = env, envTimed
	if envTimed {
		t.envDigits = 9
	}
	if c, ok := j.envelope(p, n, obj, t); ok {
		return c.e, c.t, c.dialect, c.known, c.err
	}
	if c, ok := j.cloudEvent(p, n, obj, t); ok {
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
				e.Client = first(obj, jsonClientFields...)
			}
			d := "jsonl"
			if e.Broker != "" {
				d = e.Broker
			}
			return j.timed(p, n, obj, e, t, d, jsonTimeFields...)
		}
	}
	// Anything else.
	e = brokerline.Line{Kind: brokerline.KindConnect, Client: first(obj, jsonClientFields...)}
	if ev, ok := scalarAny(obj, jsonEventFields...); ok {
		e.Kind = keywordKind(ev)
		if e.Kind == brokerline.KindOther {
			e.Label = ev
		}
	} else if msg, ok := scalarAny(obj, "msg", "message"); ok {
		e, _ = genericMessage(msg, obj)
	}
	return j.timed(p, n, obj, e, t, "jsonl", jsonTimeFields...)
}

// classified is what classify says of an object.
type classified struct {
	e       brokerline.Line
	t       lineTimes
	dialect string
	known   bool
	err     error
}

func classifiedOf(e brokerline.Line, t lineTimes, dialect string, known bool, err error) classified {
	return classified{e, t, dialect, known, err}
}

// envelope classifies an object that carries a broker's line inside it:
// journald's, docker's json-file, a CloudWatch Logs export; ok false for
// any other.
func (j *jsonReader) envelope(p *parser, n int, obj map[string]json.RawMessage, t lineTimes) (c classified, ok bool) {
	var e brokerline.Line
	if us, ok := scalar(obj, "__REALTIME_TIMESTAMP"); ok {
		msg := journalMessage(obj["MESSAGE"])
		at, err := decimal.Parse(us, 3)
		if err != nil {
			return classified{e: e, t: t, err: fmt.Errorf(`__REALTIME_TIMESTAMP: expected Unix µs, got %q`, fileline.Excerpt(us))}, true
		}
		ident, _ := scalar(obj, "SYSLOG_IDENTIFIER")
		return classifiedOf(j.inner(msg, ident, lineTimes{env: time.Duration(at), envTimed: true, envDigits: 6}, "journalctl -o json")), true
	}
	if msg, ok := scalar(obj, "log"); ok {
		if ts, ok := scalar(obj, "time"); ok {
			at, err := j.read(p, "time", ts, n)
			if err != nil {
				return classified{e: e, t: t, err: err}, true
			}
			return classifiedOf(j.inner([]byte(strings.TrimRight(msg, "\r\n")), "", lineTimes{env: at, envTimed: true, envDigits: 9}, "docker's json-file")), true
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
				return classifiedOf(j.classify(p, n, inner, time.Duration(at), true)), true
			}
			return classifiedOf(j.inner([]byte(msg), "", lineTimes{env: time.Duration(at), envTimed: true, envDigits: 3}, "a CloudWatch Logs export")), true
		}
	}
	return c, false
}

// cloudEvent classifies a cloud service's event: AWS IoT's lifecycle
// events and logs, Azure IoT Hub's; ok false for any other.
func (j *jsonReader) cloudEvent(p *parser, n int, obj map[string]json.RawMessage, t lineTimes) (c classified, ok bool) {
	var e brokerline.Line
	if ev, ok := scalar(obj, "eventType"); ok {
		if kind, known := awsLifecycle[ev]; known {
			e = brokerline.Line{Kind: kind, Broker: "aws-iot", Client: first(obj, "clientId", "clientid")}
			if kind == brokerline.KindOther {
				e.Label = ev
			}
			return classifiedOf(j.timed(p, n, obj, e, t, "aws-iot lifecycle events", "timestamp")), true
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
			return classifiedOf(j.timedUTC(p, n, obj, e, t, "aws-iot CloudWatch logs", "timestamp")), true
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
		return classifiedOf(j.timed(p, n, obj, e, t, "azure-iot device connection events", "eventTime", "time")), true
	}
	if op, ok := scalar(obj, "operationName"); ok && (op == "deviceConnect" || op == "deviceDisconnect") {
		e = brokerline.Line{Broker: "azure-iot", Client: azureDevice(obj), Kind: brokerline.KindDisconnect}
		if op == "deviceConnect" {
			e.Kind = brokerline.KindConnect
			if level, _ := scalar(obj, "level"); strings.EqualFold(level, "Error") {
				e.Kind = brokerline.KindRefused
			}
		}
		return classifiedOf(j.timed(p, n, obj, e, t, "azure-iot Connections logs", "time")), true
	}
	if op, ok := scalar(obj, "opType"); ok && (op == "deviceConnected" || op == "deviceDisconnected") {
		e = brokerline.Line{Broker: "azure-iot", Client: first(obj, "deviceId", "iothub-connection-device-id"), Kind: brokerline.KindDisconnect}
		if op == "deviceConnected" {
			e.Kind = brokerline.KindConnect
		}
		return classifiedOf(j.timed(p, n, obj, e, t, "azure-iot device connection events", "operationTimestamp", "time")), true
	}
	return c, false
}

// inner reads a broker's line inside an envelope's object.
func (j *jsonReader) inner(msg []byte, ident string, t lineTimes, dialect string) (brokerline.Line, lineTimes, string, bool, error) {
	tl := j.text.Read(msg)
	if !tl.Known && ident == "systemd" {
		tl.Said, tl.Known = brokerline.Systemd(string(tl.Msg))
	}
	t.own, t.ownTimed, t.ownDigits = tl.At, tl.Timed, tl.Digits
	if tl.StampErr != nil && tl.Said.Kind == brokerline.KindConnect {
		return tl.Said, t, "", false, tl.StampErr
	}
	if tl.Said.Broker != "" {
		dialect = tl.Said.Broker + " under " + dialect
	}
	return tl.Said, t, dialect, tl.Known, nil
}

// timed reads the object's time from the first of fields it has.
func (j *jsonReader) timed(p *parser, n int, obj map[string]json.RawMessage, e brokerline.Line, t lineTimes, dialect string, fields ...string) (
	brokerline.Line, lineTimes, string, bool, error) {
	if dialect == "jsonl" && j.generic != "" {
		fields = []string{j.generic} // a log of its own: its first line's field
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
		at, err := j.read(p, f, v, n)
		if err != nil {
			return e, t, "", false, fmt.Errorf("field %q: %w", f, err)
		}
		t.own, t.ownTimed, t.ownDigits = at, true, j.stamps[f].Digits(v)
		if dialect == "jsonl" && j.generic == "" {
			j.generic = f
		}
		return e, t, dialect, true, nil
	}
	if e.Kind == brokerline.KindConnect && !t.envTimed {
		if j.generic != "" {
			return e, t, "", false, fmt.Errorf("expected a time in field %q, as on line %d; this one has: %s",
				j.generic, j.stamps[j.generic].First, listNames(slices.Sorted(maps.Keys(obj))))
		}
		return e, t, "", false, fmt.Errorf("a JSON line needs a time field, one of %s; this one has: %s",
			orList(fields), listNames(slices.Sorted(maps.Keys(obj))))
	}
	return e, t, dialect, true, nil
}

// timedUTC is timed for a service that writes UTC without saying so (AWS
// IoT's CloudWatch logs: "2017-08-10 15:37:23.476").
func (j *jsonReader) timedUTC(p *parser, n int, obj map[string]json.RawMessage, e brokerline.Line, t lineTimes, dialect, field string) (
	brokerline.Line, lineTimes, string, bool, error) {
	v, ok := scalar(obj, field)
	if !ok {
		return j.timed(p, n, obj, e, t, dialect, field)
	}
	c, k, ok := logtime.ScanStamp([]byte(v))
	if !ok || k != len(v) {
		return j.timed(p, n, obj, e, t, dialect, field)
	}
	at, err := logtime.NewClock(time.UTC, p.written, &p.zone).At(c)
	if err != nil {
		return e, t, "", false, fmt.Errorf("field %q: %w", field, err)
	}
	t.own, t.ownTimed, t.ownDigits = at, true, c.Digits
	return e, t, dialect, true, nil
}

// read reads a time field's value, in the form its first value had.
func (j *jsonReader) read(p *parser, field, v string, n int) (time.Duration, error) {
	s := j.stamps[field]
	if s == nil {
		s = &logtime.Stamps{Clock: logtime.NewClock(p.o.Location, p.written, &p.zone)}
		j.stamps[field] = s
	}
	return s.Read(v, n)
}

// name names the format taken from the objects' kinds.
func (j *jsonReader) name(p *parser) string {
	best, n := "", 0
	for d, c := range j.dialects {
		if c > n || c == n && d < best {
			best, n = d, c
		}
	}
	container := "JSON lines"
	if j.doc {
		container = "a JSON document"
	}
	switch {
	case best == "" || best == "jsonl":
		if j.generic != "" {
			if s := j.stamps[j.generic]; s != nil {
				return withAssumed(fmt.Sprintf("jsonl (field %s, %s)", j.generic, s.Kind), s.Clock)
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
var awsLifecycle = map[string]Kind{"connected": brokerline.KindConnect, "disconnected": brokerline.KindDisconnect, "connect_failed": brokerline.KindRefused,
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

// keywordKind reads an event field's value: connected, client.connected,
// DeviceConnected, connect_failed, offline ...
func keywordKind(v string) Kind {
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
	e := brokerline.Line{Client: first(obj, jsonClientFields...)}
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

// canonical writes an object's members in the order of their keys: the
// same object, the same bytes, to know a copy by.
func canonical(obj map[string]json.RawMessage) []byte {
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

// readDocument reads a JSON document: objects, arrays of them, and
// objects that hold such arrays (events, records, results, value), in any
// layout over lines. Arrays are read as they stream past, so that an
// export of millions of events is never held whole.
// It returns the lines it read.
func (p *parser) readDocument(r io.Reader) (int, error) {
	return p.newDocWalker(r).walk()
}

func (p *parser) newDocWalker(r io.Reader) *docWalker {
	lc := &lineCounter{r: r}
	w := &docWalker{p: p, j: newJSONReader(p), dec: json.NewDecoder(lc), lc: lc}
	lc.consumed = w.dec.InputOffset
	w.j.doc = true
	p.lp = w.j
	return w
}

// walk reads the document's values, and returns the lines it read.
func (w *docWalker) walk() (int, error) {
	for {
		tok, err := w.dec.Token()
		if err == io.EOF {
			return w.lc.lines(), nil
		}
		if err != nil {
			return 0, w.syntax(err)
		}
		if err := w.value(tok); err != nil {
			return 0, err
		}
	}
}

// maxJSONDepth bounds how deep a JSON document's arrays and objects nest
// around its events: a CloudWatch export's are three deep, a Logs
// Insights result's four. The walk goes a call deeper a level.
const maxJSONDepth = 64

// docWalker reads a JSON document's values.
type docWalker struct {
	p     *parser
	j     *jsonReader
	dec   *json.Decoder
	lc    *lineCounter
	depth int // the arrays and objects open
}

// enter opens an array or an object, refusing one past maxJSONDepth.
func (w *docWalker) enter() error {
	if w.depth++; w.depth > maxJSONDepth {
		return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()),
			Err: fmt.Errorf("the JSON document nests deeper than %d arrays and objects; a log's events are a few levels in", maxJSONDepth)}
	}
	return nil
}

func (w *docWalker) leave() { w.depth-- }

// containerKeys hold the arrays of events a document wraps them in:
// CloudWatch Logs' events, Azure's records, Logs Insights' results.
var containerKeys = map[string]bool{"events": true, "records": true, "Records": true, "results": true, "value": true, "items": true}

func (w *docWalker) syntax(err error) error {
	if errors.Is(err, ErrLineTooLong) {
		return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()), Err: fmt.Errorf("a JSON value %w", ErrLineTooLong)}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()), Err: errors.New("the JSON document ends before its arrays and objects close")}
	}
	return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()), Err: fmt.Errorf("expected a JSON document (or JSON lines): %v", err)}
}

// value reads the value that tok starts. An object is an event unless it
// holds arrays of them. An array's objects are events. They may instead be
// {"field": ..., "value": ...} pairs of one, as Logs Insights writes a row.
func (w *docWalker) value(tok json.Token) error {
	switch tok {
	case json.Delim('{'):
		line := w.lc.line(w.dec.InputOffset() - 1)
		obj, container, err := w.object()
		if err != nil || container {
			return err
		}
		return w.j.object(w.p, line, obj, nil, 0, false)
	case json.Delim('['):
		if err := w.enter(); err != nil {
			return err
		}
		defer w.leave()
		var row map[string]json.RawMessage
		rowLine := 0
		for w.dec.More() {
			w.lc.line(w.dec.InputOffset()) // no line before here is asked about again
			t, err := w.dec.Token()
			if err != nil {
				return w.syntax(err)
			}
			if t != json.Delim('{') {
				if err := w.value(t); err != nil {
					return err
				}
				continue
			}
			line := w.lc.line(w.dec.InputOffset() - 1)
			obj, container, err := w.object()
			if err != nil {
				return err
			}
			if container {
				continue
			}
			if f, ok := scalar(obj, "field"); ok && len(obj) == 2 && obj["value"] != nil {
				if row == nil {
					row, rowLine = map[string]json.RawMessage{}, line
				}
				row[f] = obj["value"]
				continue
			}
			if err := w.j.object(w.p, line, obj, nil, 0, false); err != nil {
				return err
			}
		}
		if _, err := w.dec.Token(); err != nil { // ]
			return w.syntax(err)
		}
		if row != nil {
			return w.j.object(w.p, rowLine, row, nil, 0, false)
		}
	}
	return nil // a scalar: nothing to count
}

// object reads an object's members after its {. container true: it held
// arrays of events, which were read.
func (w *docWalker) object() (map[string]json.RawMessage, bool, error) {
	if err := w.enter(); err != nil {
		return nil, false, err
	}
	defer w.leave()
	obj := map[string]json.RawMessage{}
	container, held := false, 0
	for w.dec.More() {
		w.lc.line(w.dec.InputOffset())
		kt, err := w.dec.Token()
		if err != nil {
			return nil, false, w.syntax(err)
		}
		key, _ := kt.(string)
		if !containerKeys[key] {
			var raw json.RawMessage
			if err := w.dec.Decode(&raw); err != nil {
				return nil, false, w.syntax(err)
			}
			obj[key] = raw
			if held += len(key) + len(raw); held > MaxLineBytes { // an event's fields, as a line's
				line := w.lc.line(w.dec.InputOffset())
				return nil, false, &fileline.Error{Line: line, Err: fmt.Errorf("an object's fields %w", ErrLineTooLong)}
			}
			continue
		}
		t, err := w.dec.Token()
		if err != nil {
			return nil, false, w.syntax(err)
		}
		switch t {
		case json.Delim('['):
			container = true
			if err := w.value(t); err != nil {
				return nil, false, err
			}
		case json.Delim('{'):
			inner, innerContainer, err := w.object()
			if err != nil {
				return nil, false, err
			}
			container = container || innerContainer
			raw, _ := json.Marshal(inner)
			obj[key] = raw
		default:
			raw, _ := json.Marshal(t)
			obj[key] = raw
		}
	}
	if _, err := w.dec.Token(); err != nil { // }
		return nil, false, w.syntax(err)
	}
	return obj, container, nil
}

// lineCounter counts the lines of what a JSON decoder reads, so that an
// offset it gives can be named by its line.
type lineCounter struct {
	r     io.Reader
	read  int64   // bytes read so far
	nl    []int64 // offsets of the newlines not yet asked about
	below int     // newlines before the offsets in nl
	// consumed is the decoder's offset: what it holds beyond it, one
	// value being read, is bounded by MaxLineBytes
	consumed func() int64
	last     byte // the last byte read
}

func (c *lineCounter) Read(b []byte) (int, error) {
	if c.consumed != nil {
		held := c.read - c.consumed()
		if held > MaxLineBytes {
			return 0, ErrLineTooLong
		}
		b = b[:min(int64(len(b)), MaxLineBytes+1-held)] // past the bound by a byte at most
	}
	n, err := c.r.Read(b)
	for i, x := range b[:n] {
		if x == '\n' {
			c.nl = append(c.nl, c.read+int64(i))
		}
	}
	c.read += int64(n)
	if n > 0 {
		c.last = b[n-1]
	}
	return n, err
}

// lines is how many lines were read, once every byte is.
func (c *lineCounter) lines() int {
	n := c.below + len(c.nl)
	if c.last != '\n' {
		n++ // the last line, without its newline
	}
	return n
}

// line is the line (from 1) an offset is on; offsets asked about must
// not go back.
func (c *lineCounter) line(off int64) int {
	k := 0
	for k < len(c.nl) && c.nl[k] < off {
		k++
	}
	c.below += k
	c.nl = c.nl[k:]
	return c.below + 1
}
