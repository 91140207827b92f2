package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/mosquittotest"
	"github.com/herdguard/herdguard/testbroker"
)

// docSection returns the section of docs/agent.md whose heading starts
// with heading.
func docSection(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "agent.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(doc), "\n## "+heading)
	require.True(t, found, "docs/agent.md has no section %q", heading)
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// docBlock returns the body of the first fenced block of lang in the
// section of docs/agent.md whose heading starts with heading.
func docBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	_, block, found := strings.Cut(docSection(t, heading), "\n```"+lang+"\n")
	require.True(t, found, "section %q has no %s block", heading, lang)
	block, _, _ = strings.Cut(block, "\n```")
	return block
}

// commandLine finds the line of block that starts with prefix, its
// continuations (a trailing backslash) joined, and splits it into words as
// a shell would: single quotes keep spaces. The environment the block
// exports is returned too.
func commandLine(t *testing.T, block, prefix string) (words []string, env map[string]string) {
	t.Helper()
	env = map[string]string{}
	lines := strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n")
	var line string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "export "); ok {
			name, value, _ := strings.Cut(v, "=")
			env[name] = strings.Trim(value, "'")
		}
		if strings.HasPrefix(l, prefix) {
			line = l
		}
	}
	require.NotEmpty(t, line, "no line starts with %q in\n%s", prefix, block)
	quoted := false
	for _, f := range strings.FieldsFunc(line, func(r rune) bool {
		if r == '\'' {
			quoted = !quoted
		}
		return r == ' ' && !quoted
	}) {
		words = append(words, strings.Trim(f, "'"))
	}
	return words, env
}

// setFlag sets the value of flag in args, which must have it.
func setFlag(t *testing.T, args []string, flag, value string) {
	t.Helper()
	for i := range args[:len(args)-1] {
		if args[i] == flag {
			args[i+1] = value
			return
		}
	}
	t.Fatalf("the command line has no %s: %q", flag, args)
}

// parsesAsTheAgents checks that args are the agent's flags, every one.
func parsesAsTheAgents(t *testing.T, args []string) {
	t.Helper()
	fs := (&options{}).flagSet(io.Discard)
	require.NoError(t, fs.Parse(args), "%q", args)
	assert.Zero(t, fs.NArg(), "words the flags did not take: %q", fs.Args())
}

// The lab command line of docs/agent.md, run as written against a real
// broker on the address it names, until the agent says it is connected;
// then stopped. It logs nothing at warn or error, and stops with no error.
// Only its boot spread is shortened, through the environment, which a
// flag would win over.
func TestTheDocsLabCommandConnects(t *testing.T) {
	words, _ := commandLine(t, docBlock(t, "Start it against a lab broker", "sh"), "deviceagent ")
	args := words[1:]
	parsesAsTheAgents(t, args)
	require.Contains(t, args, "tcp://localhost:1883")
	brokers := map[string]func(t *testing.T) string{
		"testbroker": func(t *testing.T) string {
			b, err := testbroker.New(testbroker.Config{})
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return b.URL()
		},
		"mosquitto": func(t *testing.T) string {
			if runtime.GOARCH == "arm" {
				t.Skip("mosquitto is a host process: make test runs this natively (qemu-user's fork can hang)")
			}
			return mosquittotest.Start(t, "").URL()
		},
	}
	for name, broker := range brokers {
		t.Run(name, func(t *testing.T) {
			url := broker(t)
			args := append([]string(nil), args...)
			setFlag(t, args, "-broker", url)
			ctx, stop := context.WithCancel(context.Background())
			logs := &syncBuffer{}
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, envOf(map[string]string{"HERDGUARD_BOOT_SPREAD": "1ms"}), logs) }()
			logs.await(t, "msg=connected")
			stop()
			require.NoError(t, <-done)
			assert.NotRegexp(t, "level=(WARN|ERROR)", logs.String())
		})
	}
}

// The TLS command line of docs/agent.md: its flags are the agent's; as
// written, on a host without its files, it is refused before it connects
// with an error naming the flag of a missing file; given the files (the
// test broker's CA and a certificate it issued, a password file, a data
// directory), against a TLS broker that wants the certificate, it connects.
func TestTheDocsTLSCommandConnects(t *testing.T) {
	words, env := commandLine(t, docBlock(t, "Start it on a device", "sh"), "deviceagent ")
	args := words[1:]
	parsesAsTheAgents(t, args)
	require.Contains(t, env, "HERDGUARD_CONFIG_URL")

	_, err := parse(args, envOf(env), io.Discard)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Skipf("this host has the files the docs name (%v)", err)
	}
	assert.Regexp(t, `^-(password-file|ca|cert|key): open /etc/herdguard/`, err.Error())
	assert.Contains(t, strings.Join(strings.Fields(docSection(t, "Start it on a device")), " "), "`deviceagent: "+err.Error()+"`",
		"the docs quote the error")

	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TLS, MutualTLS: true})
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	files, err := b.WriteClientFiles(dir, "sensor-42")
	require.NoError(t, err)
	password := filepath.Join(dir, "mqtt-password")
	require.NoError(t, os.WriteFile(password, []byte("pw\n"), 0o600))
	for flag, value := range map[string]string{"-broker": b.URL(), "-ca": files.CA, "-cert": files.Cert, "-key": files.Key,
		"-password-file": password, "-data-dir": filepath.Join(dir, "data")} {
		setFlag(t, args, flag, value)
	}
	// The configuration server it names is not there: the run leaves it out.
	env = map[string]string{"HERDGUARD_BOOT_SPREAD": "1ms"}
	ctx, stop := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, envOf(env), logs) }()
	logs.await(t, "msg=connected")
	stop()
	require.NoError(t, <-done)
	assert.Contains(t, logs.String(), "client_certificate=true")
	assert.Contains(t, logs.String(), `password_from="-password-file `+password)
	assert.Contains(t, logs.String(), "tls=true")
}

// The systemd unit of docs/agent.md starts the agent with its flags and
// nothing else, keeps the data directory it names writable and the
// secrets out of the command line, and restarts it after minutes.
func TestTheDocsSystemdUnitUsesTheAgentsFlags(t *testing.T) {
	unit := docBlock(t, "Run it under systemd", "ini")
	words, _ := commandLine(t, unit, "ExecStart=")
	require.Equal(t, "ExecStart=/usr/local/bin/deviceagent", words[0])
	args := words[1:]
	parsesAsTheAgents(t, args)
	o, err := parse(args, noEnv, io.Discard) // the files are the device's: loaded later
	require.NoError(t, err)
	assert.NotContains(t, args, "-password-file", "the password comes from EnvironmentFile")
	// A service ignores RandomizedDelaySec (a timer's): the jitter of a
	// restart is the boot spread's.
	assert.Equal(t, 2*time.Minute, o.bootSpread)
	service, _, _ := strings.Cut(unit, "\n[Install]")
	for _, line := range []string{"Restart=on-failure", "RestartSec=5min", "User=herdguard", "EnvironmentFile=/etc/herdguard/agent.env",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes", "ReadWritePaths=" + o.dataDir, "StateDirectory=herdguard"} {
		assert.Contains(t, strings.Split(service, "\n"), line)
	}
	assert.NotContains(t, service, "RandomizedDelaySec")
}
