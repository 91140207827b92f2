package fleetsim

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/herdguard/herdguard/fault"
)

// event is one attempt a device made: tens of millions in a large virtual
// run, so kept small (32 bytes) and, when the run streams its events,
// not kept at all.
type event struct {
	t       time.Duration // unscaled, since the disruption
	lag     time.Duration // unscaled: how late it left against its schedule; negative: unknown
	device  int32         // the fleet's index: client ID dev-<device>; -1 for a client ID not of that form
	code    int32         // CONNACK code, or HTTP status (config-outage)
	outcome fault.Outcome
}

// eventsHeader is events.csv's: one row an attempt a device made, t_s in
// unscaled seconds since the disruption, lag_ms (unscaled) empty where not
// known.
var eventsHeader = []string{"t_s", "unix_ms", "client_id", "outcome", "code", "lag_ms"}

// eventLog takes a run's events: into memory for WriteFiles, or, when the
// run was given a writer, straight out as events.csv rows (so that a
// million-device run holds none of them).
type eventLog struct {
	kept      []event
	out       *bufio.Writer // nil: keep
	discard   bool          // written to io.Discard: not even formatted
	t0        time.Time     // unix_ms = t0 + t / timeScale
	timeScale float64
	rows      int64
	row       []byte
	err       error
}

func newEventLog(w io.Writer, t0 time.Time, timeScale float64) *eventLog {
	l := &eventLog{t0: t0, timeScale: timeScale, discard: w == io.Discard}
	if w != nil && !l.discard {
		l.out = bufio.NewWriterSize(w, 1<<16)
		l.writeHeader()
	}
	return l
}

func (l *eventLog) writeHeader() {
	l.row = l.row[:0]
	for i, h := range eventsHeader {
		if i > 0 {
			l.row = append(l.row, ',')
		}
		l.row = append(l.row, h...)
	}
	_, l.err = l.out.Write(append(l.row, '\n'))
}

func (l *eventLog) add(e event) {
	l.rows++
	switch {
	case l.discard:
		return
	case l.out == nil:
		l.kept = append(l.kept, e)
		return
	}
	if l.err == nil {
		l.row = appendEventRow(l.row[:0], e, l.t0, l.timeScale)
		_, l.err = l.out.Write(l.row)
	}
}

// flush writes what is buffered and returns the first write error.
func (l *eventLog) flush() error {
	if l.out != nil && l.err == nil {
		l.err = l.out.Flush()
	}
	return l.err
}

// appendEventRow formats e as an events.csv row.
func appendEventRow(b []byte, e event, t0 time.Time, timeScale float64) []byte {
	b = strconv.AppendFloat(b, e.t.Seconds(), 'f', 4, 64)
	b = append(b, ',')
	b = strconv.AppendInt(b, t0.Add(time.Duration(float64(e.t)/timeScale)).UnixMilli(), 10)
	b = append(b, ',')
	b = appendClientID(b, e.device)
	b = append(b, ',')
	b = append(b, e.outcome.String()...)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.code), 10)
	b = append(b, ',')
	if e.lag >= 0 {
		b = strconv.AppendFloat(b, float64(e.lag)/float64(time.Millisecond), 'f', 3, 64)
	}
	return append(b, '\n')
}

func appendClientID(b []byte, device int32) []byte {
	if device < 0 {
		return append(b, '?')
	}
	return strconv.AppendInt(append(b, "dev-"...), int64(device), 10)
}

// writeEvents writes kept events as events.csv at path.
func writeEvents(path string, events []event, t0 time.Time, timeScale float64) error {
	return writeFile(path, func(w io.Writer) error {
		l := newEventLog(w, t0, timeScale)
		for _, e := range events {
			l.add(e)
		}
		return l.flush()
	})
}

// readEvents reads an events.csv back.
func readEvents(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReaderSize(f, 1<<16))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !slices.Equal(header, eventsHeader) {
		return nil, fmt.Errorf("%s: unexpected header %v", path, header)
	}
	var events []event
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		ts, err0 := strconv.ParseFloat(row[0], 64)
		code, err1 := strconv.ParseInt(row[4], 10, 32)
		o, ok := fault.ParseOutcome(row[3])
		if !ok {
			err1 = errors.Join(err1, fmt.Errorf("unknown outcome %q", row[3]))
		}
		lag := -1.0
		var err2 error
		if row[5] != "" {
			lag, err2 = strconv.ParseFloat(row[5], 64)
		}
		if err := errors.Join(err0, err1, err2); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		dev, _ := deviceIndex(row[2])
		events = append(events, event{t: time.Duration(ts * float64(time.Second)), lag: time.Duration(lag * float64(time.Millisecond)),
			device: int32(dev), code: int32(code), outcome: o})
	}
}

// deviceIndex is the fleet's index in a client ID of the form dev-<index>;
// -1 and false for any other.
func deviceIndex(clientID string) (int, bool) {
	if len(clientID) < 5 || clientID[:4] != "dev-" {
		return -1, false
	}
	i, err := strconv.Atoi(clientID[4:])
	if err != nil || i < 0 || i > 1<<31-1 {
		return -1, false
	}
	return i, true
}

// eventsPath is where a report's events.csv goes in dir.
func eventsPath(dir string) string { return filepath.Join(dir, "events.csv") }
