// Package arrivallog reads the logs people have into arrival times for
// the judgement (internal/stormstats). It reads the logs of the brokers
// fleets run (mosquitto, RabbitMQ, EMQX, HiveMQ, VerneMQ). It reads them
// as they write them and as syslog, journald, docker and the kubelet
// carry them. It reads the connection events of AWS IoT Core and Azure
// IoT Hub. It reads JSON lines, CSV and TSV with a time column, and
// devicesim's events.csv. It reads plain columns of seconds or Unix
// milliseconds, and any other log through a pattern. The format is found
// from the lines themselves. Only connects are arrivals: every other line
// is counted by what it says. Times are read exactly from their digits.
// An error names the line and what was expected there.
//
// A log that holds several disruptions, judged as one series, reads as
// waves. Log.Recoveries judges each recovery on its own at times given;
// package disruption finds those times where the log shows them.
package arrivallog

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/brokerline"
	"github.com/herdguard/herdguard/internal/fileline"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// Log is an arrival log as read: one entry per arrival, in file order.
// ParseLog makes one; the zero value is an empty log. A Log is plain data:
// safe to read from several goroutines, not to change while they do.
type Log struct {
	// Format is the format taken, as a person would name it. Examples are
	// "mosquitto", "rabbitmq", "mosquitto under syslog (RFC 3164 stamps ...)",
	// "aws-iot lifecycle events (JSON lines)", "csv (t_s)", "events.csv",
	// "seconds", "unix ms" ...
	Format string
	// Times holds each arrival's time, to the nanosecond as written. For
	// the absolute formats (broker logs, Unix ms, RFC 3339) it is since the
	// Unix epoch. For relative ones (t_s, plain seconds) it is as written.
	Times []time.Duration
	// Zone is the zone the log wrote its times in: its first stamp's own
	// offset, or the zone taken for stamps that name none (Options.
	// Location); nil for Unix times and times since a start.
	Zone *time.Location
	// Lines holds the line each arrival came from (from 1; a CSV record
	// spanning lines, the first; an element of a JSON document, the line
	// it starts on).
	Lines []int32
	// Clients holds the client ID of each arrival where the format carries
	// one ("" where a line lacks it); nil when none does.
	Clients []string
	// Lags holds devicesim's lag_ms column (milliseconds), one value per
	// row that has one: not one per arrival (a refused dial has none).
	Lags []float64
	// Refused marks the arrivals the broker did not admit, where the log
	// says (devicesim's outcome column: anything but accepted); nil when
	// it does not, and every arrival counts as admitted.
	Refused []bool
	// Skipped counts the lines that were not arrivals and not a CSV
	// header: blank lines, # comments, every line of another kind.
	Skipped int
	// Kinds counts the lines of each kind other than a connect, and
	// Labels the lines of KindOther by what they were ("tcp accept",
	// "subscribe", "refusal reason" ...). Only the formats that say what
	// a line was fill them.
	Kinds  map[Kind]int
	Labels map[string]int
	// Duplicates counts the lines dropped as exact copies of one read
	// before: a log shipper's at-least-once delivery.
	Duplicates int
	// Lost lists the lines where the log says it lost lines of its own
	// (a logger in drop mode, a rate limit): its counts have holes there.
	Lost []Note
	// Gaps are the spans in which the log says its logger dropped every
	// line (OTP's drop mode, from its switch to drop mode to its switch
	// back). The log is judged with them taken out, so that a hole is not
	// read as the quiet between bursts.
	Gaps []Gap

	// BrokerLines are the broker's own start and stop lines, and
	// SessionEnds the lines saying a client's session ended, in file
	// order: what the log's other lines say of its disruptions.
	BrokerLines []BrokerLine
	SessionEnds []SessionEnd
}

// BrokerLine is a broker's start or stop line as the log recorded it: At
// on the clock of the Log's Times, Line its line number. It is a plain
// value.
type BrokerLine struct {
	At    time.Duration
	Line  int32
	Stops bool   // a stop ("mosquitto ... terminating"); false: a start
	Text  string // the line, cut short
}

