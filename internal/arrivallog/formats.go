package arrivallog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// lineParser reads one format's lines: each line that is neither blank nor
// a # comment, in order, the first included.
type lineParser interface {
	// parse reads text, line lr.n; a CSV record spanning lines reads the
	// rest from lr.
	parse(l *Log, lr *lineReader, text []byte) error
}

func newLineParser(format string) lineParser {
	switch format {
	case "mosquitto":
		return &mosquittoParser{}
	case "jsonl":
		return &jsonParser{}
	case "csv":
		return &csvParser{name: "csv", delim: ','}
	case "tsv":
		return &csvParser{name: "tsv", delim: '\t'}
	case "unix-ms":
		return &plainParser{millis: true}
	}
	return &plainParser{}
}

// detectFormat names the format a log's first line (not blank, not a
// comment) shows.
func detectFormat(first []byte) (string, error) {
	t := bytes.TrimSpace(first)
	switch {
	case isMosquittoLine(t):
		return "mosquitto", nil
	case t[0] == '{':
		return "jsonl", nil
	case t[0] == '[':
		return "", errors.New("a JSON array; expected JSON lines, one object a line (jq -c '.[]' turns one into the other)")
	}
	if _, err := parseDecimal(t, 0); err == nil || errors.Is(err, errTooFar) {
		if isUnixMillis(t) {
			return "unix-ms", nil
		}
		return "seconds", nil
	}
	if bytes.IndexByte(t, '\t') >= 0 {
		return "tsv", nil
	}
	if bytes.IndexByte(t, ',') >= 0 {
		return "csv", nil
	}
	if name := strings.ToLower(strings.Trim(string(t), `"`)); slices.Contains(secondsColumns, name) ||
		slices.Contains(millisColumns, name) || slices.Contains(stampColumns, name) {
		return "csv", nil // a header of one column
	}
	return "", fmt.Errorf("cannot tell the format from the first line, %q: expected mosquitto's log (lines such as "+
		"\"1700000000: New client connected from ...\"), JSON lines ({\"ts\": ...}), a CSV or TSV header naming t_s, "+
		"unix_ms or a time column, or one time a line (seconds such as 12.25, or Unix ms such as 1700000000123); "+
		"the formats: %s", excerpt(t), strings.Join(FormatNames, ", "))
}

// Times are read exactly, from their decimal digits: "12.3" is 12.3 s to
// the nanosecond, where a float64 is 12.300000000000000711 s, and a tick
// found in the times would be found in the float's error instead.

// maxNanos bounds a time: 9e9 s, 285 years either side of 0, inside what
// a time.Duration holds.
const maxNanos = 9e18

var (
	errNotNumber = errors.New("not a decimal number")
	errTooFar    = errors.New("more than 285 years from 0")
)

// maxExponent bounds an exponent's magnitude: beyond it a number is 0 or
// too far whatever its digits (a line holds at most MaxLineBytes of them).
const maxExponent = 1 << 30

// parseDecimal reads s, a decimal number such as -12.25, 1700000000, .5 or
// 1.5e3 (no spaces, no Inf or NaN), as a whole number of 10^-scale units:
// exactly, rounding digits beyond the scale to the nearest unit, ties to
// even. A number that is not within maxNanos units is errTooFar; anything
// else, errNotNumber.
func parseDecimal[T string | []byte](s T, scale int) (int64, error) {
	d, ok := scanDecimal(s)
	if !ok {
		return 0, errNotNumber
	}
	// The digits at index < keep are whole units; the one at keep rounds.
	keep := int64(d.intDigits) + d.exp + int64(scale)
	v, err := roundDigits(s[d.mantissa:d.end], keep)
	if d.neg {
		v = -v
	}
	return v, err
}

// decimal is the parts of a decimal number scanDecimal found in its text.
type decimal struct {
	neg           bool
	mantissa, end int   // where its digits and point are, s[mantissa:end]
	intDigits     int   // how many digits come before the point
	exp           int64 // its exponent, within maxExponent either side of 0
}

// scanDecimal finds the parts of s, a decimal number; ok false when s is
// not one.
func scanDecimal[T string | []byte](s T) (d decimal, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	d.mantissa = i
	digits, point := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			if !point {
				d.intDigits++
			}
			continue
		case c == '.' && !point:
			point = true
			continue
		}
		break
	}
	d.end = i
	if digits == 0 {
		return d, false
	}
	if i == len(s) {
		return d, true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return d, false
	}
	d.exp, ok = parseExponent(s[i+1:])
	return d, ok
}

