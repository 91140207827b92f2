package arrivallog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/arrivallog/textline"
	"github.com/herdguard/herdguard/internal/csvrow"
	"github.com/herdguard/herdguard/internal/decimal"
	"github.com/herdguard/herdguard/internal/fileline"
)

// Detection reads at most this much of a log before it decides. A
// broker's log may open with hundreds of boot lines before its first
// connect. The first detectLines decide where one of them is. An envelope
// that fits none of the first envelopeTrial lines is not tried further.
const (
	sampleLines   = 5000
	sampleBytes   = 8 << 20
	detectLines   = 1000
	envelopeTrial = 200
)

// parser reads one log.
type parser struct {
	lp      lineParser     // the format taken
	pclock  *logtime.Clock // -pattern's times
	o       Options
	log     *Log
	rec     *recorder
	layout  *logtime.Layout
	pattern *pattern
	written time.Time
	zone    logtime.ZoneNote // the zone of the first stamp read
}

func newParser(o Options) (*parser, error) {
	p := &parser{o: o, log: &Log{}, written: o.Written}
	if p.written.IsZero() {
		p.written = time.Now()
	}
	forced := ""
	if brokerFormats[o.Format] {
		forced = o.Format
	}
	p.rec = newRecorder(p.log, forced, cmp.Or(o.maxEvents, MaxEvents))
	if o.TimeLayout != "" {
		l, err := logtime.ParseLayout(o.TimeLayout)
		if err != nil {
			return nil, err
		}
		p.layout = l
	}
	if o.Pattern != "" {
		pt, err := newPattern(o.Pattern)
		if err != nil {
			return nil, err
		}
		p.pattern = pt
	}
	return p, nil
}

// brokerFormats are the formats that name whose lines to read: every
// other broker's are skipped.
var brokerFormats = map[string]bool{"mosquitto": true, "rabbitmq": true, "emqx": true, "hivemq": true, "vernemq": true,
	"aws-iot": true, "azure-iot": true}

// namer names the format a lineParser took, once it has read the log.
type namer interface {
	name(p *parser) string
}

// lineParser reads one format's lines: each line that is neither blank nor
// a # comment, in order, the first included.
type lineParser interface {
	// parse reads text, line src.n; a CSV record spanning lines reads the
	// rest from src.
	parse(p *parser, src *source, text []byte) error
}

// source gives a log's lines: those detection read first, then the rest.
type source struct {
	lr     *lineReader
	sample []sampleLine
	i      int
	n      int // the last line given
}

type sampleLine struct {
	n    int
	text []byte
}

// fill reads the sample.
func (s *source) fill() {
	size := 0
	for len(s.sample) < sampleLines && size < sampleBytes {
		line, ok := s.lr.next()
		if !ok {
			return
		}
		s.sample = append(s.sample, sampleLine{s.lr.n, bytes.Clone(line)})
		size += len(line)
	}
}

// next gives the next line, whatever it holds.
func (s *source) next() ([]byte, bool) {
	if s.i < len(s.sample) {
		l := s.sample[s.i]
		s.i++
		s.n = l.n
		return l.text, true
	}
	line, ok := s.lr.next()
	s.n = s.lr.n
	return line, ok
}

// err is what stopped the reader, other than the end.
func (s *source) err() error { return s.lr.err }

// content gives the next line that is neither blank nor a # comment,
// counting those it passes in l.Skipped.
func (s *source) content(l *Log) ([]byte, bool) {
	for {
		line, ok := s.next()
		if !ok {
			return nil, false
		}
		if !fileline.Blank(line) {
			return line, true
		}
		l.Skipped++
	}
}

// rest is the whole log again, from its first line, for a reader that
// takes bytes rather than lines (a JSON document), and the line each of
// its offsets starts.
func (s *source) rest() io.Reader {
	var b bytes.Buffer
	for _, l := range s.sample {
		b.Write(l.text)
		b.WriteByte('\n')
	}
	return io.MultiReader(&b, s.lr.br)
}

func (p *parser) run(lr *lineReader) (*Log, error) {
	src := &source{lr: lr}
	src.fill()
	if src.err() != nil && len(src.sample) == 0 {
		return nil, src.err()
	}
	first := slices.IndexFunc(src.sample, func(l sampleLine) bool { return !fileline.Blank(l.text) })
	if first < 0 {
		if src.err() != nil {
			return nil, src.err()
		}
		p.log.Skipped = len(src.sample)
		if len(src.sample) == 0 {
			return nil, fmt.Errorf("%w: the log is empty", ErrNoArrivals)
		}
		return nil, fmt.Errorf("%w: %s, all blank or # comments", ErrNoArrivals, plural(len(src.sample), "line"))
	}
	lp, doc, err := p.detect(src, first)
	if err != nil {
		return nil, err
	}
	p.lp = lp
	if doc {
		if src.n, err = p.readDocument(src.rest()); err != nil {
			return nil, err
		}
	} else {
		for text, ok := src.content(p.log); ok; text, ok = src.content(p.log) {
			if err := lp.parse(p, src, text); err != nil {
				return nil, err
			}
		}
		if src.err() != nil {
			return nil, src.err()
		}
	}
	return p.finish(src.n)
}

