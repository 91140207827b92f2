package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/stormstatstest"
)

var docsUpdate = flag.Bool("docs.update", false, "rewrite the docs' generated blocks with the commands' output (make docs)")

// docFiles are the docs whose commands are run or marked.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	return append([]string{"../../README.md"}, files...)
}

// shownCommand is a command line a doc shows in a code block.
type shownCommand struct {
	file string // as the repository names it: docs/plan.md
	line int
	text string // continuation lines joined, a leading "$ " and a trailing comment dropped
}

var (
	fenceRe   = regexp.MustCompile("(?ms)^[ \t]*```([a-z]*)\n(.*?)^[ \t]*```")
	commandRe = regexp.MustCompile(`^([A-Z_]+=\S+ )*(devicesim|deviceagent|make|go run|go test|curl|kubectl|skopeo|mosquitto|python3|node|journalctl) `)
)

// shownCommands are the commands in every doc's shell and console blocks.
func shownCommands(t *testing.T) []shownCommand {
	t.Helper()
	var out []shownCommand
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		name := strings.TrimPrefix(path, "../../")
		for _, m := range fenceRe.FindAllSubmatchIndex(b, -1) {
			lang := string(b[m[2]:m[3]])
			if lang != "" && lang != "sh" && lang != "console" && lang != "bash" && lang != "shell" {
				continue // Go, YAML, JSON, a program's output
			}
			first := bytes.Count(b[:m[4]], []byte("\n")) + 1
			lines := strings.Split(string(b[m[4]:m[5]]), "\n")
			for i := 0; i < len(lines); i++ {
				at, text := first+i, strings.TrimSpace(lines[i])
				for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
					i++
					text = strings.TrimSpace(strings.TrimSuffix(text, `\`)) + " " + strings.TrimSpace(lines[i])
				}
				if lang == "console" && !strings.HasPrefix(text, "$ ") {
					continue // the output
				}
				text = strings.TrimPrefix(text, "$ ")
				if k := strings.Index(text, "  #"); k > 0 {
					text = strings.TrimSpace(text[:k])
				}
				if commandRe.MatchString(text + " ") {
					out = append(out, shownCommand{file: name, line: at, text: text})
				}
			}
		}
	}
	return out
}

// docRun says how a documented command is held to what its doc says: run
// here as shown (args, with -out in a temporary directory where it writes
// one), or why it cannot be (it needs a broker, a fleet, a cluster).
type docRun struct {
	file, prefix string
	// args, if set, is the command as this test runs it in-process, in
	// dir (a temporary directory holding what the command reads); nil for
	// a command that is only marked.
	args func(t *testing.T, dir string) []string
	// needs says what the command needs that a test does not have, and
	// which test does what it does with a stand-in.
	needs string
}

// docRuns is every command the docs show. A new one fails
// TestEveryDocumentedCommandIsRunOrMarked until it is run here or marked.
var docRuns = []docRun{
	{file: "README.md", prefix: "make sim", needs: "27 s of real time at the host's pace: make test runs the same plan in synctest bubbles (TestTheDefaultExampleIsTheDefaultRun, TestExamplesMeetTheirExpectations)"},
	{file: "README.md", prefix: "make test", needs: "it is CI: .ci/run runs it on a fresh clone"},
	{file: "README.md", prefix: "devicesim run -broker tcp://mqtt.internal:1883", needs: "a broker: TestPlansCheckPassesAgainstMosquitto runs a throttled restart of real agents through the proxy to mosquitto"},
	{file: "README.md", prefix: "make image && skopeo", needs: "a registry"},
	{file: "README.md", prefix: "devicesim deploy -f deploy/storm.yaml", args: func(t *testing.T, dir string) []string {
		return []string{"deploy", "-f", "../../deploy/storm.yaml", "-image", "registry.example.com/devicesim:v1", "-out", filepath.Join(dir, "my-storm")}
	}},
	{file: "README.md", prefix: "kubectl apply -k my-storm", needs: "a cluster: make manifests checks what it applies against k8s.io/api and the restricted Pod Security Standard"},
	{file: "README.md", prefix: "devicesim proxy -broker mqtt.internal:1883", needs: "a broker and a fleet: TestThirdPartyFleetsThroughDevicesimProxy runs devicesim proxy before mosquitto with three fleets"},
	{file: "README.md", prefix: "devicesim judge -expect spread /var/log/rabbitmq", needs: "RabbitMQ's log of a storm: TestRabbitMQsOwnLogIsJudgedAsItsStormsWere judges RabbitMQ's own"},
	{file: "docs/agent.md", prefix: "mosquitto &", needs: "mosquitto on port 1883: TestTheDocsLabCommandConnects runs the next line against one"},
	{file: "docs/agent.md", prefix: "deviceagent -broker tcp://localhost:1883", needs: "a broker on port 1883: TestTheDocsLabCommandConnects runs it as written against one"},
	{file: "docs/agent.md", prefix: "deviceagent -broker ssl://broker.example.com:8883", needs: "a device's certificate and its broker: TestTheDocsTLSCommandConnects runs it as written, then with the test broker's files"},
	{file: "docs/faultproxy.md", prefix: "devicesim run -broker tcp://mqtt.internal:1883", needs: "a broker (as README.md's)"},
	{file: "docs/large-fleets.md", prefix: "go run ./cmd/devicesim run -broker tcp://mqtt.example.com:1883", needs: "a broker"},
	{file: "docs/large-fleets.md", prefix: "skopeo copy", needs: "a registry"},
	{file: "docs/large-fleets.md", prefix: "make image", needs: "about 4 minutes: make image's own tests check what is inside the image"},
	{file: "docs/large-fleets.md", prefix: "go run ./cmd/devicesim deploy -f deploy/storm.yaml", args: func(t *testing.T, dir string) []string {
		return []string{"deploy", "-f", "../../deploy/storm.yaml", "-image", "registry.example.com/devicesim:v1", "-storage-class", "nfs-client",
			"-out", filepath.Join(dir, "my-storm")}
	}},
	{file: "docs/large-fleets.md", prefix: "kubectl ", needs: "a cluster"},
	{file: "docs/plan.md", prefix: "devicesim plan -devices 1000000 -admit-rate 10000 -target-p99 3m", needs: "",
		args: nil}, // make docs writes its output into the worked example, which TestGeneratedDocBlocks holds
	{file: "docs/plan.md", prefix: "devicesim plan -devices 100000 -admit-rate 10000 -peak-bound 20000 -max-attempts 3", args: func(t *testing.T, dir string) []string {
		return []string{"plan", "-devices", "100000", "-admit-rate", "10000", "-peak-bound", "20000", "-max-attempts", "3", "-out", dir}
	}},
	{file: "docs/plan.md", prefix: "devicesim plan -devices 100000 -admit-rate 10000 -mix iotcore@32s=0.8", args: func(t *testing.T, dir string) []string {
		return []string{"plan", "-devices", "100000", "-admit-rate", "10000", "-mix", "iotcore@32s=0.8", "-out", dir}
	}},
	{file: "docs/plan.md", prefix: "devicesim plan -f fleet.yaml", args: func(t *testing.T, dir string) []string {
		fleet := filepath.Join(dir, "fleet.yaml") // the page's own storm file with a plan: section
		require.NoError(t, os.WriteFile(fleet, []byte(docBlock(t, "../../docs/plan.md", "yaml", 0)), 0o600))
		return []string{"plan", "-f", fleet, "-out", filepath.Join(dir, "plan")}
	}},
	{file: "docs/plan.md", prefix: "MQTT_BROKER=tcp://broker:1883 devicesim run -f devicesim-plan/check.yaml", needs: "a broker: TestPlansCheckPassesAgainstMosquitto runs a check.yaml on mosquitto"},
	{file: "docs/proxy.md", prefix: "devicesim proxy ", needs: "a broker and a fleet: TestThirdPartyFleetsThroughDevicesimProxy runs devicesim proxy before mosquitto with three fleets"},
	{file: "docs/proxy.md", prefix: "curl ", needs: "a proxy's control API: TestTheControlAPIDrivesAStorm makes the same calls"},
	{file: "docs/proxy.md", prefix: "mosquitto -p 18883 -d", needs: "mosquitto"},
	{file: "docs/proxy.md", prefix: "python3 my_fleet.py", needs: "your fleet"},
	{file: "docs/storm.md", prefix: "devicesim run -f examples/throttled-restart.yaml", args: func(t *testing.T, dir string) []string {
		return []string{"run", "-f", "../../examples/throttled-restart.yaml", "-out", dir}
	}},
	{file: "docs/wire.md", prefix: "devicesim run -engine wire -transport tcp -devices 18000", needs: "a child process of 18,000 " +
		"sockets for a minute: make bench runs it (BenchmarkCostOfAConnection); TestOwnSocketsConnectReconnectAndLeave runs the same sockets"},
	{file: "docs/wire.md", prefix: "devicesim run -engine wire -broker tcp://127.0.0.1:1883", needs: "a broker: TestCalibrateMosquitto " +
		"runs the wire engine through the proxy to mosquitto"},
	{file: "docs/verdict.md", prefix: "devicesim judge -expect spread /var/log/rabbitmq", needs: "RabbitMQ's log of a storm (as README.md's)"},
	{file: "docs/verdict.md", prefix: "journalctl -u mosquitto", needs: "journald's mosquitto unit: TestBrokerLogsAsTheyAreWritten reads journalctl's every output form"},
	{file: "docs/verdict.md", prefix: "devicesim judge -pattern", args: func(t *testing.T, dir string) []string {
		// a gateway's log in the page's format: 300 devices back over a minute
		var b strings.Builder
		for i := range 300 {
			fmt.Fprintf(&b, "28.11.2026 10:%02d:%02d.%03d gw accepted dev-%d\n", i/5/60, i/5%60, i*37%1000, i)
		}
		log := filepath.Join(dir, "gw.log")
		require.NoError(t, os.WriteFile(log, []byte(b.String()), 0o600))
		return []string{"judge", "-pattern", `^(?P<time>\S+ \S+) gw accepted (?P<client>\S+)`, "-time-layout", "%d.%m.%Y %H:%M:%S.%f",
			"-tz", "Europe/Berlin", log}
	}},
}

// docBlock is the n-th fenced block of lang in the doc at path.
func docBlock(t *testing.T, path, lang string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, m := range fenceRe.FindAllSubmatch(b, -1) {
		if string(m[1]) == lang {
			if n == 0 {
				return string(m[2])
			}
			n--
		}
	}
	t.Fatalf("%s has no %s block %d", path, lang, n)
	return ""
}

// Every command a doc shows is run here as shown (exit status 0, and for
// the worked examples the output the doc quotes: TestGeneratedDocBlocks),
// or marked with what it needs that a test does not have; no mark stands
// for a command the docs no longer show.
func TestEveryDocumentedCommandIsRunOrMarked(t *testing.T) {
	used := make([]bool, len(docRuns))
	var toRun []int
	for _, c := range shownCommands(t) {
		found := -1
		for k, r := range docRuns {
			if r.file == c.file && strings.HasPrefix(c.text, r.prefix) {
				found = k
				break
			}
		}
		if !assert.GreaterOrEqual(t, found, 0, "%s:%d shows %q: run it in docRuns or mark what it needs", c.file, c.line, c.text) {
			continue
		}
		if !used[found] && docRuns[found].args != nil {
			toRun = append(toRun, found)
		}
		used[found] = true
	}
	tests := testNames(t)
	for k, r := range docRuns {
		assert.True(t, used[k], "docRuns names %s's %q, which it no longer shows", r.file, r.prefix)
		for _, name := range testNameRe.FindAllString(r.needs, -1) {
			assert.True(t, tests[name], "%s's %q names %s, which no test is", r.file, r.prefix, name)
		}
		assert.True(t, r.args != nil || r.needs != "" || strings.Contains(r.prefix, "-target-p99 3m"), "%s's %q: run it or say what it needs", r.file, r.prefix)
	}
	if stormstatstest.RaceDetector {
		t.Skip("the commands run at full size: make stats runs them without the race detector")
	}
	for _, k := range toRun {
		r := docRuns[k]
		t.Run(r.file+": "+r.prefix, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var out bytes.Buffer
			err := run(context.Background(), r.args(t, dir), noenv, nil, &out, &out)
			assert.NoError(t, err, "exit status 0, as the doc shows it:\n%s", out.String())
		})
	}
}

// generatedRe is a block make docs writes: the command after "make docs:"
// (devicesim's arguments; $OUT a temporary directory), the lines of its
// output kept from the first that matches from up to the first after it
// that matches to (not kept), and the fenced block they go in.
var generatedRe = regexp.MustCompile("(?m)^<!-- make docs: (.*?)(?: \\| from (.*?))?(?: \\| to (.*?))? -->\n```([a-z]*)\n((?s:.*?))```\n")

// A doc's worked example is its command's output, kept as make docs
// writes it (go test ./cmd/devicesim/ -run TestGeneratedDocBlocks -args
// -docs.update): run again here, it must be the same to the byte. The
// virtual engine's runs are exact, so it is.
func TestGeneratedDocBlocks(t *testing.T) {
	if stormstatstest.RaceDetector && !*docsUpdate {
		t.Skip("the commands run at full size: make stats runs them without the race detector")
	}
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		matches := generatedRe.FindAllSubmatchIndex(b, -1)
		if len(matches) == 0 {
			continue
		}
		var rewritten bytes.Buffer
		last := 0
		for _, m := range matches {
			part := func(k int) string {
				if m[2*k] < 0 {
					return ""
				}
				return string(b[m[2*k]:m[2*k+1]])
			}
			out := generate(t, part(1), part(2), part(3))
			if !*docsUpdate {
				assert.Equal(t, part(5), out, "%s: the block after make docs: %s (run make docs)", path, part(1))
			}
			rewritten.Write(b[last:m[10]])
			rewritten.WriteString(out)
			last = m[11]
		}
		rewritten.Write(b[last:])
		if *docsUpdate {
			require.NoError(t, os.WriteFile(path, rewritten.Bytes(), 0o644))
		}
	}
}

// generate runs devicesim with command's arguments and keeps the lines of
// its output from the first that matches from, up to the first after it
// that matches to.
func generate(t *testing.T, command, from, to string) string {
	t.Helper()
	args := strings.Fields(strings.ReplaceAll(command, "$OUT", t.TempDir()))
	require.Equal(t, "devicesim", args[0], "make docs runs devicesim commands")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), args[1:], noenv, nil, &out, &out), "%s:\n%s", command, out.String())
	lines := strings.SplitAfter(out.String(), "\n")
	start, end := 0, len(lines)
	if from != "" {
		re := regexp.MustCompile(from)
		for start < len(lines) && !re.MatchString(lines[start]) {
			start++
		}
	}
	if to != "" {
		re := regexp.MustCompile(to)
		for end = start + 1; end < len(lines) && !re.MatchString(lines[end]); end++ {
		}
	}
	return strings.TrimRight(strings.Join(lines[start:end], ""), "\n") + "\n"
}

var testNameRe = regexp.MustCompile(`\bTest[A-Z]\w+`)

// testNames are the module's test functions, so that a mark names one that
// exists.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
	require.NoError(t, filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		for _, m := range decl.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return err
	}))
	return names
}
