package logtime

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/decimal"
	"github.com/herdguard/herdguard/internal/fileline"
)

// Layout is a time layout the user names (-time-layout) for stamps the
// reader does not know by itself. It is strftime, as mosquitto's log_timestamp_format
// and most loggers take it (%Y-%m-%d %H:%M:%S). It may instead be Go's
// reference time (2006-01-02 15:04:05).
type Layout struct {
	Text   string         // as given
	goForm string         // as time.Parse takes it
	match  *regexp.Regexp // the stamp's extent at the start of a text
	unix   bool           // %s: Unix seconds
}

// ErrBadLayout is returned for a -time-layout that cannot be read.
var ErrBadLayout = errors.New("bad time layout")

// strftime directives, as Go layout elements and the text they match.
var strftimeDirectives = map[byte]struct{ goForm, re string }{
	'Y': {"2006", `\d{4}`}, 'y': {"06", `\d{2}`}, 'm': {"01", `\d{2}`}, 'd': {"02", `\d{2}`}, 'e': {"_2", `[ \d]\d`},
	'H': {"15", `\d{2}`}, 'I': {"03", `\d{2}`}, 'M': {"04", `\d{2}`}, 'S': {"05", `\d{2}`}, 'p': {"PM", `[AaPp][Mm]`},
	'b': {"Jan", `[A-Za-z]{3}`}, 'h': {"Jan", `[A-Za-z]{3}`}, 'B': {"January", `[A-Za-z]+`},
	'a': {"Mon", `[A-Za-z]{3}`}, 'A': {"Monday", `[A-Za-z]+`}, 'z': {"-0700", `(?:[+-]\d{4}|Z)`}, 'Z': {"MST", `[A-Za-z]{1,5}`},
	'f': {"999999999", `\d{1,9}`}, 'F': {"2006-01-02", `\d{4}-\d{2}-\d{2}`}, 'T': {"15:04:05", `\d{2}:\d{2}:\d{2}`},
	'D': {"01/02/06", `\d{2}/\d{2}/\d{2}`}, 'R': {"15:04", `\d{2}:\d{2}`}, '%': {"%", `%`},
}

// goElements are Go layout elements, longest first, and the text each
// matches.
var goElements = []struct{ elem, re string }{
	{"January", `[A-Za-z]+`}, {"Monday", `[A-Za-z]+`}, {"Z07:00", `(?:Z|[+-]\d{2}:\d{2})`}, {"-07:00", `[+-]\d{2}:\d{2}`},
	{"Z0700", `(?:Z|[+-]\d{4})`}, {"-0700", `[+-]\d{4}`}, {".999999999", `(?:\.\d+)?`}, {".000000000", `\.\d{9}`},
	{",999999999", `(?:,\d+)?`}, {",000000000", `,\d{9}`}, {".999999", `(?:\.\d+)?`}, {".000000", `\.\d{6}`},
	{",999999", `(?:,\d+)?`}, {",000000", `,\d{6}`}, {".999", `(?:\.\d+)?`}, {".000", `\.\d{3}`}, {",999", `(?:,\d+)?`},
	{",000", `,\d{3}`}, {"2006", `\d{4}`}, {"Jan", `[A-Za-z]{3}`}, {"Mon", `[A-Za-z]{3}`}, {"MST", `[A-Za-z]{1,5}`},
	{"-07", `[+-]\d{2}`}, {"_2", `[ \d]\d`}, {"01", `\d{2}`}, {"02", `\d{2}`}, {"03", `\d{2}`}, {"04", `\d{2}`},
	{"05", `\d{2}`}, {"06", `\d{2}`}, {"15", `\d{2}`}, {"PM", `[AaPp][Mm]`}, {"pm", `[AaPp][Mm]`},
}