// finish completes the log once every line is read.
func (p *parser) finish(lines int) (*Log, error) {
	l := p.log
	taken := p.rec.finish()
	if n, ok := p.lp.(namer); ok {
		l.Format = n.name(p)
	}
	if taken {
		l.Format += "; the envelope's finer stamps taken"
	}
	if len(l.Times) == 0 {
		return nil, p.noArrivals(lines)
	}
	l.Zone = p.zone.Loc
	return l, nil
}

// detect chooses how to read the log from its first lines. The log may be
// a JSON document or JSON lines, plain times, a CSV or TSV header, or a
// broker's text log in one of the envelopes.
func (p *parser) detect(src *source, first int) (lp lineParser, doc bool, err error) {
	fl := src.sample[first]
	t := bytes.TrimSpace(fl.text)
	f := p.o.Format
	switch {
	case p.pattern != nil:
		return p.pattern, false, nil
	case f == "jsonl" || f == "aws-iot" || f == "azure-iot" || f == "" && (t[0] == '{' || t[0] == '['):
		if t[0] != '{' && t[0] != '[' {
			return nil, false, &fileline.Error{Line: fl.n, Err: fmt.Errorf("expected a JSON object (JSON lines: one a line), got %q", fileline.Excerpt(t))}
		}
		if !json.Valid(t) {
			return nil, true, nil // a document over many lines
		}
		return newJSONParser(p), false, nil
	case f == "seconds":
		return &plainParser{}, false, nil
	case f == "unix-ms":
		return &plainParser{millis: true}, false, nil
	case f == "csv":
		return &csvParser{name: "csv", delim: ','}, false, nil
	case f == "tsv":
		return &csvParser{name: "tsv", delim: '\t'}, false, nil
	}
	if f == "" {
		if _, err := decimal.Parse(t, 0); err == nil || errors.Is(err, decimal.ErrTooFar) {
			if logtime.IsUnixMillis(t) {
				return &plainParser{millis: true}, false, nil
			}
			return &plainParser{}, false, nil
		}
		if name, ok := csvHeader(t); ok {
			return &csvParser{name: name, delim: map[string]byte{"csv": ',', "tsv": '\t'}[name]}, false, nil
		}
	}
	tr, found := p.detectText(src)
	if found || f != "" {
		return tr, false, nil
	}
	if bytes.IndexByte(t, '\t') >= 0 {
		return &csvParser{name: "tsv", delim: '\t'}, false, nil
	}
	if bytes.IndexByte(t, ',') >= 0 {
		return &csvParser{name: "csv", delim: ','}, false, nil
	}
	return nil, false, &fileline.Error{Line: fl.n, Err: fmt.Errorf("cannot tell the format from the first lines (the first: %q): expected a broker's log "+
		"(mosquitto, RabbitMQ, EMQX, HiveMQ, VerneMQ; as written, or under syslog, journalctl, docker or kubectl), JSON lines or a "+
		"JSON document (AWS IoT Core or Azure IoT Hub events, a JSON log), a CSV or TSV header naming t_s, unix_ms or a time column, "+
		"or one time a line (seconds such as 12.25, or Unix ms such as 1700000000123); the formats: %s; any other log: -pattern",
		fileline.Excerpt(t), strings.Join(FormatNames, ", "))}
}

// csvHeader recognises a CSV or TSV header: a row naming a time column.
func csvHeader(t []byte) (string, bool) {
	for _, d := range []struct {
		name  string
		delim byte
	}{{"tsv", '\t'}, {"csv", ','}} {
		if bytes.IndexByte(t, d.delim) < 0 && !(d.name == "csv" && bytes.IndexByte(t, '\t') < 0) {
			continue
		}
		for _, h := range csvrow.Split(string(t), d.delim, nil) {
			name := strings.ToLower(h)
			if slices.Contains(secondsColumns, name) || slices.Contains(millisColumns, name) || slices.Contains(stampColumns, name) {
				return d.name, true
			}
		}
	}
	return "", false
}

