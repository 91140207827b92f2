package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/disruption"
	"github.com/herdguard/herdguard/internal/logjudge"
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
                      [-disruptions T1,T2] [-pattern REGEXP] [-time-layout LAYOUT] [-tz ZONE]
                      [-out DIR] FILE|-

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
-out DIR writes its picture there: arrivals.svg and report.html.
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
	out := fs.String("out", "", "write the log's chart and page, arrivals.svg and report.html, into `DIR`")
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
		if at, err = disruption.ParseTimes(*disruptions); err != nil {
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
	verdict, view, err := logjudge.JudgeView(l, at, *asJSON, tz.loc, stdout)
	if err != nil {
		return err
	}
	if *out != "" {
		view.Name = filepath.Base(name)
		if name == "-" {
			view.Name = "standard input"
		}
		if err := logjudge.WritePicture(*out, view); err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		if !*asJSON {
			fmt.Fprintf(stdout, "picture: %s (arrivals.svg beside it)\n", filepath.Join(*out, "report.html"))
		}
	}
	return expect.check(verdict)
}
