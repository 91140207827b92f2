package jsonevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/herdguard/herdguard/internal/fileline"
)

// Walk reads a JSON document: objects, arrays of them, and objects that
// hold such arrays (events, records, Records, results, value, items), in
// any layout over lines. It calls event with each event object and the
// line it starts on. Arrays are read as they stream past, so that an
// export of millions of events is never held whole: a value, or an
// object's fields, past most bytes is an error wrapping tooLong. It
// returns the lines it read.
func Walk(r io.Reader, most int64, tooLong error, event func(line int, obj map[string]json.RawMessage) error) (int, error) {
	return newDocWalker(r, most, tooLong, event).walk()
}

func newDocWalker(r io.Reader, most int64, tooLong error, event func(line int, obj map[string]json.RawMessage) error) *docWalker {
	lc := &lineCounter{r: r, most: most, tooLong: tooLong}
	w := &docWalker{event: event, dec: json.NewDecoder(lc), lc: lc, most: most, tooLong: tooLong}
	lc.consumed = w.dec.InputOffset
	return w
}

// walk reads the document's values, and returns the lines it read.
func (w *docWalker) walk() (int, error) {
	for {
		tok, err := w.dec.Token()
		if err == io.EOF {
			return w.lc.lines(), nil
		}
		if err != nil {
			return 0, w.syntax(err)
		}
		if err := w.value(tok); err != nil {
			return 0, err
		}
	}
}

// MaxDepth bounds how deep a JSON document's arrays and objects nest
// around its events: a CloudWatch export's are three deep, a Logs
// Insights result's four. The walk goes a call deeper a level.
const MaxDepth = 64

// docWalker reads a JSON document's values.
type docWalker struct {
	event   func(line int, obj map[string]json.RawMessage) error
	dec     *json.Decoder
	lc      *lineCounter
	depth   int // the arrays and objects open
	most    int64
	tooLong error
}

// enter opens an array or an object, refusing one past MaxDepth.
func (w *docWalker) enter() error {
	if w.depth++; w.depth > MaxDepth {
		return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()),
			Err: fmt.Errorf("the JSON document nests deeper than %d arrays and objects; a log's events are a few levels in", MaxDepth)}
	}
	return nil
}

func (w *docWalker) leave() { w.depth-- }

// containerKeys hold the arrays of events a document wraps them in:
// CloudWatch Logs' events, Azure's records, Logs Insights' results.
var containerKeys = map[string]bool{"events": true, "records": true, "Records": true, "results": true, "value": true, "items": true}

func (w *docWalker) syntax(err error) error {
	if errors.Is(err, w.tooLong) {
		return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()), Err: fmt.Errorf("a JSON value %w", w.tooLong)}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()), Err: errors.New("the JSON document ends before its arrays and objects close")}
	}
	return &fileline.Error{Line: w.lc.line(w.dec.InputOffset()), Err: fmt.Errorf("expected a JSON document (or JSON lines): %v", err)}
}

// value reads the value that tok starts. An object is an event unless it
// holds arrays of them. An array's objects are events. They may instead be
// {"field": ..., "value": ...} pairs of one, as Logs Insights writes a row.
func (w *docWalker) value(tok json.Token) error {
	switch tok {
	case json.Delim('{'):
		line := w.lc.line(w.dec.InputOffset() - 1)
		obj, container, err := w.object()
		if err != nil || container {
			return err
		}
		return w.event(line, obj)
	case json.Delim('['):
		if err := w.enter(); err != nil {
			return err
		}
		defer w.leave()
		var row map[string]json.RawMessage
		rowLine := 0
		for w.dec.More() {
			w.lc.line(w.dec.InputOffset()) // no line before here is asked about again
			t, err := w.dec.Token()
			if err != nil {
				return w.syntax(err)
			}
			if t != json.Delim('{') {
				if err := w.value(t); err != nil {
					return err
				}
				continue
			}
			line := w.lc.line(w.dec.InputOffset() - 1)
			obj, container, err := w.object()
			if err != nil {
				return err
			}
			if container {
				continue
			}
			if f, ok := scalar(obj, "field"); ok && len(obj) == 2 && obj["value"] != nil {
				if row == nil {
					row, rowLine = map[string]json.RawMessage{}, line
				}
				row[f] = obj["value"]
				continue
			}
			if err := w.event(line, obj); err != nil {
				return err
			}
		}
		if _, err := w.dec.Token(); err != nil { // ]
			return w.syntax(err)
		}
		if row != nil {
			return w.event(rowLine, row)
		}
	}
	return nil // a scalar: nothing to count
}