// parseExponent reads the digits after an e, with their sign, capped at
// maxExponent either side of 0; ok false unless s is all of them.
func parseExponent[T string | []byte](s T) (exp int64, ok bool) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		exp = min(exp*10+int64(c-'0'), maxExponent)
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

// roundDigits is the whole number of units that digits (and a point,
// skipped) make when those before index keep are whole units: the digit
// at keep rounds to the nearest, ties to even, those after it only break
// ties. Beyond maxNanos it is errTooFar.
func roundDigits[T string | []byte](digits T, keep int64) (int64, error) {
	var v, k int64
	round, sticky := byte(0), false
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c == '.' {
			continue
		}
		d := int64(c - '0')
		switch {
		case k < keep:
			if v > (maxNanos-d)/10 {
				return 0, errTooFar
			}
			v = v*10 + d
		case k == keep:
			round = byte(d)
		default:
			sticky = sticky || d != 0
		}
		k++
	}
	for ; k < keep && v != 0; k++ {
		if v > maxNanos/10 {
			return 0, errTooFar
		}
		v *= 10
	}
	if round > 5 || round == 5 && (sticky || v%2 == 1) {
		if v++; v > maxNanos {
			return 0, errTooFar
		}
	}
	return v, nil
}

// isUnixMillis reports whether a number is beyond 1e11 either side of 0:
// Unix milliseconds (since March 1973), where seconds would be 3,000 years.
func isUnixMillis[T string | []byte](s T) bool {
	v, err := parseDecimal(s, 0)
	return errors.Is(err, errTooFar) || v > 1e11 || v < -1e11
}

// What a time in each form looks like, for errors.
const (
	secondsExpected = "a time in seconds (such as 1700000000 or 12.25)"
	millisExpected  = "a time in Unix milliseconds (such as 1700000000123)"
	rfc3339Expected = "an RFC 3339 time (such as 2024-01-02T03:04:05.25Z)"
	stampExpected   = "a time: Unix seconds or milliseconds (such as 1700000000 or 1700000000123) or RFC 3339 (such as 2024-01-02T03:04:05.25Z)"
)

// parseSeconds reads a time in seconds, exactly.
func parseSeconds[T string | []byte](s T) (time.Duration, error) {
	v, err := parseDecimal(s, 9)
	return time.Duration(v), expected(secondsExpected, s, err)
}

// parseMillis reads a time in milliseconds, exactly.
func parseMillis[T string | []byte](s T) (time.Duration, error) {
	v, err := parseDecimal(s, 6)
	return time.Duration(v), expected(millisExpected, s, err)
}

// expected is the error for s, read as what, failing with err.
func expected[T string | []byte](what string, s T, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errTooFar):
		return fmt.Errorf("expected %s, got %q: %w", what, excerpt(s), errTooFar)
	}
	return fmt.Errorf("expected %s, got %q", what, excerpt(s))
}

