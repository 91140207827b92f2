package report

import (
	"io"
	"os"
	"time"

	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/datadir"
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

// eventsFile is a report's events.csv in its directory.
const eventsFile = "events.csv"

// writeEvents writes kept records as events.csv in dir.
func writeEvents(dir *os.File, records []attempt.Record, t0 time.Time, timeScale float64) error {
	return datadir.WriteShared(dir, eventsFile, 0o644, func(w io.Writer) error {
		cw := attempt.NewWriter(w, t0, timeScale)
		for _, r := range records {
			cw.Add(r)
		}
		return cw.Flush()
	})
}

// readEvents reads dir's events.csv back.
func readEvents(dir *os.File) ([]attempt.Record, error) {
	f, err := datadir.OpenSharedFile(dir, eventsFile, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	records, err := attempt.ReadCSV(f)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: f.Name(), Err: err}
	}
	return records, nil
}