// object reads an object's members after its {. container true: it held
// arrays of events, which were read.
func (w *docWalker) object() (map[string]json.RawMessage, bool, error) {
	if err := w.enter(); err != nil {
		return nil, false, err
	}
	defer w.leave()
	obj := map[string]json.RawMessage{}
	container, held := false, 0
	for w.dec.More() {
		w.lc.line(w.dec.InputOffset())
		kt, err := w.dec.Token()
		if err != nil {
			return nil, false, w.syntax(err)
		}
		key, _ := kt.(string)
		if !containerKeys[key] {
			var raw json.RawMessage
			if err := w.dec.Decode(&raw); err != nil {
				return nil, false, w.syntax(err)
			}
			obj[key] = raw
			if held += len(key) + len(raw); int64(held) > w.most { // an event's fields, as a line's
				line := w.lc.line(w.dec.InputOffset())
				return nil, false, &fileline.Error{Line: line, Err: fmt.Errorf("an object's fields %w", w.tooLong)}
			}
			continue
		}
		t, err := w.dec.Token()
		if err != nil {
			return nil, false, w.syntax(err)
		}
		switch t {
		case json.Delim('['):
			container = true
			if err := w.value(t); err != nil {
				return nil, false, err
			}
		case json.Delim('{'):
			inner, innerContainer, err := w.object()
			if err != nil {
				return nil, false, err
			}
			container = container || innerContainer
			raw, _ := json.Marshal(inner)
			obj[key] = raw
		default:
			raw, _ := json.Marshal(t)
			obj[key] = raw
		}
	}
	if _, err := w.dec.Token(); err != nil { // }
		return nil, false, w.syntax(err)
	}
	return obj, container, nil
}

// lineCounter counts the lines of what a JSON decoder reads, so that an
// offset it gives can be named by its line.
type lineCounter struct {
	r       io.Reader
	most    int64 // bytes held beyond consumed, at most
	tooLong error
	read    int64   // bytes read so far
	nl      []int64 // offsets of the newlines not yet asked about
	below   int     // newlines before the offsets in nl
	// consumed is the decoder's offset: what it holds beyond it, one
	// value being read, is bounded by most
	consumed func() int64
	last     byte // the last byte read
}

func (c *lineCounter) Read(b []byte) (int, error) {
	if c.consumed != nil {
		held := c.read - c.consumed()
		if held > c.most {
			return 0, c.tooLong
		}
		b = b[:min(int64(len(b)), c.most+1-held)] // past the bound by a byte at most
	}
	n, err := c.r.Read(b)
	for i, x := range b[:n] {
		if x == '\n' {
			c.nl = append(c.nl, c.read+int64(i))
		}
	}
	c.read += int64(n)
	if n > 0 {
		c.last = b[n-1]
	}
	return n, err
}

// lines is how many lines were read, once every byte is.
func (c *lineCounter) lines() int {
	n := c.below + len(c.nl)
	if c.last != '\n' {
		n++ // the last line, without its newline
	}
	return n
}

// line is the line (from 1) an offset is on; offsets asked about must
// not go back.
func (c *lineCounter) line(off int64) int {
	k := 0
	for k < len(c.nl) && c.nl[k] < off {
		k++
	}
	c.below += k
	c.nl = c.nl[k:]
	return c.below + 1
}
