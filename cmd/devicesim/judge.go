package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdguard/herdguard/internal/arrivallog"
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

func judgeCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devicesim judge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: devicesim judge [-json] [-expect spread|waves] [-format NAME] FILE|-\n\n"+
			"Judges any arrival log, in the format its first line shows: mosquitto's log as it is\n"+
			"(its \"New client connected\" lines), JSON lines with a ts, timestamp, @timestamp, time\n"+
			"or t field, a CSV or TSV whose header names t_s (seconds), unix_ms or a column of\n"+
			"RFC 3339 times (devicesim's events.csv among them), or one time a line (seconds, or\n"+
			"Unix ms). It prints the format it took. Exit status: 0, 1 if the verdict is not the\n"+
			"one -expect names, 2 if the input cannot be read.\n\n")
		fs.PrintDefaults()
	}
	// -disruptions is checked before the log is read: a typo costs nothing.
	asJSON := fs.Bool("json", false, "print one JSON object: verdict, count, synchrony, bursts, arrivals ...")
	var expect expectFlag
	fs.Var(&expect, "expect", "exit 1 unless the verdict is this one (spread, waves or inconclusive)")
	disruptions := fs.String("disruptions", "", "judge each recovery on its own: the disruptions' times, comma-separated, in the log's seconds (Unix seconds for real stamps) or RFC 3339")
	var format formatFlag
	fs.Var(&format, "format", "read the log as `NAME`: "+strings.Join(arrivallog.FormatNames, ", ")+" (default: detect it)")
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
	name, in := fs.Arg(0), stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return badInput(err)
		}
		defer f.Close()
		in = f
	}
	l, err := arrivallog.ParseLog(in, format.name)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", name, err))
	}
	if at != nil {
		recs, before, err := l.Recoveries(at)
		if err != nil {
			return err
		}
		return writeRecoveries(l, recs, before, nil, *asJSON, &expect, stdout)
	}
	// The log's own word for its disruptions: a broker's start line, the
	// same devices back again.
	found, recs, err := l.RecoveriesFound()
	if err != nil {
		return err
	}
	if found != nil {
		return writeRecoveries(l, recs, 0, found, *asJSON, &expect, stdout)
	}
	return writeJudgement(l, *asJSON, &expect, stdout)
}

// writeJudgement judges the log as one series and writes the judgement.
func writeJudgement(l *arrivallog.Log, asJSON bool, expect *expectFlag, stdout io.Writer) error {
	h, m, prep := l.Histogram()
	j, err := stormstats.Judge(h, m)
	if err != nil {
		return err
	}
	j = prep.Qualify(j)
	a := stormstats.Summarize(h)
	if asJSON {
		b, err := json.MarshalIndent(struct {
			Format  string `json:"format"`
			Skipped int    `json:"skipped_lines"`
			stormstats.Preparation
			stormstats.Judgement
			Arrivals stormstats.Arrivals `json:"arrivals"`
		}{l.Format, l.Skipped, prep, j, a}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "format: %s", l.Format)
		if l.Skipped > 0 {
			fmt.Fprintf(stdout, "; %d lines skipped, not arrivals", l.Skipped)
		}
		fmt.Fprintln(stdout)
		stormstats.WritePreparation(stdout, "", prep)
		stormstats.WriteSummary(stdout, "", a, j)
		if j.Verdict == stormstats.Waves {
			fmt.Fprintln(stdout, "if some of these bursts are separate disruptions (a broker restarted twice, a cluster node by node) "+
				"rather than rounds of retries, name them with -disruptions to judge each recovery on its own")
		}
	}
	return expect.check(j.Verdict)
}

// writeRecoveries writes each recovery's judgement and the log's by them
// all. found are the disruptions the log showed, when it was not told
// them (the first recovery then runs from the log's start).
func writeRecoveries(l *arrivallog.Log, recs []stormstats.Recovery, before int, found []arrivallog.Disruption, asJSON bool, expect *expectFlag, stdout io.Writer) error {
	overall := stormstats.Overall(recs)
	if asJSON {
		b, err := json.MarshalIndent(struct {
			Format      string                  `json:"format"`
			Skipped     int                     `json:"skipped_lines"`
			Verdict     stormstats.Verdict      `json:"verdict"`
			BeforeFirst int                     `json:"before_first_disruption"`
			Found       []arrivallog.Disruption `json:"disruptions_found,omitempty"`
			Recoveries  []stormstats.Recovery   `json:"recoveries"`
		}{l.Format, l.Skipped, overall, before, found, recs}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return expect.check(overall)
	}
	fmt.Fprintf(stdout, "format: %s; %d recoveries", l.Format, len(recs))
	if before > 0 {
		fmt.Fprintf(stdout, "; %d arrivals before the first disruption, not judged", before)
	}
	fmt.Fprintln(stdout)
	for i, r := range recs {
		switch {
		case found == nil:
			fmt.Fprintf(stdout, "after the disruption at %s:\n", strconv.FormatFloat(r.AtS, 'f', -1, 64))
		case i == 0:
			fmt.Fprintf(stdout, "from the log's start at %s:\n", strconv.FormatFloat(r.AtS, 'f', -1, 64))
		default:
			d := found[i-1]
			fmt.Fprintf(stdout, "after the disruption at %s (line %d: %s):\n", strconv.FormatFloat(d.AtS, 'f', -1, 64), d.Line, d.Why)
		}
		stormstats.WritePreparation(stdout, "  ", r.Preparation)
		stormstats.WriteSummary(stdout, "  ", r.Arrivals, r.Judgement)
	}
	fmt.Fprintf(stdout, "overall: %s\n", overall)
	return expect.check(overall)
}