// detectText finds the envelope under which the most sample lines are
// lines a broker here writes. Connects, session ends, starts and stops
// count first, then any line it knows. It returns false when none are.
func (p *parser) detectText(src *source) (*textParser, bool) {
	// The first detectLines content lines decide, unless none of them is a
	// broker's event: then the whole sample.
	best, score := p.bestEnvelope(src, detectLines)
	if score[0] == 0 {
		best, score = p.bestEnvelope(src, sampleLines)
	}
	return newTextParser(p, best), score[1] > 0
}

// bestEnvelope scores each envelope on the first most content lines of
// the sample. It scores first by the broker's events it reads, then by the
// lines of a broker it knows, then by the lines of its shape.
func (p *parser) bestEnvelope(src *source, most int) (textline.Envelope, [3]int) {
	best, bestScore := textline.None, [3]int{}
	var j *jsonParser // a JSON message inside an envelope (a CloudWatch Logs export)
	for _, env := range textline.Envelopes {
		r := textline.NewReader(env, p.layout, p.o.Location, p.written, nil) // a trial: its zone is no one's
		var score [3]int
		tried := 0
		for _, l := range src.sample {
			if fileline.Blank(l.text) {
				continue
			}
			if tried++; tried > most || tried > envelopeTrial && score[2] == 0 {
				break // enough, or not one line in this envelope
			}
			tl := r.Read(l.text)
			if !tl.Fits {
				continue
			}
			score[2]++
			if tl.JSON {
				if j == nil {
					j = newJSONParser(p)
				}
				var obj map[string]json.RawMessage
				if json.Unmarshal(tl.Msg, &obj) == nil && obj != nil {
					if ev, err := j.r.Classify(l.n, obj, tl.EnvAt, true); err == nil && ev.Known {
						score[1]++
						if ev.Said.Kind != brokerline.KindOther {
							score[0]++
						}
					}
				}
				continue
			}
			if !tl.Known || p.rec.forced != "" && tl.Said.Broker != p.rec.forced {
				continue
			}
			score[1]++
			if tl.Said.Kind != brokerline.KindOther && (tl.Timed || tl.EnvTimed) {
				score[0]++
			}
		}
		if score[0] > bestScore[0] || score[0] == bestScore[0] && score[1] > bestScore[1] {
			best, bestScore = env, score
		}
	}
	return best, bestScore
}

// textParser reads a broker's text log in its envelope.
type textParser struct {
	r *textline.Reader
	j *jsonParser // a JSON message inside an envelope (a CloudWatch Logs export)
}

func newTextParser(p *parser, env textline.Envelope) *textParser {
	p.rec.dedupe = true
	return &textParser{r: textline.NewReader(env, p.layout, p.o.Location, p.written, &p.zone)}
}

func (t *textParser) parse(p *parser, src *source, text []byte) error {
	if textline.IsJournalMarker(text) {
		p.log.Skipped++
		return nil
	}
	tl := t.r.Read(text)
	if tl.JSON {
		if t.j == nil {
			t.j = newJSONParser(p)
		}
		return t.j.line(p, src.n, tl.Msg, tl.EnvAt, text)
	}
	if !tl.Known {
		p.log.Skipped++
		return nil
	}
	if tl.StampErr != nil && tl.Said.Kind == brokerline.KindConnect {
		return &fileline.Error{Line: src.n, Err: tl.StampErr}
	}
	if !tl.Timed && !tl.EnvTimed && tl.Said.Kind == brokerline.KindConnect {
		return &fileline.Error{Line: src.n, Err: fmt.Errorf("expected a time stamp before %q: judging needs the time of each connect "+
			"(mosquitto: log_timestamp true, its default)", fileline.Excerpt(tl.Msg))}
	}
	return p.rec.record(tl.Said, logtime.LineTimes{Own: tl.At, OwnTimed: tl.Timed, OwnDigits: tl.Digits,
		Env: tl.EnvAt, EnvTimed: tl.EnvTimed, EnvDigits: tl.Env.Stamp.Digits}, src.n, text)
}

// name names the format taken: the broker, the envelope, what the clock
// supplied.
func (t *textParser) name(p *parser) string {
	base := p.rec.mainBroker()
	if base == "" {
		base = "broker log"
	}
	if t.j != nil && t.j.r.Dialects() > 0 {
		base = strings.TrimSuffix(t.j.name(p), " (JSON lines)")
	}
	if base == "mosquitto" && t.r.Saw("ISO times") > 0 {
		base += " (ISO times)"
	}
	if c := t.r.Carrier(); c != "" {
		base += " under " + c
	}
	parts := []string{base}
	own, env := t.r.Assumed()
	assumed := []string{own}
	if p.rec.envOnly > 0 || p.rec.envTaken {
		assumed = append(assumed, env)
	}
	for _, a := range assumed {
		if a != "" && !slices.Contains(parts, a) {
			parts = append(parts, a)
		}
	}
	return strings.Join(parts, "; ")
}

