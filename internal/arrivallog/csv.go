package arrivallog

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/arrivallog/jsonevent"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/csvrow"
	"github.com/herdguard/herdguard/internal/decimal"
	"github.com/herdguard/herdguard/internal/fileline"
)

// CSV and TSV: a header, then one row an arrival, split as csvrow splits
// every CSV file.
var (
	secondsColumns = []string{"t_s"}
	millisColumns  = []string{"unix_ms"}
	stampColumns   = []string{"time", "timestamp", "ts", "@timestamp"}
	clientColumns  = []string{"client_id", "clientid", "client", "device", "clientId", "deviceId"}
	// A row with a message column (a Logs Insights export's @message) is
	// what its message says; with an event column, what that names.
	messageColumns = []string{"@message", "message", "msg", "log"}
	eventColumns   = []string{"event", "eventType", "event_type", "type", "action"}
)

// errRecordTooLong is a CSV record's ErrLineTooLong: its lines together.
var errRecordTooLong = fmt.Errorf("a record %w", ErrLineTooLong)

type csvParser struct {
	name    string // csv or tsv
	delim   byte
	header  []string // nil until the first line is read
	time    int      // the time column
	column  string   // its name, as the header writes it
	kind    logtime.StampKind
	client  int // -1: none
	lag     int // -1: none
	outcome int // -1: none
	message int // -1: none
	event   int // -1: none
	stamps  logtime.Stamps
	j       *jsonParser // the rows' JSON messages
	events  bool        // devicesim's events.csv
	fields  []string
	pending []byte // a record spanning lines
}

func (p *csvParser) parse(ps *parser, src *source, text []byte) error {
	l := ps.log
	if p.header == nil {
		return p.readHeader(ps, src.n, text)
	}
	line := src.n
	record, joinErr := csvrow.Join(p.pending, text, p.delim, MaxLineBytes, errRecordTooLong, src.next)
	switch {
	case src.err() != nil:
		return src.err()
	case joinErr != nil:
		return &fileline.Error{Line: line, Err: joinErr}
	case len(record) > len(text): // joined in p.pending's buffer, which it keeps
		p.pending = record
	}
	p.fields = csvrow.Split(string(record), p.delim, p.fields[:0])
	if p.events {
		return p.eventsRow(ps, line)
	}
	if p.time >= len(p.fields) || p.fields[p.time] == "" {
		return &fileline.Error{Line: line, Err: fmt.Errorf("expected a %s value in column %d, got a row of %d fields with none there",
			p.column, p.time+1, len(p.fields))}
	}
	v := p.fields[p.time]
	var t time.Duration
	var err error
	switch p.kind {
	case logtime.StampSeconds:
		t, err = logtime.ParseSeconds(v)
	case logtime.StampMillis:
		t, err = logtime.ParseMillis(v)
	default:
		if t, err = p.stamps.Read(v, line); err == nil && len(l.Times) == 0 {
			l.Format = p.format()
		}
	}
	if err != nil {
		return &fileline.Error{Line: line, Err: fmt.Errorf("%s: %w", p.column, err)}
	}
	if p.lag >= 0 && p.lag < len(p.fields) && p.fields[p.lag] != "" {
		lag, err := decimal.Parse(p.fields[p.lag], 6)
		if err != nil || lag < 0 {
			return &fileline.Error{Line: line, Err: fmt.Errorf("lag_ms: expected a lag in milliseconds (such as 2.5), got %q", fileline.Excerpt(p.fields[p.lag]))}
		}
		l.Lags = append(l.Lags, float64(lag)/1e6)
	}
	client := ""
	if p.client >= 0 && p.client < len(p.fields) {
		client = strings.Clone(p.fields[p.client])
	}
	if p.message >= 0 || p.event >= 0 {
		return p.classify(ps, line, t, client, record)
	}
	if err := ps.rec.count(line); err != nil {
		return err
	}
	l.add(t, line, client, p.client >= 0)
	if p.outcome >= 0 {
		refused := p.outcome < len(p.fields) && !strings.EqualFold(p.fields[p.outcome], "accepted")
		l.Refused = append(l.Refused, refused)
	}
	return nil
}

