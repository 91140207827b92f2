package attempt

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/herdguard/herdguard/fault"
)

// Header is events.csv's: one row a Fleet record, t_s in unscaled seconds
// since the disruption, unix_ms the wall-clock instant, lag_ms (unscaled)
// empty where not known.
var Header = []string{"t_s", "unix_ms", "client_id", "outcome", "code", "lag_ms"}

// Writer writes Fleet records as events.csv rows, buffered. A run at
// TimeScale s anchored at T0 stamps unix_ms = T0 + T/s. Its zero value is
// not ready: use NewWriter. It is not safe for concurrent use.
type Writer struct {
	out       *bufio.Writer
	t0        time.Time
	timeScale float64
	row       []byte
	err       error
	rows      int64
}

// NewWriter writes the header to w and returns a Writer of its rows.
func NewWriter(w io.Writer, t0 time.Time, timeScale float64) *Writer {
	cw := &Writer{out: bufio.NewWriterSize(w, 1<<16), t0: t0, timeScale: timeScale}
	for i, h := range Header {
		if i > 0 {
			cw.row = append(cw.row, ',')
		}
		cw.row = append(cw.row, h...)
	}
	_, cw.err = cw.out.Write(append(cw.row, '\n'))
	return cw
}

// Add writes r's row; Broker records are no row of events.csv. The first
// error stops the writing and is kept for Flush.
func (w *Writer) Add(r Record) {
	if r.Side != Fleet || w.err != nil {
		return
	}
	w.row = AppendRow(w.row[:0], r, w.t0, w.timeScale)
	_, w.err = w.out.Write(w.row)
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
	b = strconv.AppendFloat(b, r.T.Seconds(), 'f', 4, 64)
	b = append(b, ',')
	b = strconv.AppendInt(b, t0.Add(time.Duration(float64(r.T)/timeScale)).UnixMilli(), 10)
	b = append(b, ',')
	b = AppendClientID(b, r.Device)
	b = append(b, ',')
	b = append(b, r.Outcome.String()...)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Code), 10)
	b = append(b, ',')
	if r.Lag >= 0 {
		b = strconv.AppendFloat(b, float64(r.Lag)/float64(time.Millisecond), 'f', 3, 64)
	}
	return append(b, '\n')
}

// ReadCSV reads events.csv rows back as Fleet records. An error names the
// line and what was wrong with it.
func ReadCSV(rd io.Reader) ([]Record, error) {
	cr := csv.NewReader(bufio.NewReaderSize(rd, 1<<16))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, err
	}
	if !slices.Equal(header, Header) {
		return nil, fmt.Errorf("line 1: header %v, want %v", header, Header)
	}
	var out []Record
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		ts, err0 := strconv.ParseFloat(row[0], 64)
		code, err1 := strconv.ParseInt(row[4], 10, 32)
		o, ok := fault.ParseOutcome(row[3])
		if !ok {
			err1 = errors.Join(err1, fmt.Errorf("unknown outcome %q", row[3]))
		}
		lag := time.Duration(-1) // unknown
		var err2 error
		if row[5] != "" {
			var ms float64
			ms, err2 = strconv.ParseFloat(row[5], 64)
			lag = time.Duration(math.Round(ms * float64(time.Millisecond)))
		}
		if err := errors.Join(err0, err1, err2); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		dev, _ := DeviceIndex(row[2])
		out = append(out, Record{T: time.Duration(math.Round(ts * float64(time.Second))), Lag: lag,
			Device: int32(dev), Code: int32(code), Outcome: o})
	}
}
