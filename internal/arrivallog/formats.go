package arrivallog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// lineParser reads one format's lines: each line that is neither blank nor
// a # comment, in order, the first included.
type lineParser interface {
	// parse reads text, line lr.n; a CSV record spanning lines reads the
	// rest from lr.
	parse(l *Log, lr *lineReader, text []byte) error
}

func newLineParser(format string) lineParser {
	switch format {
	case "mosquitto":
		return &mosquittoParser{}
	case "jsonl":
		return &jsonParser{}
	case "csv":
		return &csvParser{name: "csv", delim: ','}
	case "tsv":
		return &csvParser{name: "tsv", delim: '\t'}
	case "unix-ms":
		return &plainParser{millis: true}
	}
	return &plainParser{}
}

// detectFormat names the format a log's first line (not blank, not a
// comment) shows.
func detectFormat(first []byte) (string, error) {
	t := bytes.TrimSpace(first)
	switch {
	case isMosquittoLine(t):
		return "mosquitto", nil
	case t[0] == '{':
		return "jsonl", nil
	case t[0] == '[':
		return "", errors.New("a JSON array; expected JSON lines, one object a line (jq -c '.[]' turns one into the other)")
	}
	if _, err := parseDecimal(t, 0); err == nil || errors.Is(err, errTooFar) {
		if isUnixMillis(t) {
			return "unix-ms", nil
		}
		return "seconds", nil
	}
	if bytes.IndexByte(t, '\t') >= 0 {
		return "tsv", nil
	}
	if bytes.IndexByte(t, ',') >= 0 {
		return "csv", nil
	}
	if name := strings.ToLower(strings.Trim(string(t), `"`)); slices.Contains(secondsColumns, name) ||
		slices.Contains(millisColumns, name) || slices.Contains(stampColumns, name) {
		return "csv", nil // a header of one column
	}
	return "", fmt.Errorf("cannot tell the format from the first line, %q: expected mosquitto's log (lines such as "+
		"\"1700000000: New client connected from ...\"), JSON lines ({\"ts\": ...}), a CSV or TSV header naming t_s, "+
		"unix_ms or a time column, or one time a line (seconds such as 12.25, or Unix ms such as 1700000000123); "+
		"the formats: %s", excerpt(t), strings.Join(FormatNames, ", "))
}

// listNames lists a header's or an object's names for an error, quoted
// where they hold what would confuse the list.
func listNames(names []string) string {
	const most = 20
	var out []string
	for _, n := range names[:min(len(names), most)] {
		if n == "" || strings.ContainsAny(n, ", \t\"\r\n") || !strconv.CanBackquote(n) {
			n = strconv.Quote(excerpt(n))
		}
		out = append(out, n)
	}
	if len(names) > most {
		out = append(out, fmt.Sprintf("and %d more", len(names)-most))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// plain: one time a line, in seconds or in Unix milliseconds.
type plainParser struct{ millis bool }

func (p *plainParser) parse(l *Log, lr *lineReader, text []byte) error {
	var t time.Duration
	var err error
	if p.millis {
		l.Format = "unix ms"
		t, err = parseMillis(bytes.TrimSpace(text))
	} else {
		l.Format = "seconds"
		t, err = parseSeconds(bytes.TrimSpace(text))
	}
	if err != nil {
		return &ParseError{Line: lr.n, Err: err}
	}
	l.add(t, lr.n, "", false)
	return nil
}
