package arrivallog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

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
