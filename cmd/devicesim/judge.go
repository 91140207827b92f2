package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// exitError ends the command with a status other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput is exit status 2: the input could not be judged.
func badInput(err error) error { return &exitError{code: 2, err: err} }

// expectFlag is -expect: a verdict a run or a log must get.
type expectFlag struct{ v stormstats.Verdict }

func (f *expectFlag) String() string { return string(f.v) }
func (f *expectFlag) Set(s string) error {
	switch v := stormstats.Verdict(s); v {
	case stormstats.Spread, stormstats.Waves, stormstats.Inconclusive:
		f.v = v
		return nil
	}
	return fmt.Errorf("want spread, waves or inconclusive, got %q", s)
}

// check returns an error when a verdict is not the one expected.
func (f *expectFlag) check(got stormstats.Verdict) error {
	if f.v != "" && got != f.v {
		return fmt.Errorf("verdict %s, expected %s", got, f.v)
	}
	return nil
}

// formatFlag is -format: the format to read a log in ("": detect it).
type formatFlag struct{ name string }

func (f *formatFlag) String() string { return f.name }
func (f *formatFlag) Set(s string) error {
	if s != "" && !slices.Contains(arrivallog.FormatNames, s) {
		return fmt.Errorf("want one of %s", strings.Join(arrivallog.FormatNames, ", "))
	}
	f.name = s
	return nil
}

// tzFlag is -tz: the zone of times written without one.
type tzFlag struct{ loc *time.Location }

func (f *tzFlag) String() string {
	if f.loc == nil {
		return ""
	}
	return f.loc.String()
}
func (f *tzFlag) Set(s string) error {
	loc, err := time.LoadLocation(s)
	if err != nil {
		return fmt.Errorf("want a zone such as UTC, Local or Europe/Berlin: %v", err)
	}
	f.loc = loc
	return nil
}

const judgeUsage = `usage: devicesim judge [-json] [-expect spread|waves|inconclusive] [-format NAME]
                      [-disruptions T1,T2] [-pattern REGEXP] [-time-layout LAYOUT] [-tz ZONE] FILE|-

Judges a broker's log, as it is: whether the fleet came back spread out or
in waves. It reads, finding the format from the lines themselves:
  mosquitto    its own file (Unix seconds or any log_timestamp_format), and under
               syslog (RFC 3164, RFC 5424, rsyslog's default), journalctl (short,
               short-iso, short-iso-precise, short-unix, short-full, -o json),
               docker or kubectl logs --timestamps, the kubelet's files
  rabbitmq     its MQTT plugin's log, text or JSON formatter
  emqx         EMQX 5's log, text or JSON (connects are logged at debug)
  hivemq       event.log
  vernemq      console.log, and its tracer's CONNACK lines
  aws-iot      lifecycle events and AWSIotLogsV2, as JSON lines or a CloudWatch
               Logs export
  azure-iot    device connection events (Event Grid, CloudEvents) and the
               Connections resource logs
  jsonl, csv, tsv, seconds, unix-ms   times of your own (devicesim's events.csv)
and any other log with -pattern. Only connects are arrivals: every other line
is counted by kind. The broker's stop and start lines, or a crowd of sessions
ended at once, mark disruptions: each recovery is judged on its own.
Exit status: 0; 1 if the verdict is not the one -expect names; 2 if the input
cannot be judged (the error names the line, or the format taken and what the
log held). docs/verdict.md has every format, with a sample line.

`

func judgeCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("devicesim judge", judgeUsage, stderr)
	// -disruptions is checked before the log is read: a typo costs nothing.
	asJSON := fs.Bool("json", false, "print one JSON object: verdict, count, synchrony, bursts, arrivals ...")
	var expect expectFlag
	fs.Var(&expect, "expect", "exit 1 unless the verdict is this one (spread, waves or inconclusive)")
	disruptions := fs.String("disruptions", "", "judge each recovery from these times on: the log's seconds, Unix seconds or RFC 3339, comma-separated")
	var format formatFlag
	fs.Var(&format, "format", "read the log as `NAME`: "+strings.Join(arrivallog.FormatNames, ", ")+" (default: detect it)")
	pattern := fs.String("pattern", "", "any other log: a `REGEXP` an arrival's line matches, with groups (?P<time>...) and (?P<client>...)")
	layout := fs.String("time-layout", "", "read stamps in this `LAYOUT`: strftime (%Y-%m-%d %H:%M:%S) or Go's (2006-01-02 15:04:05)")
	var tz tzFlag
	fs.Var(&tz, "tz", "the `ZONE` of times written without one (default UTC)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return badInput(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return badInput(errors.New("judge: name one file, or - for standard input"))
	}
	var at []time.Duration
	if *disruptions != "" {
		var err error
		if at, err = arrivallog.ParseDisruptions(*disruptions); err != nil {
			return badInput(fmt.Errorf("-disruptions: %w", err))
		}
	}
	o := arrivallog.Options{Format: format.name, Pattern: *pattern, TimeLayout: *layout, Location: tz.loc}
	name, in := fs.Arg(0), stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return badInput(err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			o.Written = st.ModTime()
		}
		in = f
	}
	l, err := arrivallog.ParseLog(in, o)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", name, err))
	}
	w := judgeWriter{l: l, asJSON: *asJSON, expect: &expect, out: stdout, clock: stormstats.Clock{Zone: tz.loc}}
	// A log stamped with the wall clock is judged in seconds since its
	// first arrival, each written with its instant: never as Unix seconds.
	// -json keeps the log's own numbers, for the programs that read them.
	if len(l.Times) > 0 && stormstats.Epoch(slices.Min(l.Times)) && !*asJSON {
		origin := slices.Min(l.Times)
		l.Rebase(origin)
		for i := range at {
			at[i] -= origin
		}
		w.clock.Base = time.Unix(0, 0).Add(origin)
	}
	if at != nil {
		recs, before, err := l.Recoveries(at)
		if err != nil {
			return err
		}
		return w.recoveries(recs, before, at, nil)
	}
	// The log's own word for its disruptions: a broker's stop line, a
	// crowd of sessions ended at once, the same devices back again.
	found, recs, err := l.RecoveriesFound()
	if err != nil {
		return err
	}
	if found != nil {
		at := []time.Duration{math.MinInt64}
		for _, d := range found {
			at = append(at, d.At)
		}
		return w.recoveries(recs, 0, at, found)
	}
	return w.judgement()
}

// judgeWriter writes what judge found, as text or as one JSON object.
type judgeWriter struct {
	l      *arrivallog.Log
	asJSON bool
	expect *expectFlag
	out    io.Writer
	// clock writes the log's times: instants in -tz's zone (UTC) where the
	// log's are, with offsets from each recovery's start.
	clock stormstats.Clock
}

// lineCounts is what judge says of a log's lines besides its arrivals.
type lineCounts struct {
	Format     string              `json:"format"`
	Skipped    int                 `json:"skipped_lines"`
	Lines      map[string]int      `json:"lines,omitempty"`
	Other      map[string]int      `json:"other_lines,omitempty"`
	Duplicates int                 `json:"duplicate_lines"`
	Lost       []arrivallog.Note   `json:"lost_lines,omitempty"`
	GapsS      float64             `json:"lost_spans_s,omitempty"`
	Devices    *arrivallog.Devices `json:"devices,omitempty"`
}

func (w *judgeWriter) counts() lineCounts {
	l := w.l
	c := lineCounts{Format: l.Format, Skipped: l.Skipped, Other: l.Labels, Duplicates: l.Duplicates, Lost: l.Lost}
	for _, g := range l.Gaps {
		c.GapsS += (g.To - g.From).Seconds()
	}
	if len(l.Kinds) > 0 {
		c.Lines = map[string]int{}
		for k, n := range l.Kinds {
			c.Lines[k.String()] = n
		}
	}
	if d, ok := l.Devices(math.MinInt64, math.MaxInt64); ok {
		c.Devices = &d
	}
	return c
}

// header writes the format taken, what the lines were, the devices, and
// where the log says it lost lines.
func (w *judgeWriter) header(extra string) {
	l, out := w.l, w.out
	fmt.Fprintf(out, "format: %s%s", l.Format, extra)
	if len(l.Kinds) > 0 {
		fmt.Fprintf(out, "\nlines: %s", l.KindSummary())
	} else if l.Skipped > 0 {
		fmt.Fprintf(out, "; %d lines skipped, not arrivals", l.Skipped)
	}
	if l.Duplicates > 0 {
		fmt.Fprintf(out, "; %s dropped as exact copies of lines before them", plural(l.Duplicates, "duplicate line"))
	}
	fmt.Fprintln(out)
	if d, ok := l.Devices(math.MinInt64, math.MaxInt64); ok && d.Seen > 0 {
		fmt.Fprintf(out, "devices: %s seen, %.1f arrivals each (the most: %s, %d)\n", plan.Thousands(d.Seen), d.PerDevice, d.MostID, d.Most)
	}
	if len(l.Lost) > 0 {
		fmt.Fprintf(out, "the log says it lost lines of its own (its counts have holes): line %d: %s", l.Lost[0].Line, l.Lost[0].Text)
		if len(l.Lost) > 1 {
			fmt.Fprintf(out, ", and %d more such lines", len(l.Lost)-1)
		}
		if len(l.Gaps) > 0 {
			var lost time.Duration
			for _, g := range l.Gaps {
				lost += g.To - g.From
			}
			fmt.Fprintf(out, "; judged with the %s it lost every line in (%v in all) taken out", plural(len(l.Gaps), "span"), lost.Round(time.Millisecond))
		}
		fmt.Fprintln(out)
	}
}