// excerpt is as much of s as an error shows.
func excerpt[T string | []byte](s T) string {
	const most = 64
	if len(s) <= most {
		return string(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return string(s[:cut]) + "..."
}

// parseISOTime reads an RFC 3339 time (2024-01-02T03:04:05.25Z), also with
// a space for the T and, as mosquitto's ISO stamps, without a zone (then
// UTC), as the time since the Unix epoch.
func parseISOTime(s string) (time.Duration, error) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[13] != ':' {
		return 0, errNotNumber
	}
	if s[10] == ' ' || s[10] == 't' {
		s = s[:10] + "T" + s[11:]
	}
	if s[len(s)-1] == 'z' {
		s = s[:len(s)-1] + "Z"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if t, err = time.Parse("2006-01-02T15:04:05.999999999", s); err != nil {
			return 0, errNotNumber
		}
	}
	if sec := t.Unix(); sec > maxNanos/1e9 || sec < -maxNanos/1e9 {
		return 0, errTooFar
	}
	return time.Duration(t.Unix())*time.Second + time.Duration(t.Nanosecond()), nil
}

// stampKind is how a time column or field writes its times: found from its
// first value, the same for every other.
type stampKind int

const (
	stampUnknown stampKind = iota
	stampRFC3339
	stampSeconds
	stampMillis
)

func (k stampKind) String() string {
	switch k {
	case stampRFC3339:
		return "RFC 3339"
	case stampSeconds:
		return "seconds"
	case stampMillis:
		return "Unix ms"
	}
	return "unknown"
}

// stamps reads a column or field of times that may be numbers (Unix ms
// above 1e11, seconds otherwise) or RFC 3339 strings, all like the first.
type stamps struct {
	kind  stampKind
	first int // the line of the first
}

func (s *stamps) read(v string, line int) (time.Duration, error) {
	if s.kind == stampUnknown {
		switch _, err := parseDecimal(v, 0); {
		case err == nil || errors.Is(err, errTooFar):
			s.kind = stampSeconds
			if isUnixMillis(v) {
				s.kind = stampMillis
			}
		case len(v) >= 19 && v[4] == '-':
			s.kind = stampRFC3339
		default:
			return 0, fmt.Errorf("expected %s, got %q", stampExpected, excerpt(v))
		}
		s.first = line
	}
	var t time.Duration
	var err error
	switch s.kind {
	case stampSeconds:
		t, err = parseSeconds(v)
	case stampMillis:
		t, err = parseMillis(v)
	default:
		t, err = parseISOTime(v)
		err = expected(rfc3339Expected, v, err)
	}
	if err != nil && line != s.first {
		err = fmt.Errorf("%w (as on line %d)", err, s.first)
	}
	return t, err
}

// mosquitto: the log as mosquitto writes it by default (log_dest file or
// stderr, log_timestamp true):
//
//	1700000000: New connection from 127.0.0.1:57648 on port 1883.
//	1700000000: New client connected from 127.0.0.1:57648 as dev-1 (p2, c1, k30).
//	1700000000: New client connected from 127.0.0.1:57668 as dev-3 (p2, c1, k30, u'fleet').
//	1700000003: Client dev-1 closed its connection.
//
// A session is an arrival when mosquitto has accepted its CONNECT: the
// "New client connected" line, not "New connection" (a TCP connection,
// which may never send one). Bridges ("New bridge connected") are not the
// fleet's and are skipped with every other line.

const mosquittoArrival = "New client connected from "

type mosquittoParser struct{}

func (p *mosquittoParser) parse(l *Log, lr *lineReader, text []byte) error {
	if l.Format == "" {
		l.Format = "mosquitto"
	}
	stamp, msg, stamped := cutMosquittoStamp(bytes.TrimSpace(text))
	if !bytes.HasPrefix(msg, []byte(mosquittoArrival)) {
		l.Skipped++
		if stamped {
			p.other(l, lr.n, stamp, string(msg))
		}
		return nil
	}
	if !stamped {
		return &ParseError{Line: lr.n, Err: fmt.Errorf("expected mosquitto's time stamp (such as \"1700000000: \") before %q: "+
			"judging needs log_timestamp true, mosquitto's default", excerpt(msg))}
	}
	t, err := mosquittoTime(stamp)
	if err != nil {
		return &ParseError{Line: lr.n, Err: err}
	}
	if len(l.Times) == 0 && isISOStamp(stamp) {
		l.Format = "mosquitto (ISO times, read as UTC)"
	}
	l.add(t, lr.n, mosquittoClientID(string(msg[len(mosquittoArrival):])), true)
	return nil
}

// other keeps what a line that is not an arrival says about disruptions:
// the broker starting or stopping, or a client's session ending (Log.Disruptions). A
// stamp it cannot read leaves the line skipped and nothing more.
func (p *mosquittoParser) other(l *Log, n int, stamp []byte, msg string) {
	if strings.HasPrefix(msg, "mosquitto version ") {
		starts, stops := strings.HasSuffix(msg, " starting"), strings.HasSuffix(msg, " terminating")
		if t, err := mosquittoTime(stamp); err == nil && (starts || stops) {
			l.brokers = append(l.brokers, brokerLine{at: t, line: int32(n), stops: stops, text: msg})
		}
		return
	}
	if client, ok := mosquittoSessionEnd(msg); ok {
		if t, err := mosquittoTime(stamp); err == nil {
			l.ends = append(l.ends, sessionEnd{at: t, line: int32(n), client: client})
		}
	}
}

func isISOStamp(stamp []byte) bool { return len(stamp) == 19 && stamp[4] == '-' }

// mosquittoTime reads a stamp cutMosquittoStamp found.
func mosquittoTime(stamp []byte) (time.Duration, error) {
	if isISOStamp(stamp) {
		t, err := parseISOTime(string(stamp))
		return t, expected("mosquitto's ISO time stamp (such as 2024-01-02T03:04:05)", stamp, err)
	}
	return parseSeconds(stamp)
}

// cutMosquittoStamp splits a mosquitto line into its stamp, Unix seconds
// (1700000000) or ISO (2024-01-02T03:04:05), and its message; stamped false
// when it has none (msg is then all of it).
func cutMosquittoStamp(line []byte) (stamp, msg []byte, stamped bool) {
	i := bytes.Index(line, []byte(": "))
	if i <= 0 {
		return nil, line, false
	}
	stamp = line[:i]
	unix := true
	for _, c := range stamp {
		unix = unix && c >= '0' && c <= '9'
	}
	iso := len(stamp) == 19 && stamp[4] == '-' && stamp[7] == '-' && (stamp[10] == 'T' || stamp[10] == ' ') && stamp[13] == ':'
	if !unix && !iso {
		return nil, line, false
	}
	return stamp, line[i+2:], true
}

// isMosquittoLine recognises a line of mosquitto's log: stamped, or one of
// its first or its connection lines without a stamp.
func isMosquittoLine(line []byte) bool {
	if _, _, stamped := cutMosquittoStamp(line); stamped {
		return true
	}
	for _, p := range []string{"mosquitto version ", "New connection from ", mosquittoArrival} {
		if bytes.HasPrefix(line, []byte(p)) {
			return true
		}
	}
	return false
}

// mosquittoClientID finds the client ID in the end of an arrival line,
// "127.0.0.1:57648 as ID (p2, c1, k30).": the ID may hold spaces and
// parentheses itself, so it ends at the first " (" that the connection's
// flags follow. Without them (another version's line), all that follows
// " as " is the ID.
func mosquittoClientID(rest string) string {
	_, id, ok := strings.Cut(rest, " as ")
	if !ok {
		return ""
	}
	id = strings.TrimSuffix(id, ".")
	for i := 0; ; {
		j := strings.Index(id[i:], " (")
		if j < 0 {
			return id
		}
		j += i
		if isConnectFlags(id[j+2:]) {
			return id[:j]
		}
		i = j + 1
	}
}

// isConnectFlags recognises "p2, c1, k30)" and "p2, c1, k30, u'user')"
// (and 1.x's "c1, k30)").
func isConnectFlags(s string) bool {
	s, ok := strings.CutSuffix(s, ")")
	if !ok {
		return false
	}
	if i := strings.Index(s, ", u'"); i >= 0 && strings.HasSuffix(s, "'") {
		s = s[:i]
	}
	items := strings.Split(s, ", ")
	if len(items) == 2 {
		items = append([]string{"p0"}, items...)
	}
	if len(items) != 3 {
		return false
	}
	for k, item := range items {
		if len(item) < 2 || item[0] != "pck"[k] {
			return false
		}
		if _, err := strconv.ParseUint(item[1:], 10, 32); err != nil {
			return false
		}
	}
	return true
}

// JSON lines: one object a line, the time in the first field of
// jsonTimeFields that the first line has, the client in the first of
// jsonClientFields that a line has.
var (
	jsonTimeFields   = []string{"ts", "timestamp", "@timestamp", "time", "t"}
	jsonClientFields = []string{"clientid", "client_id", "clientId", "client"}
)

type jsonParser struct {
	field  string // the time field, from the first line
	stamps stamps
}

func (p *jsonParser) parse(l *Log, lr *lineReader, text []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(text, &obj); err != nil || obj == nil {
		return &ParseError{Line: lr.n, Err: fmt.Errorf("expected a JSON object (JSON lines: one a line), got %q", excerpt(bytes.TrimSpace(text)))}
	}
	if p.field == "" {
		for _, f := range jsonTimeFields {
			if _, ok := obj[f]; ok {
				p.field = f
				break
			}
		}
		if p.field == "" {
			return &ParseError{Line: lr.n, Err: fmt.Errorf("a JSON line needs a time field, one of %s; this one has: %s",
				orList(jsonTimeFields), listNames(slices.Sorted(maps.Keys(obj))))}
		}
	}
	raw, ok := obj[p.field]
	if !ok {
		return &ParseError{Line: lr.n, Err: fmt.Errorf("expected a time in field %q, as on line %d; this one has: %s",
			p.field, p.stamps.first, listNames(slices.Sorted(maps.Keys(obj))))}
	}
	v, ok := jsonScalar(raw)
	if !ok {
		return &ParseError{Line: lr.n, Err: fmt.Errorf("expected %s in field %q, got %s", stampExpected, p.field, excerpt([]byte(raw)))}
	}
	t, err := p.stamps.read(v, lr.n)
	if err != nil {
		return &ParseError{Line: lr.n, Err: fmt.Errorf("field %q: %w", p.field, err)}
	}
	if len(l.Times) == 0 {
		l.Format = fmt.Sprintf("jsonl (field %s, %s)", p.field, p.stamps.kind)
	}
	client, hasClient := "", false
	for _, f := range jsonClientFields {
		if raw, ok := obj[f]; ok {
			client, _ = jsonScalar(raw)
			hasClient = true
			break
		}
	}
	l.add(t, lr.n, client, hasClient)
	return nil
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

// CSV and TSV: a header, then one row an arrival. Quoting is as
// spreadsheets write it (RFC 4180, for tabs too): a field that starts with
// a quote ends at the next lone quote and may hold delimiters, "" and line
// ends; quotes within an unquoted field are kept as they are.
var (
	secondsColumns = []string{"t_s"}
	millisColumns  = []string{"unix_ms"}
	stampColumns   = []string{"time", "timestamp", "ts", "@timestamp"}
	clientColumns  = []string{"client_id", "clientid", "client", "device"}
)

type csvParser struct {
	name    string // csv or tsv
	delim   byte
	header  []string // nil until the first line is read
	time    int      // the time column
	column  string   // its name, as the header writes it
	kind    stampKind
	client  int // -1: none
	lag     int // -1: none
	outcome int // -1: none
	stamps  stamps
	events  bool // devicesim's events.csv
	fields  []string
	pending []byte // a record spanning lines
}

func (p *csvParser) parse(l *Log, lr *lineReader, text []byte) error {
	if p.header == nil {
		return p.readHeader(l, lr.n, text)
	}
	line, record := lr.n, text
	if csvQuoteOpen(text, p.delim, false) {
		p.pending = append(p.pending[:0], text...)
		for open := true; open; {
			next, ok := lr.next()
			switch {
			case !ok && lr.err != nil:
				return lr.err
			case !ok:
				return &ParseError{Line: line, Err: errors.New("a quoted field that starts on this line is never closed")}
			case len(p.pending)+1+len(next) > MaxLineBytes:
				return &ParseError{Line: line, Err: fmt.Errorf("a record %w", ErrLineTooLong)}
			}
			p.pending = append(append(p.pending, '\n'), next...)
			open = csvQuoteOpen(next, p.delim, true)
		}
		record = p.pending
	}
	p.fields = splitRecord(string(record), p.delim, p.fields[:0])
	if p.time >= len(p.fields) || p.fields[p.time] == "" {
		return &ParseError{Line: line, Err: fmt.Errorf("expected a %s value in column %d, got a row of %d fields with none there",
			p.column, p.time+1, len(p.fields))}
	}
	v := p.fields[p.time]
	var t time.Duration
	var err error
	switch p.kind {
	case stampSeconds:
		t, err = parseSeconds(v)
	case stampMillis:
		t, err = parseMillis(v)
	default:
		if t, err = p.stamps.read(v, line); err == nil && len(l.Times) == 0 {
			l.Format = p.format()
		}
	}
	if err != nil {
		return &ParseError{Line: line, Err: fmt.Errorf("%s: %w", p.column, err)}
	}
	if p.lag >= 0 && p.lag < len(p.fields) && p.fields[p.lag] != "" {
		lag, err := strconv.ParseFloat(p.fields[p.lag], 64)
		if err != nil || !(lag >= 0 && lag < 1e12) {
			return &ParseError{Line: line, Err: fmt.Errorf("lag_ms: expected a lag in milliseconds (such as 2.5), got %q", excerpt(p.fields[p.lag]))}
		}
		l.Lags = append(l.Lags, lag)
	}
	client := ""
	if p.client >= 0 && p.client < len(p.fields) {
		client = strings.Clone(p.fields[p.client])
	}
	l.add(t, line, client, p.client >= 0)
	if p.outcome >= 0 {
		refused := p.outcome < len(p.fields) && !strings.EqualFold(p.fields[p.outcome], "accepted")
		l.Refused = append(l.Refused, refused)
	}
	return nil
}

func (p *csvParser) readHeader(l *Log, line int, text []byte) error {
	p.header = splitRecord(string(text), p.delim, nil)
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
	p.time, p.kind = col(secondsColumns), stampSeconds
	if p.time < 0 {
		p.time, p.kind = col(millisColumns), stampMillis
	}
	if p.time < 0 {
		p.time, p.kind = col(stampColumns), stampUnknown
	}
	if p.time < 0 {
		return &ParseError{Line: line, Err: fmt.Errorf("a %s header needs a t_s, unix_ms or RFC 3339 time column (named %s); this one has: %s",
			strings.ToUpper(p.name), orList(stampColumns), listNames(p.header))}
	}
	p.column = p.header[p.time]
	p.client, p.lag, p.outcome = col(clientColumns), col([]string{"lag_ms"}), col([]string{"outcome"})
	p.events = p.kind == stampSeconds && p.lag >= 0 && p.name == "csv"
	l.Format = p.format()
	return nil
}

// format names the format taken: "csv (t_s)", "tsv (unix_ms)",
// "csv (rfc3339 column time)", "csv (column ts, Unix ms)", "events.csv".
func (p *csvParser) format() string {
	switch {
	case p.events:
		return "events.csv"
	case p.kind == stampSeconds || p.kind == stampMillis:
		return fmt.Sprintf("%s (%s)", p.name, strings.ToLower(p.column))
	case p.stamps.kind == stampRFC3339:
		return fmt.Sprintf("%s (rfc3339 column %s)", p.name, p.column)
	case p.stamps.kind != stampUnknown:
		return fmt.Sprintf("%s (column %s, %s)", p.name, p.column, p.stamps.kind)
	}
	return fmt.Sprintf("%s (column %s)", p.name, p.column)
}

// csvQuoteOpen reports whether a quoted field is still open at the end of
// line, given whether one was at its start.
func csvQuoteOpen(line []byte, delim byte, open bool) bool {
	start := !open // at a field's start
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case open && c == '"' && i+1 < len(line) && line[i+1] == '"':
			i++
		case open && c == '"':
			open = false
		case open:
		case c == delim:
			start = true
			continue
		case start && c == ' ':
			continue
		case start && c == '"':
			open = true
		}
		start = false
	}
	return open
}

