package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/stormstats"
)

// documentedCommand is a devicesim command as its docs name it.
type documentedCommand struct {
	name string   // as a doc invokes it
	home string   // the doc whose sections for it name every flag it takes
	args []string // what asks for its help
}

// documented is every devicesim command, each with its doc.
var documented = []documentedCommand{
	{"run", "docs/simulator.md", []string{"run"}},
	{"grid", "docs/simulator.md", []string{"grid"}},
	// grid -mix is the rollout question, a flag set of its own.
	{"grid -mix", "docs/simulator.md", []string{"grid", "-mix", "fleet-safe"}},
	{"soak", "docs/simulator.md", []string{"soak"}},
	{"calibrate", "docs/simulator.md", []string{"calibrate"}},
	{"delays", "docs/simulator.md", []string{"delays"}},
	{"merge", "docs/simulator.md", []string{"merge"}},
	{"judge", "docs/verdict.md", []string{"judge"}},
	{"plan", "docs/plan.md", []string{"plan"}},
	{"deploy", "docs/large-fleets.md", []string{"deploy"}},
	{"proxy", "docs/proxy.md", []string{"proxy"}},
}

// docLayout says whose flags a doc names. `devicesim CMD -flag` is CMD's
// wherever it stands; a code span that is only flags, such as
// `-expect spread`, is its section's command's.
type docLayout struct {
	cmd      string            // outside the sections below ("": none)
	sections map[string]string // a heading: its section's command, and its subsections'
}

var docLayouts = map[string]docLayout{
	"docs/simulator.md": {cmd: "run", sections: map[string]string{
		"## Soak":                            "soak",
		"## The policy grid: devicesim grid": "grid",
		"### The rollout question: devicesim grid -mix":    "grid -mix",
		"## The engines side by side: devicesim calibrate": "calibrate",
		"## A policy's delays: devicesim delays":           "delays",
		"## Shards into one report: devicesim merge":       "merge",
	}},
	"docs/verdict.md":      {cmd: "run", sections: map[string]string{"## Judging a broker's log": "judge"}},
	"docs/plan.md":         {cmd: "plan"},
	"docs/large-fleets.md": {cmd: "run", sections: map[string]string{"### From one machine to a cluster": "deploy"}},
	"docs/storm.md":        {cmd: "run"},
	"docs/measurements.md": {cmd: "run", sections: map[string]string{"### The policy grid": "grid"}},
	"docs/proxy.md":        {cmd: "proxy"},
}

// flagsOf is the flag set a command builds, every flag defined, read as
// its help is asked for: nothing runs.
func flagsOf(t *testing.T, args []string) *flag.FlagSet {
	t.Helper()
	var got *flag.FlagSet
	testHookHelp = func(set *flag.FlagSet) { got = set }
	defer func() { testHookHelp = nil }()
	helpOf(t, args)
	require.NotNil(t, got, "%v -h printed no flag set", args)
	return got
}

// anyCommand's flags are read before the command: -h, and -cpuprofile.
var anyCommand = map[string]bool{"h": true, "help": true, "cpuprofile": true}

// internalFlag is a flag devicesim passes to itself; no doc names it.
func internalFlag(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, "internal") }

// A doc and the help agree on every command's flags: each flag a command
// takes is named, as `-flag`, in its own sections of its own doc, and each
// `-flag` a doc names for a command is one the command takes.
func TestEveryFlagIsDocumentedAndEveryDocumentedFlagExists(t *testing.T) {
	mentions := readDocMentions(t)
	for _, c := range documented {
		t.Run(strings.ReplaceAll(c.name, " ", ""), func(t *testing.T) {
			set := flagsOf(t, c.args)
			home := map[string]bool{}
			for _, m := range mentions {
				if m.cmd != c.name {
					continue
				}
				if m.doc == c.home && m.home {
					home[m.flag] = true
				}
				assert.True(t, set.Lookup(m.flag) != nil || anyCommand[m.flag],
					"%s names -%s for devicesim %s, which has no such flag", m.where, m.flag, c.name)
			}
			if _, err := os.Stat(filepath.Join("..", "..", c.home)); errors.Is(err, fs.ErrNotExist) {
				t.Skipf("%s does not exist yet: devicesim %s's flags are to be documented there", c.home, c.name)
			}
			set.VisitAll(func(f *flag.Flag) {
				if !internalFlag(f) && !home[f.Name] {
					t.Errorf("devicesim %s -%s is not in %s's sections for it (%s)", c.name, f.Name, c.home, f.Usage)
				}
			})
		})
	}
}