// plain: one time a line, in seconds or in Unix milliseconds.
type plainParser struct{ millis bool }

func (pp *plainParser) parse(p *parser, src *source, text []byte) error {
	l := p.log
	var t time.Duration
	var err error
	if pp.millis {
		l.Format = "unix ms"
		t, err = logtime.ParseMillis(bytes.TrimSpace(text))
	} else {
		l.Format = "seconds"
		t, err = logtime.ParseSeconds(bytes.TrimSpace(text))
	}
	if err != nil {
		return &fileline.Error{Line: src.n, Err: err}
	}
	if err := p.rec.count(src.n); err != nil {
		return err
	}
	l.add(t, src.n, "", false)
	return nil
}

// noArrivals says what a log without arrivals held: the format taken and
// the kinds of lines seen.
func (p *parser) noArrivals(lines int) error {
	l := p.log
	if j, ok := p.lp.(*jsonParser); ok && j.r.Doc && len(l.Kinds) == 0 {
		return fmt.Errorf("%w: %s, a JSON document with no object in it", ErrNoArrivals, plural(lines, "line"))
	}
	switch {
	case lines == 0:
		return fmt.Errorf("%w: the log is empty", ErrNoArrivals)
	case l.Format == "" && len(l.Kinds) == 0 && p.pattern == nil && !brokerFormats[p.o.Format]:
		return fmt.Errorf("%w: %s, none a line of a broker this reader knows", ErrNoArrivals, plural(lines, "line"))
	case p.pattern != nil:
		return fmt.Errorf("%w: %s, none matching -pattern %q", ErrNoArrivals, plural(lines, "line"), p.pattern.text)
	case len(l.Kinds) > 0 || brokerFormats[p.o.Format]:
		format := l.Format
		if format == "" {
			format = p.o.Format
		}
		return fmt.Errorf("%w: %s, read as %s, and none a connect; %s%s", ErrNoArrivals, plural(lines, "line"), format,
			l.KindSummary(), noConnectHint(p.rec.mainBroker(), p.o.Format))
	}
	return fmt.Errorf("%w: %s with no row after its header", ErrNoArrivals, l.Format)
}

// noConnectHint says what a broker needs to log its connects.
func noConnectHint(broker, forced string) string {
	if broker == "" {
		broker = forced
	}
	switch broker {
	case "mosquitto":
		return ` (mosquitto logs connects with connection_messages true, its default, at log_type notice)`
	case "rabbitmq":
		return ` (RabbitMQ logs "accepting MQTT connection" at info, its default level)`
	case "emqx":
		return ` (EMQX logs a connect only at debug: log.file.level = debug, or a trace on the clients)`
	case "vernemq":
		return ` (VerneMQ logs no successful connect at any level: trace the clients with vmq-admin trace client, or log them from a plugin and read that with -pattern)`
	case "hivemq":
		return ` (HiveMQ writes connects to event.log, not hivemq.log)`
	}
	return ""
}

// KindSummary says how many lines of each kind the log held, the other
// kinds last: "6,335 connect, 812 disconnect, 12 refused, 2 broker start,
// 1,044 other (tcp accept 1,000, ...)".
func (l *Log) KindSummary() string {
	type kc struct {
		k Kind
		n int
	}
	var list []kc
	for k, n := range l.Kinds {
		list = append(list, kc{k, n})
	}
	slices.SortFunc(list, func(a, b kc) int { // as Kind orders them, the others last
		return int((a.k+brokerline.KindLost)%(brokerline.KindLost+1)) - int((b.k+brokerline.KindLost)%(brokerline.KindLost+1))
	})
	var parts []string
	for _, c := range list {
		s := fmt.Sprintf("%d %s", c.n, c.k)
		if c.k == brokerline.KindOther && len(l.Labels) > 0 {
			s += " (" + labelSummary(l.Labels) + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no line of a kind it knows"
	}
	return strings.Join(parts, ", ")
}

func labelSummary(labels map[string]int) string {
	type lc struct {
		l string
		n int
	}
	var list []lc
	for l, n := range labels {
		list = append(list, lc{l, n})
	}
	slices.SortFunc(list, func(a, b lc) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.l, b.l)
	})
	var parts []string
	for i, c := range list {
		if i == 4 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", c.l, c.n))
	}
	return strings.Join(parts, ", ")
}