// eventsRow reads a row of devicesim's own events.csv as every reader of
// the format does (attempt.DecodeRow): one meaning of its columns.
func (p *csvParser) eventsRow(ps *parser, line int) error {
	r, err := attempt.DecodeRow(p.fields, false)
	if err != nil {
		return &fileline.Error{Line: line, Err: err}
	}
	if err := ps.rec.count(line); err != nil {
		return err
	}
	l := ps.log
	if r.Lag >= 0 {
		l.Lags = append(l.Lags, float64(r.Lag)/float64(time.Millisecond))
	}
	l.add(r.T, line, strings.Clone(p.fields[2]), true)
	l.Refused = append(l.Refused, r.Outcome != fault.Accepted)
	return nil
}

func (p *csvParser) readHeader(ps *parser, line int, text []byte) error {
	l := ps.log
	p.header = csvrow.Split(string(text), p.delim, nil)
	col := func(names []string) int {
		for _, name := range names {
			for i, h := range p.header {
				if strings.EqualFold(h, name) {
					return i
				}
			}
		}
		return -1
	}
	p.time, p.kind = col(secondsColumns), logtime.StampSeconds
	if p.time < 0 {
		p.time, p.kind = col(millisColumns), logtime.StampMillis
	}
	if p.time < 0 {
		p.time, p.kind = col(stampColumns), logtime.StampUnknown
	}
	if p.time < 0 {
		return &fileline.Error{Line: line, Err: fmt.Errorf("a %s header needs a t_s, unix_ms or RFC 3339 time column (named %s); this one has: %s",
			strings.ToUpper(p.name), fileline.OneOf(stampColumns), fileline.Names(p.header))}
	}
	p.column = p.header[p.time]
	p.client, p.lag, p.outcome = col(clientColumns), col([]string{"lag_ms"}), col([]string{"outcome"})
	p.message, p.event = col(messageColumns), col(eventColumns)
	if p.message >= 0 || p.event >= 0 {
		ps.rec.dedupe = true
	}
	p.stamps.Clock = logtime.NewClock(ps.o.Location, ps.written, &ps.zone)
	p.events = p.name == "csv" && slices.Equal(p.header, attempt.Header)
	l.Format = p.format()
	return nil
}

// classify reads a row that says what it was: its message (a JSON event,
// or a broker's line) or its event column.
func (p *csvParser) classify(ps *parser, line int, t time.Duration, client string, record []byte) error {
	if p.message >= 0 && p.message < len(p.fields) {
		msg := []byte(p.fields[p.message])
		if p.j == nil {
			p.j = newJSONParser(ps)
		}
		if len(msg) > 0 && msg[0] == '{' {
			return p.j.line(ps, line, msg, t, record)
		}
		ev, err := p.j.r.Inner(msg, logtime.LineTimes{Env: t, EnvTimed: true})
		if err != nil {
			return &fileline.Error{Line: line, Err: err}
		}
		if !ev.Known {
			ps.log.Skipped++
			return nil
		}
		return ps.rec.record(ev.Said, ev.Times, line, record)
	}
	e := brokerline.Line{Kind: brokerline.KindConnect, Client: client}
	if p.event < len(p.fields) {
		if e.Kind = jsonevent.KeywordKind(p.fields[p.event]); e.Kind == brokerline.KindOther {
			e.Label = p.fields[p.event]
		}
	}
	return ps.rec.record(e, logtime.LineTimes{Own: t, OwnTimed: true, OwnDigits: 9}, line, record)
}

// format names the format taken: "csv (t_s)", "tsv (unix_ms)",
// "csv (rfc3339 column time)", "csv (column ts, Unix ms)", "events.csv".
func (p *csvParser) format() string {
	switch {
	case p.events:
		return "events.csv"
	case p.kind == logtime.StampSeconds || p.kind == logtime.StampMillis:
		return fmt.Sprintf("%s (%s)", p.name, strings.ToLower(p.column))
	case p.stamps.Kind == logtime.StampRFC3339:
		return fmt.Sprintf("%s (rfc3339 column %s)", p.name, p.column)
	case p.stamps.Kind != logtime.StampUnknown:
		return fmt.Sprintf("%s (column %s, %s)", p.name, p.column, p.stamps.Kind)
	}
	return fmt.Sprintf("%s (column %s)", p.name, p.column)
}