// Every command the top-level help lists has a doc for its flags.
func TestEveryCommandHasADocForItsFlags(t *testing.T) {
	listed := regexp.MustCompile(`(?m)^  devicesim ([a-z]+)`).FindAllStringSubmatch(usage, -1)
	require.NotEmpty(t, listed)
	for _, l := range listed {
		if l[1] == "help" {
			continue
		}
		assert.True(t, slices.ContainsFunc(documented, func(c documentedCommand) bool { return c.name == l[1] }),
			"devicesim %s has no doc in documented", l[1])
	}
}

// mention is a -flag a doc names for a command.
type mention struct {
	doc, where, cmd, flag string
	// home: in a section of the command's own
	home bool
}

// readDocMentions reads the README and every doc, and checks that each
// doc and heading docLayouts names is there. A doc without a layout is
// read for its devicesim commands alone.
func readDocMentions(t *testing.T) []mention {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	docs = append(docs, filepath.Join("..", "..", "README.md"))
	var all []mention
	read := map[string]bool{}
	for _, path := range docs {
		doc := filepath.ToSlash(strings.TrimPrefix(path, filepath.Join("..", "..")+string(filepath.Separator)))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		layout := docLayouts[doc]
		ms, headings := docMentions(doc, string(b), layout)
		for h := range layout.sections {
			assert.True(t, headings[h], "%s has no heading %q", doc, h)
		}
		all = append(all, ms...)
		read[doc] = true
	}
	for doc := range docLayouts {
		// docs/proxy.md is being written: its command's test says so.
		assert.True(t, read[doc] || doc == "docs/proxy.md", "docLayouts names %s, which is not there", doc)
	}
	return all
}

var (
	heading = regexp.MustCompile(`^(#+) `)
	// devicesim CMD, after go run ./cmd/devicesim and -cpuprofile FILE too
	invocation = regexp.MustCompile(`\bdevicesim(?:\s+--?cpuprofile[=\s]\S+)?\s+(run|merge|deploy|proxy|judge|soak|calibrate|grid|plan|delays)\b`)
	// where a shell command line ends: what follows is another program's
	commandEnd = regexp.MustCompile(`&&|\|\||\s\|\s|;|\s#|\$\(`)
	flagField  = regexp.MustCompile(`^--?([a-zA-Z][a-zA-Z0-9-]*)(?:=.*|[,.:;)\]]*)$`)
	codeSpan   = regexp.MustCompile("`([^`]+)`")
)

