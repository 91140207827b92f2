package attempt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/csvrow"
	"github.com/herdguard/herdguard/internal/decimal"
	"github.com/herdguard/herdguard/internal/fileline"
)

// Header is events.csv's: one row a Fleet record, t_s in unscaled seconds
// since the disruption, unix_ms the wall-clock instant, lag_ms (unscaled)
// empty where not known.
var Header = []string{"t_s", "unix_ms", "client_id", "outcome", "code", "lag_ms"}

// StreamHeader is a live stream's: events.csv's columns and the record's
// kind, t_s since the Unix epoch and every time to the nanosecond.
var StreamHeader = append(slices.Clip(Header), "kind")

// Writer writes Fleet records as rows: events.csv's (NewWriter), or a live
// stream's (NewStreamWriter). Its zero value is not ready: use either. It
// is not safe for concurrent use.
type Writer struct {
	out       *bufio.Writer
	t0        time.Time
	timeScale float64
	stream    bool // every Kind, to the nanosecond, each row written through
	row       []byte
	err       error
	rows      int64
}

// NewWriter writes events.csv's header to w and returns a Writer of its
// rows, buffered: a run at time scale timeScale anchored at t0 stamps
// unix_ms = t0 + T/timeScale.
func NewWriter(w io.Writer, t0 time.Time, timeScale float64) *Writer {
	return newWriter(w, 1<<16, Header, t0, timeScale, false)
}

// NewStreamWriter writes a live stream's header to w and returns a Writer
// of its rows. The rows hold every Kind, with T the instant since the
// Unix epoch. Times are to the nanosecond, so the reader gets the very
// instants back. Each row is handed to w as it is added, so that the
// reader hears of it at once.
func NewStreamWriter(w io.Writer) *Writer {
	return newWriter(w, 512, StreamHeader, time.Unix(0, 0), 1, true)
}

func newWriter(w io.Writer, size int, header []string, t0 time.Time, timeScale float64, stream bool) *Writer {
	cw := &Writer{out: bufio.NewWriterSize(w, size), t0: t0, timeScale: timeScale, stream: stream}
	for i, h := range header {
		if i > 0 {
			cw.row = append(cw.row, ',')
		}
		cw.row = append(cw.row, h...)
	}
	_, cw.err = cw.out.Write(append(cw.row, '\n'))
	if stream && cw.err == nil {
		cw.err = cw.out.Flush()
	}
	return cw
}

// Add writes r's row; Broker records are no row, and events.csv has a row
// for Attempts alone. The first error stops the writing and is kept for
// Flush.
func (w *Writer) Add(r Record) {
	if r.Seen != Fleet || w.err != nil || (!w.stream && r.Kind != Attempt) {
		return
	}
	if w.stream {
		w.row = appendStreamRow(w.row[:0], r)
	} else {
		w.row = AppendRow(w.row[:0], r, w.t0, w.timeScale)
	}
	_, w.err = w.out.Write(w.row)
	if w.stream && w.err == nil {
		w.err = w.out.Flush()
	}
	w.rows++
}

// Flush writes what is buffered and returns the first error.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.out.Flush()
	}
	return w.err
}

// AppendRow appends r's events.csv row, newline included, to b.
func AppendRow(b []byte, r Record, t0 time.Time, timeScale float64) []byte {
	b = appendSeconds4(b, r.T)
	b = append(b, ',')
	b = appendWhoAndHow(b, r, t0.Add(time.Duration(float64(r.T)/timeScale)))
	if r.Lag >= 0 {
		b = strconv.AppendFloat(b, float64(r.Lag)/float64(time.Millisecond), 'f', 3, 64)
	}
	return append(b, '\n')
}

// appendWhoAndHow appends the columns after t_s up to lag_ms, which every
// row writes alike: the instant in whole milliseconds, the client ID, the
// outcome and the code.
func appendWhoAndHow(b []byte, r Record, at time.Time) []byte {
	b = strconv.AppendInt(b, at.UnixMilli(), 10)
	b = append(b, ',')
	b = AppendClientID(b, r.Device)
	b = append(b, ',')
	b = append(b, r.Outcome.String()...)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Code), 10)
	return append(b, ',')
}

// appendStreamRow appends r's row of a live stream: its times exact.
func appendStreamRow(b []byte, r Record) []byte {
	b = decimal.Append(b, int64(r.T), 9)
	b = append(b, ',')
	b = appendWhoAndHow(b, r, time.Unix(0, int64(r.T)))
	if r.Lag >= 0 {
		b = decimal.Append(b, int64(r.Lag), 6)
	}
	b = append(b, ',')
	b = append(b, r.Kind.String()...)
	return append(b, '\n')
}