// judgement judges the log as one series and writes the judgement.
func (w *judgeWriter) judgement() error {
	l := w.l
	h, m, prep := l.Histogram()
	j, err := stormstats.Judge(h, m)
	if err != nil {
		return err
	}
	j = prep.Qualify(j)
	a := stormstats.Summarize(h)
	if w.asJSON {
		return w.writeJSON(struct {
			lineCounts
			stormstats.Preparation
			stormstats.Judgement
			Arrivals stormstats.Arrivals `json:"arrivals"`
		}{w.counts(), prep, j, a}, j.Verdict)
	}
	w.header("")
	stormstats.WritePreparation(w.out, "", prep)
	if !w.clock.Base.IsZero() {
		fmt.Fprintf(w.out, "times: seconds from the log's first arrival, %s\n", w.clock.At(0))
	}
	stormstats.WriteSummary(w.out, "", a, j, w.clock)
	if j.Verdict == stormstats.Waves {
		fmt.Fprintln(w.out, "if some of these bursts are separate disruptions (a broker restarted twice, a cluster node by node) "+
			"rather than rounds of retries, name them with -disruptions to judge each recovery on its own")
	}
	return w.expect.check(j.Verdict)
}

// recoveryDoc is one recovery as -json writes it.
type recoveryDoc struct {
	stormstats.Recovery
	Devices *arrivallog.Devices `json:"devices,omitempty"`
}

// recoveries writes each recovery's judgement and the log's by them all.
// at are the recoveries' starts; found the disruptions the log showed,
// when it was not told them (the first recovery then runs from the log's
// start).
func (w *judgeWriter) recoveries(recs []stormstats.Recovery, before int, at []time.Duration, found []arrivallog.Disruption) error {
	l := w.l
	overall := stormstats.Overall(recs)
	docs := make([]recoveryDoc, len(recs))
	for i, r := range recs {
		docs[i].Recovery = r
		to := time.Duration(math.MaxInt64)
		if i+1 < len(at) {
			to = at[i+1]
		}
		if d, ok := l.Devices(at[i], to); ok {
			docs[i].Devices = &d
		}
	}
	if w.asJSON {
		return w.writeJSON(struct {
			lineCounts
			Verdict     stormstats.Verdict      `json:"verdict"`
			BeforeFirst int                     `json:"before_first_disruption"`
			Found       []arrivallog.Disruption `json:"disruptions_found,omitempty"`
			Recoveries  []recoveryDoc           `json:"recoveries"`
		}{w.counts(), overall, before, found, docs}, overall)
	}
	extra := fmt.Sprintf("; %d recoveries", len(recs))
	if before > 0 {
		extra += fmt.Sprintf("; %d arrivals before the first disruption, not judged", before)
	}
	w.header(extra)
	for i, r := range recs {
		switch {
		case found == nil:
			fmt.Fprintf(w.out, "after the disruption at %s:\n", w.clock.At(r.AtS))
		case i == 0:
			fmt.Fprintf(w.out, "from the log's start at %s:\n", w.clock.At(r.AtS))
		default:
			d := found[i-1]
			fmt.Fprintf(w.out, "after the disruption at %s (line %d: %s):\n", w.clock.At(d.AtS), d.Line, d.Why)
		}
		from := w.clock
		if !from.Base.IsZero() && r.AtS > math.MinInt64/1e9 {
			from.From = from.Base.Add(time.Duration(r.AtS * float64(time.Second)))
		}
		if d := docs[i].Devices; d != nil {
			writeDevices(w.out, "  ", *d)
		}
		stormstats.WritePreparation(w.out, "  ", r.Preparation)
		stormstats.WriteSummary(w.out, "  ", r.Arrivals, r.Judgement, from)
	}
	fmt.Fprintf(w.out, "overall: %s\n", overall)
	return w.expect.check(overall)
}

// writeDevices says which devices a recovery brought back, and which it
// did not.
func writeDevices(out io.Writer, indent string, d arrivallog.Devices) {
	fmt.Fprintf(out, "%sdevices: %s arrived, %.1f arrivals each", indent, plan.Thousands(d.Seen), d.PerDevice)
	if d.Before > 0 {
		fmt.Fprintf(out, "; of the %s seen before, %s still out", plan.Thousands(d.Before), plan.Thousands(d.StillOut))
		if len(d.StillOutIDs) > 0 {
			fmt.Fprintf(out, " (%s", strings.Join(d.StillOutIDs, ", "))
			if d.StillOut > len(d.StillOutIDs) {
				fmt.Fprintf(out, " and %s more", plan.Thousands(d.StillOut-len(d.StillOutIDs)))
			}
			fmt.Fprint(out, ")")
		}
	}
	fmt.Fprintln(out)
}

func (w *judgeWriter) writeJSON(doc any, verdict stormstats.Verdict) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w.out, "%s\n", b)
	return w.expect.check(verdict)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return plan.Thousands(n) + " " + what + "s"
}