// docMentions is every -flag the doc names in code, each with its command,
// and the doc's headings.
func docMentions(doc, text string, layout docLayout) ([]mention, map[string]bool) {
	var out []mention
	headings := map[string]bool{}
	cmds := []string{layout.cmd} // by heading level: cmds[l] is the command of the section at level l
	cmd, fenced := layout.cmd, false
	var para []string
	paraLine := 0
	flush := func() {
		text := strings.Join(para, "\n")
		for _, at := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
			line := paraLine + strings.Count(text[:at[0]], "\n")
			out = append(out, spanMentions(text[at[2]:at[3]], cmd, fmt.Sprintf("%s:%d", doc, line), false)...)
		}
		para = nil
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "```"):
			flush()
			fenced = !fenced
		case fenced:
			// A command continued on the next line is one command.
			start := i
			for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, `\`) + " " + lines[i]
			}
			out = append(out, spanMentions(line, cmd, fmt.Sprintf("%s:%d", doc, start+1), true)...)
		case heading.MatchString(line):
			flush()
			headings[line] = true
			level := len(heading.FindStringSubmatch(line)[1])
			for len(cmds) <= level {
				cmds = append(cmds, cmds[len(cmds)-1])
			}
			cmds = cmds[:level+1]
			if c, ok := layout.sections[line]; ok {
				cmds[level] = c
			} else {
				cmds[level] = cmds[level-1]
			}
			cmd = cmds[level]
		case strings.TrimSpace(line) == "":
			flush()
		default:
			if para == nil {
				paraLine = i + 1
			}
			para = append(para, line)
		}
	}
	flush()
	for i := range out {
		out[i].doc = doc
		out[i].home = out[i].home && out[i].cmd != ""
	}
	return out, headings
}

// spanMentions is the flags one code span or command line names. Those
// after `devicesim CMD` are CMD's; a span that is only flags names its
// section's command's (in a code block, only commands count); what
// another program is given is not devicesim's.
func spanMentions(span, section, where string, block bool) []mention {
	var out []mention
	add := func(s, cmd string, home bool) {
		for _, field := range strings.Fields(s) {
			if m := flagField.FindStringSubmatch(strings.TrimLeft(field, `(["'`)); m != nil {
				out = append(out, mention{where: where, cmd: cmd, flag: m[1], home: home})
			}
		}
	}
	at := invocation.FindAllStringSubmatchIndex(span, -1)
	first := len(span)
	if len(at) > 0 {
		first = at[0][0]
	}
	if fields := strings.Fields(span); !block && section != "" && len(fields) > 0 && flagField.MatchString(fields[0]) {
		add(span[:first], section, true)
	}
	for i, a := range at {
		end := len(span)
		if i+1 < len(at) {
			end = at[i+1][0]
		}
		args := span[a[1]:end]
		if e := commandEnd.FindStringIndex(args); e != nil {
			args = args[:e[0]]
		}
		cmd := span[a[2]:a[3]]
		if cmd == "grid" && slices.ContainsFunc(strings.Fields(args), func(f string) bool {
			return f == "-mix" || strings.HasPrefix(f, "-mix=")
		}) {
			cmd = "grid -mix" // as gridCmd reads it
		}
		add(args, cmd, cmd == section)
	}
	return out
}

// policySpec is a policy with parameters, as -policy takes it.
var policySpec = regexp.MustCompile(`\b[a-z-]+:(?:base|jitter|guard)=[0-9a-z.]+(?:,(?:base|jitter|guard)=[0-9a-z.]+)*`)

// names says whether text names the policy as a word of its own: iotcore,
// not iotcore-jitter-at-cap.
func names(text, policy string) bool {
	return regexp.MustCompile(`(?:^|[^a-z-])` + regexp.QuoteMeta(policy) + `(?:[^a-z-]|$)`).MatchString(text)
}

// Every policy run takes, and a spec with a base, a jitter and a guard,
// is in -policy's help and in its doc's list of policies, and every spec
// either shows is one run takes. soak's help lists the policies soak
// takes: not paho-default, which publishes no telemetry.
func TestPoliciesAndTheirSpecsAreInHelpAndDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "simulator.md"))
	require.NoError(t, err)
	list := regexp.MustCompile("(?s)Policies \\(`-policy`\\).*?\n\n").FindString(string(doc))
	require.NotEmpty(t, list, "docs/simulator.md lists the policies in a paragraph of its own")
	for where, text := range map[string]string{"devicesim run -policy's help": flagsOf(t, []string{"run"}).Lookup("policy").Usage,
		"docs/simulator.md's list of policies": list} {
		for _, name := range plan.PolicyNames() {
			assert.True(t, names(text, name), "%s does not name %s", where, name)
		}
		specs := policySpec.FindAllString(text, -1)
		for _, want := range []string{"guard=", "base=", "jitter="} {
			assert.True(t, slices.ContainsFunc(specs, func(s string) bool { return strings.Contains(s, want) }),
				"%s shows no policy spec with %s", where, want)
		}
		for _, s := range specs {
			_, err := plan.ParsePolicy(s)
			assert.NoError(t, err, "%s shows %s", where, s)
		}
	}
	soak := flagsOf(t, []string{"soak"}).Lookup("policy").Usage
	for _, name := range plan.PolicyNames() {
		assert.Equal(t, name != plan.PahoDefault, names(soak, name), "devicesim soak -policy's help names %s", name)
	}
}

// helpOf is what devicesim help prints for the command args asks for.
func helpOf(t *testing.T, args []string) string {
	t.Helper()
	var help bytes.Buffer
	require.NoError(t, run(context.Background(), append(slices.Clone(args), "-h"), noenv, nil, &help, &help), args)
	return help.String()
}

