package arrivallog

import (
	"fmt"
	"regexp"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog/logtime"
	"github.com/herdguard/herdguard/internal/fileline"
)

// pattern is -pattern: a line matching it is an arrival, at its time
// group, of its client group.
type pattern struct {
	text           string
	re             *regexp.Regexp
	timeAt, client int
}

func newPattern(text string) (*pattern, error) {
	re, err := regexp.Compile(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPattern, err)
	}
	pt := &pattern{text: text, re: re, timeAt: re.SubexpIndex("time"), client: re.SubexpIndex("client")}
	if pt.timeAt < 0 {
		return nil, fmt.Errorf(`%w %q: it needs a group named time, (?P<time>...), around the arrival's time`, ErrBadPattern, text)
	}
	return pt, nil
}

func (pt *pattern) parse(p *parser, src *source, text []byte) error {
	l := p.log
	m := pt.re.FindSubmatchIndex(text)
	if m == nil || m[2*pt.timeAt] < 0 {
		l.Skipped++
		return nil
	}
	stamp := text[m[2*pt.timeAt]:m[2*pt.timeAt+1]]
	var t time.Duration
	var err error
	k := p.patternClock()
	if p.layout != nil {
		t, err = p.layout.Parse(string(stamp), k)
	} else if c, n, ok := logtime.ScanStamp(stamp); ok && n == len(stamp) {
		t, err = k.At(c)
	} else {
		err = fmt.Errorf("cannot read the time %q: name its layout with -time-layout", fileline.Excerpt(stamp))
	}
	if err != nil {
		return &fileline.Error{Line: src.n, Err: err}
	}
	client, has := "", pt.client >= 0
	if has && m[2*pt.client] >= 0 {
		client = string(text[m[2*pt.client]:m[2*pt.client+1]])
	}
	if err := p.rec.count(src.n); err != nil {
		return err
	}
	l.add(t, src.n, client, has)
	l.Format = "pattern"
	if a := k.Assumed(); a != "" {
		l.Format += "; " + a
	}
	return nil
}

func (p *parser) patternClock() *logtime.Clock {
	if p.pclock == nil {
		p.pclock = logtime.NewClock(p.o.Location, p.written, &p.zone)
	}
	return p.pclock
}