// splitRecord appends the fields of a record to dst: unquoted fields
// without the spaces around them, quoted fields as quoted. A quoted field
// never closed runs to the end.
func splitRecord(rec string, delim byte, dst []string) []string {
	for {
		i := 0
		for i < len(rec) && rec[i] == ' ' {
			i++
		}
		if i < len(rec) && rec[i] == '"' {
			var b strings.Builder
			j := i + 1
			for j < len(rec) {
				k := strings.IndexByte(rec[j:], '"')
				if k < 0 {
					b.WriteString(rec[j:])
					j = len(rec)
					break
				}
				b.WriteString(rec[j : j+k])
				j += k + 1
				if j < len(rec) && rec[j] == '"' {
					b.WriteByte('"')
					j++
					continue
				}
				break
			}
			// What follows the closing quote, up to the delimiter, is kept.
			k := strings.IndexByte(rec[j:], delim)
			if k < 0 {
				k = len(rec) - j
			}
			b.WriteString(strings.TrimRight(rec[j:j+k], " "))
			dst = append(dst, b.String())
			if j+k == len(rec) {
				return dst
			}
			rec = rec[j+k+1:]
			continue
		}
		k := strings.IndexByte(rec, delim)
		if k < 0 {
			return append(dst, strings.TrimSpace(rec))
		}
		dst = append(dst, strings.TrimSpace(rec[:k]))
		rec = rec[k+1:]
	}
}

// listNames lists a header's or an object's names for an error, quoted
// where they hold what would confuse the list.
func listNames(names []string) string {
	const most = 20
	var out []string
	for _, n := range names[:min(len(names), most)] {
		if n == "" || strings.ContainsAny(n, ", \t\"\r\n") || !strconv.CanBackquote(n) {
			n = strconv.Quote(excerpt(n))
		}
		out = append(out, n)
	}
	if len(names) > most {
		out = append(out, fmt.Sprintf("and %d more", len(names)-most))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// plain: one time a line, in seconds or in Unix milliseconds.
type plainParser struct{ millis bool }

func (p *plainParser) parse(l *Log, lr *lineReader, text []byte) error {
	var t time.Duration
	var err error
	if p.millis {
		l.Format = "unix ms"
		t, err = parseMillis(bytes.TrimSpace(text))
	} else {
		l.Format = "seconds"
		t, err = parseSeconds(bytes.TrimSpace(text))
	}
	if err != nil {
		return &ParseError{Line: lr.n, Err: err}
	}
	l.add(t, lr.n, "", false)
	return nil
}