// expectList is a list of what -expect takes, as help and docs write one.
var expectList = regexp.MustCompile(`-expect[ =]([a-z]+(?:\|[a-z]+)+)`)

// Wherever help or a doc lists what -expect takes, the list is whole:
// spread, waves and inconclusive.
func TestEveryListOfWhatExpectTakesIsWhole(t *testing.T) {
	var takes []string
	for _, v := range []stormstats.Verdict{stormstats.Spread, stormstats.Waves, stormstats.Inconclusive} {
		var f expectFlag
		if f.Set(string(v)) == nil {
			takes = append(takes, string(v))
		}
	}
	require.Len(t, takes, 3)
	texts := map[string]string{"devicesim help": usage}
	for _, c := range documented {
		texts["devicesim help "+c.name] = helpOf(t, c.args)
	}
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	for _, doc := range append(docs, filepath.Join("..", "..", "README.md")) {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		texts[doc] = string(b)
	}
	lists := 0
	for where, text := range texts {
		for _, m := range expectList.FindAllStringSubmatch(text, -1) {
			lists++
			assert.Equal(t, strings.Join(takes, "|"), m[1], where)
		}
	}
	assert.Positive(t, lists, "the usage lines list what -expect takes")
	for _, cmd := range []string{"run", "judge"} {
		for _, v := range takes {
			assert.Contains(t, flagsOf(t, []string{cmd}).Lookup("expect").Usage, v, "devicesim %s -expect's help", cmd)
		}
	}
}

// flagLine is where PrintDefaults starts a flag's lines.
var flagLine = regexp.MustCompile(`^  -([a-z0-9-]+)`)

// flagHelp is each flag's lines in a command's help.
func flagHelp(help string) map[string]string {
	blocks := map[string]string{}
	name := ""
	for _, line := range strings.Split(help, "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			name = m[1]
		}
		if name != "" {
			blocks[name] += line + "\n"
		}
	}
	return blocks
}

// The defaults help prints are the ones that apply. A default that hangs
// on something else is not printed as if fixed: unset, run's time scale is
// what the host serves, the plan's 4x only its ceiling; without -policy a
// run compares -compare's. No flag prints two defaults.
func TestHelpPrintsDefaultsAsTheyApply(t *testing.T) {
	runHelp := flagHelp(helpOf(t, []string{"run"}))
	ceiling := plan.Default().TimeScale
	assert.NotContains(t, runHelp["time-scale"], fmt.Sprintf("(default %g)", ceiling))
	assert.Contains(t, runHelp["time-scale"], fmt.Sprintf("unset: what the host serves, at most %gx", ceiling))
	assert.NotContains(t, runHelp["policy"], `(default "`)
	assert.Contains(t, runHelp["policy"], "unset: each of -compare's")
	assert.Contains(t, runHelp["compare"], "-policy alone: that one policy")
	assert.NotContains(t, flagHelp(helpOf(t, []string{"grid", "-mix", "fleet-safe"}))["mix"], "(default",
		"grid -mix names its policy: no default applies")
	for _, c := range documented {
		for name, lines := range flagHelp(helpOf(t, c.args)) {
			assert.LessOrEqual(t, strings.Count(lines, "(default"), 1, "devicesim %s -%s: %s", c.name, name, lines)
		}
	}
}

// grid -mix prints its table once: its header, a row a share as each is
// run, and the answer.
func TestMixPrintsItsTableOnce(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"grid", "-mix", "fleet-safe", "-devices", "200", "-shares", "0,0.5,1",
		"-out", t.TempDir()}, noenv, nil, &out, &out))
	text := out.String()
	header, columns := strings.Index(text, "200 devices moving from iotcore to fleet-safe"), strings.Index(text, "  share  verdict")
	rows := regexp.MustCompile(`(?m)^ +\d+ %  `).FindAllStringIndex(text, -1)
	answer := strings.Index(text, "the smallest share on fleet-safe that passes")
	assert.Equal(t, 1, strings.Count(text, "devices moving from"), text)
	assert.Equal(t, 1, strings.Count(text, "  share  verdict"), text)
	require.Len(t, rows, 3, text)
	assert.Equal(t, 1, strings.Count(text, "that passes"), text)
	assert.True(t, header < columns && columns < rows[0][0] && rows[2][0] < answer, text)
}