// SessionEnd is a line saying a client's session ended, as BrokerLine
// places it. It is a plain value.
type SessionEnd struct {
	At     time.Duration
	Line   int32
	Client string
}

// Admitted reports whether arrival i was admitted: true unless the log
// says otherwise (devicesim's outcome column).
func (l *Log) Admitted(i int) bool { return l.Refused == nil || !l.Refused[i] }

// Gap is a span of the log's time in which it lost every line.
type Gap struct {
	From, To time.Duration
	Line     int // where it began
}

// Note is a line the summary points to.
type Note struct {
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Options says how ParseLog reads a log. The zero value detects the
// format and reads times without a zone as UTC.
type Options struct {
	// Format is one of FormatNames; "" detects it.
	Format string
	// Pattern, when set, is a regular expression (Go's syntax) that an
	// arrival's line matches, with a named group "time" and optionally
	// one named "client"; every other line is skipped.
	Pattern string
	// TimeLayout reads stamps this reader does not know by itself, in
	// strftime (%Y-%m-%d %H:%M:%S, as mosquitto's log_timestamp_format)
	// or Go's reference time (2006-01-02 15:04:05).
	TimeLayout string
	// Location is the zone of times written without one; nil is UTC.
	Location *time.Location
	// Written is when the log was written, as far as the caller knows
	// (the file's modification time). It gives the year of syslog's
	// stamps, which have none. It gives the day of stamps that are a time
	// of day alone. The zero value is now.
	Written time.Time

	maxEvents int // a test's cap in place of MaxEvents
}

// FormatNames are the formats ParseLog can be told to take:
//
//   - mosquitto: mosquitto's log, with its own stamp (Unix seconds or any
//     log_timestamp_format). It may come under syslog, journald or a
//     container runtime. Its "New client connected" lines are the arrivals.
//   - rabbitmq: RabbitMQ's log, text or JSON, with its MQTT plugin's
//     "accepting MQTT connection" (3.12 on: "Accepted MQTT connection").
//   - emqx: EMQX 5's log, text or JSON: at debug, the CONNACK each
//     client is sent.
//   - hivemq: HiveMQ's event.log (and hivemq.log's start and stop).
//   - vernemq: VerneMQ's console.log and its tracer's CONNACK lines.
//   - aws-iot: AWS IoT Core's lifecycle events (connected, disconnected)
//     and its CloudWatch logs (Connect, Disconnect), as JSON lines or a
//     CloudWatch Logs export.
//   - azure-iot: Azure IoT Hub's device connection events (Event Grid or
//     CloudEvents schema) and its Connections resource logs.
//   - jsonl: one JSON object a line, its time in ts, timestamp,
//     @timestamp, time or t, each an arrival unless it says otherwise.
//   - csv, tsv: a header naming t_s (seconds), unix_ms, or a column of
//     times (time, timestamp, ts or @timestamp).
//   - seconds: one time in seconds a line (12.25, 1700000000).
//   - unix-ms: one time in Unix milliseconds a line (1700000000123).
var FormatNames = []string{"mosquitto", "rabbitmq", "emqx", "hivemq", "vernemq", "aws-iot", "azure-iot", "jsonl", "csv", "tsv", "seconds", "unix-ms"}

// ErrNoArrivals is returned by ParseLog and ReadArrivals for a log with no
// arrival in it (wrapped, with the format taken and what the log held
// instead).
var ErrNoArrivals = errors.New("no arrivals")

// ErrUnknownFormat is returned by ParseLog for a format not in FormatNames.
var ErrUnknownFormat = errors.New("unknown format")

// ErrBadPattern is returned by ParseLog for an Options.Pattern that is
// not a regular expression with a "time" group.
var ErrBadPattern = errors.New("bad pattern")

// ErrLineTooLong is a *fileline.Error's Err for a line longer than
// MaxLineBytes: no arrival log has one.
var ErrLineTooLong = fmt.Errorf("longer than %d MiB", MaxLineBytes>>20)

// MaxLineBytes bounds a line (a CSV record spanning lines, all of them),
// and in a JSON document a value and an event's fields: far beyond any
// arrival log's, short of what exhausts memory.
const MaxLineBytes = 16 << 20

// ParseLog reads an arrival log as Options say: in o.Format, or in the
// format its first lines show. A broker's log may open with lines of
// every kind; detection reads past them. Everywhere a UTF-8 byte-order
// mark, CRLF line ends, blank lines and lines starting with # are fine.
// Times are read exactly from their digits, never through a float64:
// "12.3" is 12.3 s to the nanosecond. A time must lie within 285 years
// either side of 0.
//
// Only the lines that say a session was accepted are arrivals. The others
// are counted by kind (Log.Kinds). Those that end a session or stop the
// broker tell package disruption where the log's disruptions were. Exact
// copies of a line read before are dropped and counted.
//
// A line it cannot read is a *fileline.Error naming what was expected
// there; so is the line past MaxEvents (ErrTooManyEvents), and a JSON
// document nested past 64 levels. A log with no arrival is ErrNoArrivals,
// naming the format taken and what the log held instead. A format it does
// not know is ErrUnknownFormat. No Log is returned with an error.
func ParseLog(r io.Reader, o Options) (*Log, error) {
	if o.Format != "" && !isFormatName(o.Format) {
		return nil, fmt.Errorf("%w %q: want one of %s (or none, to detect it)", ErrUnknownFormat, o.Format, strings.Join(FormatNames, ", "))
	}
	p, err := newParser(o)
	if err != nil {
		return nil, err
	}
	return p.run(newLineReader(r))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func isFormatName(s string) bool { return slices.Contains(FormatNames, s) }

// lineReader reads a log's lines, of any length up to MaxLineBytes, and
// counts them.
type lineReader struct {
	br    *bufio.Reader // what follows the lines read, for a reader of bytes
	lines *fileline.Lines
	n     int   // the last line read, from 1
	err   error // what stopped it, other than the end
}

func newLineReader(r io.Reader) *lineReader {
	br := bufio.NewReaderSize(r, 1<<16)
	return &lineReader{br: br, lines: fileline.NewLines(br, MaxLineBytes, ErrLineTooLong)}
}

// next returns the next line without its line end ("\n" or "\r\n"; on the
// first line, without a UTF-8 byte-order mark) until the end or an error
// (in lr.err). The line is valid until the next call.
func (lr *lineReader) next() ([]byte, bool) {
	if lr.err != nil {
		return nil, false
	}
	line, err := lr.lines.Next()
	switch {
	case err == io.EOF:
		return nil, false
	case err == ErrLineTooLong:
		lr.err = &fileline.Error{Line: lr.n + 1, Err: err}
		return nil, false
	case err != nil:
		lr.err = err
		return nil, false
	case lr.n == math.MaxInt32:
		lr.err = &fileline.Error{Line: lr.n + 1, Err: errors.New("more lines than an arrival log can hold (2^31)")}
		return nil, false
	}
	if lr.n++; lr.n == 1 {
		if err := foreignEncoding(line); err != nil {
			lr.err = &fileline.Error{Line: 1, Err: err}
			return nil, false
		}
	}
	return line, true
}

// foreignEncoding recognises, on a first line, the files that are not
// text a line reader can read.
func foreignEncoding(line []byte) error {
	switch {
	case bytes.HasPrefix(line, []byte("\xff\xfe")), bytes.HasPrefix(line, []byte("\xfe\xff")):
		return errors.New("the file is UTF-16 text (as a spreadsheet's \"Unicode text\"); save it as UTF-8 (CSV UTF-8, say)")
	case bytes.HasPrefix(line, []byte("\x1f\x8b")):
		return errors.New("the file is gzip-compressed; decompress it first (zcat FILE | devicesim judge -)")
	}
	return nil
}

// add appends an arrival at t from line n, with its client ID where the
// format carries one (hasClient).
func (l *Log) add(t time.Duration, n int, client string, hasClient bool) {
	l.Times = append(l.Times, t)
	l.Lines = append(l.Lines, int32(n))
	switch {
	case hasClient && l.Clients == nil:
		l.Clients = make([]string, len(l.Times)-1, cap(l.Times))
		l.Clients = append(l.Clients, client)
	case l.Clients != nil:
		l.Clients = append(l.Clients, client)
	}
}

// ReadArrivals reads an arrival log in any format ParseLog detects into a
// stormstats.Histogram, with the method to judge it with (see
// Log.Histogram). It drops the stormstats.Preparation. A caller that
// judges a log someone wrote, whose stamps may sit on a coarse tick,
// should use ParseLog, Log.Histogram and the Preparation's Qualify. That
// is what devicesim judge does.
func ReadArrivals(r io.Reader) (*stormstats.Histogram, stormstats.Method, error) {
	return ReadArrivalsFormat(r, "")
}

// ReadArrivalsFormat is ReadArrivals for a log in format, one of
// FormatNames ("": detect it).
func ReadArrivalsFormat(r io.Reader, format string) (*stormstats.Histogram, stormstats.Method, error) {
	l, err := ParseLog(r, Options{Format: format})
	if err != nil {
		return nil, stormstats.Method{}, err
	}
	h, m, _ := l.Histogram()
	return h, m, nil
}

// Histogram prepares the log's arrivals for stormstats.Judge and returns
// the method to judge them with. The preparation is stormstats.Prepare's:
// lines far from the rest are set aside, and each arrival is placed within
// the tick its stamp sits on. The method is stormstats.DefaultMethod, with
// no burst narrower than the tick looked for. When the log has devicesim's
// lag_ms column, no burst narrower than twice its 99th percentile is
// looked for either, as a run does. l.Times is left as it was.
func (l *Log) Histogram() (*stormstats.Histogram, stormstats.Method, stormstats.Preparation) {
	return stormstats.Prepare(l.closeGaps(slices.Clone(l.Times)), l.Lines, l.method())
}

// closeGaps takes the log's gaps out of times: each time after a gap
// moves back by its length, one within it to its start. Times need not be
// sorted.
func (l *Log) closeGaps(times []time.Duration) []time.Duration {
	if len(l.Gaps) == 0 {
		return times
	}
	gaps := slices.Clone(l.Gaps)
	slices.SortFunc(gaps, func(a, b Gap) int { return cmp.Compare(a.From, b.From) })
	// Where gaps overlap, one.
	merged := gaps[:1]
	for _, g := range gaps[1:] {
		last := &merged[len(merged)-1]
		if g.From <= last.To {
			last.To = max(last.To, g.To)
			continue
		}
		merged = append(merged, g)
	}
	cut := make([]time.Duration, len(merged)+1) // the length of the gaps before each
	for i, g := range merged {
		cut[i+1] = cut[i] + g.To - g.From
	}
	for i, t := range times {
		k, _ := slices.BinarySearchFunc(merged, t, func(g Gap, t time.Duration) int { return cmp.Compare(g.From, t) })
		// merged[k-1] is the last gap starting before t
		switch {
		case k == 0:
		case t < merged[k-1].To:
			times[i] = merged[k-1].From - cut[k-1]
		default:
			times[i] = t - cut[k]
		}
	}
	return times
}

// method is stormstats.DefaultMethod, with devicesim's lag_ms column taken
// into account.
func (l *Log) method() stormstats.Method {
	m := stormstats.DefaultMethod
	if len(l.Lags) > 0 {
		m.MinWidth = time.Duration(2 * stormstats.Percentile(l.Lags, 99) * float64(time.Millisecond))
	}
	return m
}

// Kind is what a log line says happened (brokerline.Kind).
type Kind = brokerline.Kind

// The kinds a line is counted under.
const (
	KindOther      = brokerline.KindOther
	KindConnect    = brokerline.KindConnect
	KindDisconnect = brokerline.KindDisconnect
	KindRefused    = brokerline.KindRefused
	KindStart      = brokerline.KindStart
	KindStop       = brokerline.KindStop
	KindLost       = brokerline.KindLost
)
