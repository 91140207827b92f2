package arrivallog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/jsonevent"
	"github.com/herdguard/herdguard/internal/fileline"
)

// jsonParser reads JSON objects as JSON lines, inside a document, or as
// the message of a text envelope or a CSV row, and records what they say
// (jsonevent).
type jsonParser struct{ r *jsonevent.Reader }

func newJSONParser(p *parser) *jsonParser {
	p.rec.dedupe = true
	return &jsonParser{r: jsonevent.NewReader(p.layout, p.o.Location, p.written, &p.zone)}
}

// parse reads one line of JSON lines: an object, or an array of them.
func (j *jsonParser) parse(p *parser, src *source, text []byte) error {
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
func (j *jsonParser) line(p *parser, n int, msg []byte, env time.Duration, raw []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(msg, &obj); err != nil || obj == nil {
		p.log.Skipped++
		return nil
	}
	return j.object(p, n, obj, raw, env, true)
}

// object reads one object, whose envelope (if any) stamped it at env.
func (j *jsonParser) object(p *parser, n int, obj map[string]json.RawMessage, raw []byte, env time.Duration, envTimed bool) error {
	ev, err := j.r.Classify(n, obj, env, envTimed)
	if err != nil {
		return &fileline.Error{Line: n, Err: err}
	}
	if !ev.Known {
		p.log.Skipped++
		return nil
	}
	if raw == nil {
		raw = jsonevent.Canonical(obj)
	}
	return p.rec.record(ev.Said, ev.Times, n, raw)
}

// name names the format taken.
func (j *jsonParser) name(*parser) string { return j.r.Name() }

// readDocument reads a JSON document (jsonevent.Walk) and returns the
// lines it read.
func (p *parser) readDocument(r io.Reader) (int, error) {
	j := newJSONParser(p)
	j.r.Doc = true
	p.lp = j
	return jsonevent.Walk(r, MaxLineBytes, ErrLineTooLong, func(line int, obj map[string]json.RawMessage) error {
		return j.object(p, line, obj, nil, 0, false)
	})
}