// ParseLayout reads a -time-layout.
func ParseLayout(text string) (*Layout, error) {
	if text == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadLayout)
	}
	l := &Layout{Text: text}
	var goForm, re strings.Builder
	if strings.Contains(text, "%") {
		for i := 0; i < len(text); i++ {
			c := text[i]
			if c != '%' {
				goForm.WriteByte(c)
				re.WriteString(regexp.QuoteMeta(string(c)))
				continue
			}
			if i+1 == len(text) {
				return nil, fmt.Errorf("%w %q: a %% at the end", ErrBadLayout, text)
			}
			i++
			if text[i] == 's' {
				if len(text) != 2 {
					return nil, fmt.Errorf("%w %q: %%s (Unix seconds) stands alone", ErrBadLayout, text)
				}
				l.unix = true
				re.WriteString(`\d+(?:\.\d+)?`)
				continue
			}
			d, ok := strftimeDirectives[text[i]]
			if !ok {
				return nil, fmt.Errorf("%w %q: %%%c is not a directive this reader knows (it knows %s)", ErrBadLayout, text, text[i], knownDirectives())
			}
			if text[i] == 'f' {
				// Go reads a fraction after its point: %S.%f is 05.999999999.
				s := goForm.String()
				if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, ",") {
					return nil, fmt.Errorf("%w %q: %%f follows a . or a ,", ErrBadLayout, text)
				}
			}
			goForm.WriteString(d.goForm)
			re.WriteString(d.re)
		}
	} else {
		rest := text
	outer:
		for rest != "" {
			for _, e := range goElements {
				if strings.HasPrefix(rest, e.elem) {
					goForm.WriteString(e.elem)
					re.WriteString(e.re)
					rest = rest[len(e.elem):]
					continue outer
				}
			}
			goForm.WriteByte(rest[0])
			re.WriteString(regexp.QuoteMeta(rest[:1]))
			rest = rest[1:]
		}
		if !strings.Contains(text, "2006") && !strings.Contains(text, "15") && !strings.Contains(text, "03") {
			return nil, fmt.Errorf("%w %q: expected strftime (%%Y-%%m-%%d %%H:%%M:%%S) or Go's reference time (2006-01-02 15:04:05)", ErrBadLayout, text)
		}
	}
	l.goForm = goForm.String()
	var err error
	if l.match, err = regexp.Compile(`^` + re.String()); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadLayout, text, err)
	}
	return l, nil
}

func knownDirectives() string {
	return "%Y %y %m %d %e %H %I %M %S %p %b %h %B %a %A %z %Z %f %F %T %D %R %s %%"
}

// Scan reads a stamp in the layout at the start of s: its time and the
// bytes it took.
func (l *Layout) Scan(s []byte, k *Clock) (time.Duration, int, error) {
	loc := l.match.FindIndex(s)
	if loc == nil {
		return 0, 0, fmt.Errorf("expected a time in the layout %q at %q", l.Text, fileline.Excerpt(s))
	}
	t, err := l.Parse(string(s[:loc[1]]), k)
	return t, loc[1], err
}

// Parse reads text, all of it a stamp in the layout.
func (l *Layout) Parse(text string, k *Clock) (time.Duration, error) {
	if l.unix {
		return ParseSeconds(text)
	}
	t, err := time.ParseInLocation(l.goForm, text, k.loc)
	if err != nil {
		return 0, fmt.Errorf("expected a time in the layout %q, got %q: %v", l.Text, fileline.Excerpt(text), err)
	}
	if t.Year() == 0 { // the layout has no year: as syslog's
		c := Civil{Month: int(t.Month()), Day: t.Day(), Hour: t.Hour(), Min: t.Minute(), Sec: t.Second(), Nanos: t.Nanosecond()}
		if !strings.Contains(l.goForm, "Jan") && !strings.Contains(l.goForm, "01") && !strings.Contains(l.goForm, "1/") {
			c.Month = 0 // a time of day alone
		}
		return k.At(c)
	}
	if l.zoned() {
		k.written = true
	} else {
		k.zoneless = true
	}
	k.zone.note(t.Location())
	sec := t.Unix()
	if sec > decimal.Max/1e9 || sec < -decimal.Max/1e9 {
		return 0, decimal.ErrTooFar
	}
	return time.Duration(sec)*time.Second + time.Duration(t.Nanosecond()), nil
}

// zoned reports whether the layout writes the zone.
func (l *Layout) zoned() bool {
	for _, e := range []string{"-0700", "-07:00", "Z0700", "Z07:00", "-07", "MST"} {
		if strings.Contains(l.goForm, e) {
			return true
		}
	}
	return false
}