// appendSeconds4 appends t in seconds to four places, digit for digit as
// strconv.AppendFloat(b, t.Seconds(), 'f', 4, 64) does, but from integers.
// That call was a sixth of the work of writing a million-device events.csv.
// Below 2^45 ns (9.7 hours) t.Seconds() is within 0.004 ns of t. The two
// thus round alike, except where t is within a nanosecond of halfway
// between two places. There, and beyond, it is that call.
func appendSeconds4(b []byte, t time.Duration) []byte {
	const place = 100 * time.Microsecond
	if half := t%place - place/2; t < 0 || t >= 1<<45 || half >= -1 && half <= 1 {
		return strconv.AppendFloat(b, t.Seconds(), 'f', 4, 64)
	}
	return decimal.Append(b, int64((t+place/2)/place), 4) // in places, rounded
}

// Reader reads records back from events.csv or a live stream, a row at a
// time, as they arrive. Its zero value is not ready: use NewReader. It is
// not safe for concurrent use.
type Reader struct {
	rows   *csvrow.Reader
	stream bool
}

// maxRow bounds a row: devicesim's are under 100 bytes, and a file with
// no line ends must not grow the reader without limit.
const maxRow = 1 << 16

// NewReader reads the header from rd, events.csv's or a stream's, and
// returns a Reader of the rows after it. Rows are split as csvrow splits
// them for the judge too; blank lines and # comments are no rows.
func NewReader(rd io.Reader) (*Reader, error) {
	rows := csvrow.NewReader(rd, ',', maxRow)
	header, err := rows.Read()
	if err != nil {
		return nil, err
	}
	r := &Reader{rows: rows, stream: slices.Equal(header, StreamHeader)}
	if !r.stream && !slices.Equal(header, Header) {
		return nil, &fileline.Error{Line: rows.Line(), Err: fmt.Errorf("header %v, want %v (or a stream's, with kind)", header, Header)}
	}
	return r, nil
}

// Read returns the next row's record, and io.EOF after the last. An error
// names the line and what was wrong with it; a row over 64 KiB is one that
// wraps csvrow.ErrTooLong.
func (r *Reader) Read() (Record, error) {
	row, err := r.rows.Read()
	if err != nil {
		return Record{}, err
	}
	rec, err := DecodeRow(row, r.stream)
	if err != nil {
		return Record{}, &fileline.Error{Line: r.rows.Line(), Err: err}
	}
	return rec, nil
}

// DecodeRow is the record of row, split from a line of events.csv or, if
// stream, of a live stream: what every reader of the format takes its
// columns to mean. Times are read exactly (t_s to the nanosecond, lag_ms
// to the nanosecond), finer digits rounded to the nearest, ties to even.
func DecodeRow(row []string, stream bool) (Record, error) {
	want := len(Header)
	if stream {
		want = len(StreamHeader)
	}
	if len(row) != want {
		return Record{}, fmt.Errorf("%d fields, want %d", len(row), want)
	}
	t, err0 := decimal.Parse(row[0], 9)
	if err0 != nil {
		err0 = fmt.Errorf("t_s %q: %w", row[0], err0)
	}
	code, err1 := strconv.ParseInt(row[4], 10, 32)
	o, ok := fault.ParseOutcome(row[3])
	if !ok {
		err1 = errors.Join(err1, fmt.Errorf("unknown outcome %q", row[3]))
	}
	lag := int64(-1) // unknown
	var err2 error
	if row[5] != "" {
		if lag, err2 = decimal.Parse(row[5], 6); err2 == nil && lag < 0 {
			err2 = errors.New("a negative lag")
		}
		if err2 != nil {
			err2 = fmt.Errorf("lag_ms %q: %w", row[5], err2)
		}
	}
	kind := Attempt
	if stream {
		if kind, ok = parseKind(row[6]); !ok {
			err2 = errors.Join(err2, fmt.Errorf("unknown kind %q", row[6]))
		}
	}
	if err := errors.Join(err0, err1, err2); err != nil {
		return Record{}, err
	}
	dev, _ := DeviceIndex(row[2])
	return Record{T: time.Duration(t), Lag: time.Duration(lag), Device: int32(dev), Code: int32(code), Outcome: o, Kind: kind}, nil
}

// ReadCSV reads events.csv rows (or a whole stream's) back as Fleet
// records. An error names the line and what was wrong with it.
func ReadCSV(rd io.Reader) ([]Record, error) {
	r, err := NewReader(rd)
	if err != nil {
		return nil, err
	}
	var out []Record
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
}
