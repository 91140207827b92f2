package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/arrivallog"
	"github.com/herdguard/herdguard/internal/arrivallog/disruption"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// judge runs devicesim judge on in (standard input when file is "-").
func judge(t *testing.T, in string, args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = run(context.Background(), append([]string{"judge"}, args...), noenv, strings.NewReader(in), &o, &e)
	return o.String(), e.String(), err
}

// rounds: devices in lock-step every period, as plain seconds.
func rounds(devices, count int, period float64) string {
	var b strings.Builder
	for k := range count {
		for d := range devices {
			fmt.Fprintf(&b, "%.3f\n", float64(k)*period+float64(d)*0.001)
		}
	}
	return b.String()
}

func TestJudgeGolden(t *testing.T) {
	out, _, err := judge(t, rounds(100, 5, 32), "-")
	require.NoError(t, err)
	golden := filepath.Join("testdata", "judge-waves.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out)
}

// mosquittoRounds: devices in lock-step every period, as mosquitto logs
// them, with its other lines around.
func mosquittoRounds(devices, count, period int) string {
	var b strings.Builder
	b.WriteString("1700000000: mosquitto version 2.0.11 starting\n1700000000: mosquitto version 2.0.11 running\n")
	for k := range count {
		for d := range devices {
			t := 1700000000 + k*period + d/50
			fmt.Fprintf(&b, "%d: New connection from 10.0.0.%d:%d on port 1883.\n", t, d%250, 40000+k)
			fmt.Fprintf(&b, "%d: New client connected from 10.0.0.%d:%d as dev-%d (p2, c1, k30).\n", t, d%250, 40000+k, d)
		}
	}
	return b.String()
}

func TestJudgePrintsTheFormatTaken(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		args     []string
		want     string
	}{
		{"plain seconds", rounds(100, 5, 32), nil, "format: seconds\nresolution: stamps on a 1 ms tick"},
		{"mosquitto's log as it is", mosquittoRounds(100, 5, 32), nil, "format: mosquitto\nlines: 500 connect, 1 broker start, 501 other (tcp accept 500, broker running 1)\ndevices: 100 seen, 5.0 arrivals each (the most: dev-0, 5)\nresolution: stamps on a 1.0 s tick"},
		{"events.csv", "t_s,unix_ms,client_id,outcome,code,lag_ms\n1.0000,1795305094626,dev-1,accepted,0,2.5\n", nil, "format: events.csv\n"},
		{"tsv behind a BOM", "\xef\xbb\xbft_s\tclient\r\n1\ta\r\n2\tb\r\n", nil, "format: tsv (t_s)\n"},
		{"JSON lines", `{"ts":1700000000120,"clientid":"a"}` + "\n", nil, "format: jsonl (field ts, Unix ms)\n"},
		{"-format unix-ms", "1000\n2000\n", []string{"-format", "unix-ms"}, "format: unix ms\nresolution: stamps on a 1.0 s tick"},
	} {
		out, _, err := judge(t, tc.in, append(tc.args, "-")...)
		require.NoError(t, err, tc.name)
		assert.True(t, strings.HasPrefix(out, tc.want), "%s: %q", tc.name, out)
	}
}

func TestJudgeJSONNamesTheFormat(t *testing.T) {
	out, _, err := judge(t, mosquittoRounds(100, 5, 32), "-json", "-")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "mosquitto", doc["format"])
	assert.EqualValues(t, 502, doc["skipped_lines"], "two of the broker's own, and a New connection for each arrival")
	assert.EqualValues(t, 500, doc["count"])
	assert.Contains(t, doc, "verdict")
}

