package report

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/herdguard/herdguard/internal/attempt"
)

// eventLog takes a run's Fleet records. Without a writer, they go into
// memory for WriteFiles. When the run was given a writer, they go straight
// out as events.csv rows. A million-device run then holds none of them.
type eventLog struct {
	kept    []attempt.Record
	out     *attempt.Writer // nil: keep
	discard bool            // written to io.Discard: not even formatted
}

func newEventLog(w io.Writer, t0 time.Time, timeScale float64) *eventLog {
	l := &eventLog{discard: w == io.Discard}
	if w != nil && !l.discard {
		l.out = attempt.NewWriter(w, t0, timeScale)
	}
	return l
}

func (l *eventLog) add(r attempt.Record) {
	switch {
	case l.discard:
	case l.out == nil:
		l.kept = append(l.kept, r)
	default:
		l.out.Add(r)
	}
}

// flush writes what is buffered and returns the first write error.
func (l *eventLog) flush() error {
	if l.out == nil {
		return nil
	}
	return l.out.Flush()
}

// writeEvents writes kept records as events.csv at path.
func writeEvents(path string, records []attempt.Record, t0 time.Time, timeScale float64) error {
	return writeFile(path, func(w io.Writer) error {
		cw := attempt.NewWriter(w, t0, timeScale)
		for _, r := range records {
			cw.Add(r)
		}
		return cw.Flush()
	})
}

// readEvents reads an events.csv back.
func readEvents(path string) ([]attempt.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	records, err := attempt.ReadCSV(f)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return records, nil
}

// eventsPath is where a report's events.csv goes in dir.
func eventsPath(dir string) string { return filepath.Join(dir, "events.csv") }