// -format reads a log as it says: the same two numbers 1 s apart as
// milliseconds, 1000 s apart as the seconds they are taken for unforced.
func TestJudgeFormatForcesIt(t *testing.T) {
	for _, tc := range []struct {
		format, taken string
		spanS         float64
	}{{"unix-ms", "unix ms", 1}, {"seconds", "seconds", 1000}, {"", "seconds", 1000}} {
		out, _, err := judge(t, "1000\n2000\n", "-json", "-format", tc.format, "-")
		require.NoError(t, err, tc.format)
		var doc struct {
			Format   string  `json:"format"`
			TickS    float64 `json:"tick_s"`
			Arrivals struct {
				SpanS float64 `json:"span_s"`
			} `json:"arrivals"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		assert.Equal(t, tc.taken, doc.Format, "-format %q", tc.format)
		assert.InDelta(t, tc.spanS, doc.Arrivals.SpanS, doc.TickS, "-format %q: within a tick", tc.format)
		assert.Equal(t, 1.0, doc.TickS, "-format %q: whole seconds either way", tc.format)
	}
}

func TestJudgeUnknownFormatListsTheNames(t *testing.T) {
	_, stderr, err := judge(t, "1\n", "-format", "excel", "-")
	var e *exitError
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, 2, e.code)
	names := strings.Join(arrivallog.FormatNames, ", ")
	assert.EqualError(t, err, `invalid value "excel" for flag -format: want one of `+names)
	assert.Contains(t, stderr, "-format NAME")
	assert.Contains(t, stderr, "read the log as NAME: "+names+" (default: detect it)")
}

func TestJudgeExpectGatesAPipeline(t *testing.T) {
	in := rounds(100, 5, 32)
	_, _, err := judge(t, in, "-expect", "waves", "-")
	assert.NoError(t, err)
	_, _, err = judge(t, in, "-expect", "spread", "-")
	require.ErrorContains(t, err, "verdict waves, expected spread")
	var e *exitError
	assert.False(t, errors.As(err, &e), "a verdict other than the expected one exits 1, not 2")
	_, _, err = judge(t, in, "-expect", "maybe", "-")
	assert.True(t, errors.As(err, &e) && e.code == 2, "a bad flag is bad input: %v", err)
}

func TestJudgeJSON(t *testing.T) {
	out, _, err := judge(t, rounds(100, 5, 32), "-json", "-")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "waves", doc["verdict"])
	assert.EqualValues(t, 500, doc["count"])
	assert.InDelta(t, 1, doc["synchrony"], 0.01)
	assert.InDelta(t, 32, doc["period_s"], 0.1)
	assert.Contains(t, doc, "arrivals")
	assert.Len(t, doc["bursts"], 5)
}

func TestJudgeARunsEventsFile(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"run", "-engine", "virtual", "-policy", "exponential", "-devices", "200",
		"-expect", "waves", "-out", dir}, noenv, nil, &out, &out), out.String())
	got, _, err := judge(t, "", "-expect", "waves", filepath.Join(dir, "events.csv"))
	require.NoError(t, err, got)
	assert.Contains(t, got, "verdict: waves")
	assert.Contains(t, got, "arrivals: 1,000 over", "every attempt the devices made, refused dials included")

	err = run(context.Background(), []string{"run", "-engine", "virtual", "-policy", "exponential", "-devices", "200",
		"-expect", "spread", "-out", dir}, noenv, nil, &out, &out)
	assert.ErrorContains(t, err, "verdict waves, expected spread", "run -expect fails the run")
}

func TestJudgeBadInputExits2AndWritesNothing(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.csv")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for name, tc := range map[string]struct{ in, file, want string }{
		"empty file":       {"", empty, "no arrivals"},
		"unparsable line":  {"1\n2\nthree\n", "-", "line 3"},
		"no time column":   {"a,b\n1,2\n", "-", "-: line 1: a CSV header needs a t_s, unix_ms or RFC 3339 time column"},
		"unreadable first": {"\nhello\n", "-", "-: line 2: cannot tell the format from the first lines (the first: \"hello\")"},
		"-format, not it":  {"1700000000: mosquitto version 2.0.11 running\n", "-format seconds -", "-: line 1: expected a time in seconds"},
		"missing file":     {"", filepath.Join(t.TempDir(), "nope"), "no such file"},
		"two files":        {"", "a b", "name one file"},
		"bad unix_ms line": {"unix_ms\n1000\nsoon\n", "-", "line 3"},
	} {
		args := strings.Fields(tc.file)
		if tc.file == empty || strings.Contains(tc.file, "nope") {
			args = []string{tc.file}
		}
		stdout, _, err := judge(t, tc.in, args...)
		var e *exitError
		require.True(t, errors.As(err, &e), "%s: %v", name, err)
		assert.Equal(t, 2, e.code, name)
		assert.ErrorContains(t, err, tc.want, name)
		assert.Empty(t, stdout, "%s: nothing written", name)
	}
}

// Two recoveries named with -disruptions are judged each on its own; the
// exit status follows the overall verdict.
func TestJudgeEachDisruption(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	var b strings.Builder
	for _, at := range []float64{1700000000, 1700000600} {
		for range 2000 {
			// whole seconds, as mosquitto stamps
			fmt.Fprintf(&b, "%d\n", int64(at+20*r.ExpFloat64()))
		}
	}
	out, _, err := judge(t, b.String(), "-disruptions", "1700000000,1700000600", "-expect", "spread", "-")
	require.NoError(t, err, out)
	assert.Contains(t, out, "format: seconds; 2 recoveries\n")
	assert.Equal(t, 2, strings.Count(out, "verdict: spread"), out)
	assert.Contains(t, out, "overall: spread")

	out, _, err = judge(t, b.String(), "-")
	require.NoError(t, err)
	assert.Contains(t, out, "name them with -disruptions", "judged as one series, the two recoveries read as rounds")

	_, _, err = judge(t, b.String(), "-disruptions", "yesterday", "-")
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.code)
}

// A mosquitto log of a broker restarted once: judge finds the restart in
// its stop line and judges the boot and the recovery each on its own,
// saying where it found the disruption; -json names it too.
func TestJudgeFindsTheLogsOwnDisruptions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	type line struct {
		t    int64
		text string
	}
	lines := []line{{1699999999, "mosquitto version 2.0.11 starting"}, {1700000600, "mosquitto version 2.0.11 terminating"}, {1700000630, "mosquitto version 2.0.11 starting"}}
	for _, at := range []float64{1700000000, 1700000630} {
		for dev := range 2000 {
			lines = append(lines, line{int64(at + 20*r.ExpFloat64()), fmt.Sprintf("New client connected from 10.0.0.1:4000 as dev-%d (p2, c1, k30).", dev)})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return int(a.t - b.t) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%d: %s\n", l.t, l.text)
	}
	out, _, err := judge(t, b.String(), "-expect", "spread", "-")
	require.NoError(t, err, out)
	assert.Contains(t, out, "format: mosquitto; 2 recoveries\n")
	// instants in RFC 3339 (UTC without -tz), never bare Unix seconds
	assert.Contains(t, out, "from the log's start at 0 s (2023-11-14T22:13:20Z):\n")
	assert.Regexp(t, `after the disruption at 600 s \(2023-11-14T22:23:20Z\) \(line \d+: the broker logged: mosquitto version 2.0.11 terminating\):\n`, out)
	assert.Contains(t, out, "bursts at: 30.0 s (2023-11-14T22:23:50Z): 1,346 within 22.7 s\n", "offsets from the disruption")
	assert.NotRegexp(t, `\b1700000\d{3}\b`, out)
	assert.Equal(t, 2, strings.Count(out, "verdict: spread"), out)

	out, _, err = judge(t, b.String(), "-json", "-")
	require.NoError(t, err)
	var got struct {
		Verdict    string                  `json:"verdict"`
		Found      []disruption.Disruption `json:"disruptions_found"`
		Recoveries []json.RawMessage       `json:"recoveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "spread", got.Verdict)
	require.Len(t, got.Found, 1)
	assert.Equal(t, 1700000600.0, got.Found[0].AtS)
	assert.Len(t, got.Recoveries, 2)
}

// Any other log, with -pattern, -time-layout and -tz: the lines that match
// are the arrivals, at the time their group names, in the zone given.
func TestJudgeAnyLogWithAPattern(t *testing.T) {
	var b strings.Builder
	for k := range 5 {
		for d := range 100 {
			at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC).Add(time.Duration(k*32)*time.Second + time.Duration(d)*time.Millisecond)
			fmt.Fprintf(&b, "%s gateway accepted device-%d\n%s gateway pinged device-%d\n", at.Format("02.01.2006 15:04:05.000"), d,
				at.Format("02.01.2006 15:04:05.000"), d)
		}
	}
	out, _, err := judge(t, b.String(), "-json", "-pattern", `^(?P<time>\S+ \S+) gateway accepted (?P<client>\S+)$`,
		"-time-layout", "%d.%m.%Y %H:%M:%S.%f", "-tz", "Europe/Berlin", "-expect", "waves", "-")
	require.NoError(t, err, out)
	var doc struct {
		Format   string  `json:"format"`
		Count    int     `json:"count"`
		Skipped  int     `json:"skipped_lines"`
		PeriodS  float64 `json:"period_s"`
		Arrivals struct {
			StartS float64 `json:"start_s"`
		} `json:"arrivals"`
		Devices struct {
			Seen int `json:"seen"`
		} `json:"devices"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "pattern; times without a zone read as Europe/Berlin", doc.Format)
	assert.Equal(t, 500, doc.Count)
	assert.Equal(t, 500, doc.Skipped, "the lines that do not match")
	assert.InDelta(t, 32, doc.PeriodS, 0.5)
	assert.Equal(t, 100, doc.Devices.Seen)

	_, _, err = judge(t, b.String(), "-pattern", `(?P<when>\S+)`, "-")
	assert.ErrorContains(t, err, "it needs a group named time")
	_, _, err = judge(t, b.String(), "-time-layout", "%Q", "-")
	assert.ErrorContains(t, err, "%Q is not a directive")
	_, _, err = judge(t, b.String(), "-tz", "Mars/Olympus", "-")
	assert.ErrorContains(t, err, "want a zone such as UTC, Local or Europe/Berlin")
}

// A broker's log with no connect line exits 2, naming the format it took,
// the kinds of lines it saw, and what the broker needs to log connects.
func TestJudgeALogWithoutConnects(t *testing.T) {
	in := "2024-01-02T03:04:06.394694+00:00 [info] clientid: dev-1, msg: terminate, peername: 10.0.0.1:5000, reason: {shutdown,tcp_closed}\n" +
		"2024-01-02T03:04:07.454059+00:00 [warning] clientid: dev-2, msg: socket_error, peername: 10.0.0.1:5001, reason: econnreset\n"
	stdout, _, err := judge(t, in, "-")
	var e *exitError
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 2, e.code)
	assert.EqualError(t, err, "-: no arrivals: 2 lines, read as emqx, and none a connect; 2 disconnect "+
		"(EMQX logs a connect only at debug: log.file.level = debug, or a trace on the clients)")
	assert.Empty(t, stdout)
}

// What the client IDs say: devices seen, arrivals each, and by recovery
// those that were back before it and are still out; a logger's drop mode
// is said, and its span taken out.
func TestJudgeSaysWhoCameBack(t *testing.T) {
	var b strings.Builder
	line := func(at time.Time, level, pid, msg string) {
		fmt.Fprintf(&b, "%s [%s] <0.%s.0> %s\n", at.Format("2006-01-02 15:04:05.000000-07:00"), level, pid, msg)
	}
	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(9, 9))
	for d := range 200 {
		line(t0.Add(time.Duration(r.Float64()*20e9)), "info", fmt.Sprint(1000+d),
			fmt.Sprintf("accepting MQTT connection <0.%d.0> (10.0.0.1:%d -> 10.0.0.2:1883, client id: dev-%d)", 1000+d, 40000+d, d))
	}
	for d := range 200 { // a drop at 100 s: every session ends
		line(t0.Add(100*time.Second+time.Duration(d)*time.Millisecond), "info", fmt.Sprint(1000+d),
			fmt.Sprintf("MQTT connection \"10.0.0.1:%d -> 10.0.0.2:1883\" will terminate because peer closed TCP connection", 40000+d))
	}
	line(t0.Add(101*time.Second), "notice", "44", "Handler rmq_1_file_1 switched from  async to drop mode")
	line(t0.Add(101*time.Second+300*time.Millisecond), "notice", "44", "Handler rmq_1_file_1 switched from  drop to async mode")
	for d := range 190 { // ten never come back
		line(t0.Add(102*time.Second+time.Duration(20*r.ExpFloat64()*1e9)), "info", fmt.Sprint(2000+d),
			fmt.Sprintf("accepting MQTT connection <0.%d.0> (10.0.0.1:%d -> 10.0.0.2:1883, client id: dev-%d)", 2000+d, 50000+d, d))
	}
	out, _, err := judge(t, b.String(), "-expect", "spread", "-")
	require.NoError(t, err, out)
	for _, want := range []string{
		"format: rabbitmq; 2 recoveries\n",
		"lines: 390 connect, 200 disconnect, 2 lost-lines note\n",
		"devices: 200 seen, 1.9 arrivals each",
		"the log says it lost lines of its own (its counts have holes): line 401: Handler rmq_1_file_1 switched from  async to drop mode; " +
			"judged with the 1 span it lost every line in (300ms in all) taken out\n",
		"after the disruption at 100.0 s (2026-11-27T04:01:40Z) (line 201: the sessions of 200 devices ended within 199 ms, though they had lasted",
		"  devices: 190 arrived, 1.0 arrivals each; of the 200 seen before, 10 still out (dev-190, dev-191,",
	} {
		assert.Contains(t, out, want)
	}

	out, _, err = judge(t, b.String(), "-json", "-")
	require.NoError(t, err, out)
	var doc struct {
		Lines      map[string]int `json:"lines"`
		LostS      float64        `json:"lost_spans_s"`
		Recoveries []struct {
			Devices struct {
				Seen     int      `json:"seen"`
				Before   int      `json:"seen_before"`
				StillOut int      `json:"still_out"`
				IDs      []string `json:"still_out_ids"`
			} `json:"devices"`
		} `json:"recoveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, map[string]int{"connect": 390, "disconnect": 200, "lost-lines note": 2}, doc.Lines)
	assert.InDelta(t, 0.3, doc.LostS, 1e-9)
	require.Len(t, doc.Recoveries, 2)
	assert.Equal(t, 200, doc.Recoveries[1].Devices.Before)
	assert.Equal(t, 190, doc.Recoveries[1].Devices.Seen)
	assert.Equal(t, 10, doc.Recoveries[1].Devices.StillOut)
	assert.Len(t, doc.Recoveries[1].Devices.IDs, 10)
}

// Instants are written in the zone the log wrote them in: a syslog
// relay's +01:00 stays +01:00, not UTC.
func TestJudgeWritesInstantsInTheLogsZone(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "arrivallog", "testdata", "brokers", "mosquitto-2.0.11-rsyslog-rfc5424.log"))
	require.NoError(t, err)
	out, _, err := judge(t, string(b), "-")
	require.NoError(t, err, out)
	assert.Contains(t, out, "times: seconds from the log's first arrival, 0 s (2026-11-27T06:10:12.716+01:00)\n")
	assert.NotContains(t, out, "Z)")
}

// -out writes the log's picture: the chart and the page that holds it,
// the page naming the verdict and each recovery.
func TestJudgeOutWritesThePicture(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "picture")
	out, _, err := judge(t, restartedMosquittoLog(1000), "-out", dir, "-")
	require.NoError(t, err, out)
	assert.Contains(t, out, "picture: "+filepath.Join(dir, "report.html"))
	svg, err := os.ReadFile(filepath.Join(dir, "arrivals.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "connects in the broker&#39;s log")
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "standard input: <span class=")
	assert.Contains(t, string(page), "after the disruption at 600.0 s (2023-11-14T22:23:20Z) (the broker logged: mosquitto version 2.0.11 terminating)")
	assert.NotContains(t, string(page), "<script")
}
