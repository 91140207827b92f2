package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/testbroker"
)

// Secrets a run is given; none may appear in anything the agent writes.
var secrets = []string{"pw-SECRET-env", "pw-SECRET-file", "pw-SECRET-flag", "url-SECRET-pass", "cfg-SECRET-token"}

func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range secrets {
		assert.NotContains(t, text, s, "%s shows a secret", what)
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Usage text and errors, whatever the environment holds.
func TestUsageAndErrorsShowNoSecret(t *testing.T) {
	hostile := map[string]string{
		"HERDGUARD_PASSWORD":   "pw-SECRET-env",
		"HERDGUARD_BROKER":     "ssl://dev:url-SECRET-pass@broker.example:8883",
		"HERDGUARD_CONFIG_URL": "https://cfg.example/config/d?token=cfg-SECRET-token",
		"HERDGUARD_CLIENT_ID":  "d",
	}
	for name, c := range map[string]struct {
		args  []string
		unset string // a variable of the hostile environment left out
		want  string // what the error says
	}{
		"usage":                   {[]string{"-h"}, "", ""},
		"an unknown flag":         {[]string{"-nope"}, "", "-nope"},
		"a bad duration":          {[]string{"-heartbeat", "soon"}, "", "-heartbeat"},
		"the password as flag":    {[]string{"-password", "pw-SECRET-flag"}, "", "HERDGUARD_PASSWORD"},
		"the password as flag=":   {[]string{"--password=pw-SECRET-flag"}, "", "-password-file"},
		"credentials twice":       {nil, "", "credentials both"},
		"plaintext broker":        {nil, "HERDGUARD_PASSWORD", "not TLS"},
		"a password in -broker":   {[]string{"-broker", "ssl://dev:url-SECRET-pass@broker.example:8883"}, "", "-broker has an '@'"},
		"a password in -failover": {[]string{"-failover", "ssl://dev:url-SECRET-pass@other:8883"}, "", "-failover has an '@'"},
		"unparsable broker URL":   {[]string{"-broker", "ssl://dev:url-SECRET-pass@bro ker:8883"}, "", "may carry a password"},
		// Spellings that split or parse into no user info, the password
		// elsewhere: after a comma, before a slash, escaped.
		"a comma in the password": {[]string{"-failover", "ssl://u:zz,url-SECRET-pass@other:8883"}, "", "-failover has an '@'"},
		"a slash in the password": {[]string{"-broker", "ssl://u:1234/url-SECRET-pass@broker:8883"}, "", "-broker has an '@'"},
		"an escaped at":           {[]string{"-broker", "ssl://u:url-SECRET-pass%40broker:8883"}, "", "-broker has an '@'"},
		"a password in a query":   {[]string{"-broker", "ssl://broker:8883/?u=dev@x&p=url-SECRET-pass"}, "", "-broker has an '@'"},
		"a URL without a scheme":  {[]string{"-broker", "url-SECRET-pass@broker:8883"}, "", "-broker has an '@'"},
		"mixed failover":          {[]string{"-failover", "tcp://other:1883"}, "HERDGUARD_PASSWORD", "must not change the transport"},
		"plain http config":       {[]string{"-broker", "ssl://b:8883"}, "", "plain http"},
		"both password sources":   {[]string{"-password-file", "/nonexistent"}, "", "both set"},
		"an open password file":   {[]string{"-password-file", "OPEN"}, "HERDGUARD_PASSWORD", "is mode 0644"},
		"a password directory":    {[]string{"-password-file", "DIR"}, "HERDGUARD_PASSWORD", "not a regular file"},

		// A credential in -config-url, in any of its places: user info
		// (escaped or not) or a query, whatever its name.
		"a token in -config-url":     {[]string{"-config-url", "https://cfg.example/config/d?token=cfg-SECRET-token"}, "", "-config-url has a query string"},
		"a signature in -config-url": {[]string{"--config-url=https://cfg.example/d?X-Amz-Signature=cfg-SECRET-token"}, "", "HERDGUARD_CONFIG_URL"},
		"a password in -config-url":  {[]string{"-config-url", "https://dev:cfg-SECRET-token@cfg.example/config/d"}, "", "-config-url has an '@'"},
		"an escaped at in -config-url": {[]string{"-config-url", "https://dev:cfg-SECRET-token%40cfg.example/config/d"}, "",
			"-config-url has an '@'"},
	} {
		t.Run(name, func(t *testing.T) {
			env := maps.Clone(hostile)
			delete(env, c.unset)
			for i, a := range c.args {
				switch a {
				case "OPEN": // a password file anyone may read
					c.args[i] = filepath.Join(t.TempDir(), "password")
					require.NoError(t, os.WriteFile(c.args[i], []byte("pw-SECRET-file\n"), 0o600))
					require.NoError(t, os.Chmod(c.args[i], 0o644))
				case "DIR":
					c.args[i] = t.TempDir()
				}
			}
			switch name {
			case "plain http config":
				env["HERDGUARD_CONFIG_URL"] = "http://cfg.example/c?token=cfg-SECRET-token"
			case "plaintext broker": // from the environment, which ps does not show
				env["HERDGUARD_BROKER"] = "tcp://dev:url-SECRET-pass@broker.example:1883"
			}
			var out bytes.Buffer
			err := run(context.Background(), c.args, envOf(env), &out)
			assertNoSecret(t, "output", out.String())
			if c.want == "" {
				require.NoError(t, err)
				assert.Contains(t, out.String(), "-password-file")
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assertNoSecret(t, "the error", err.Error())
		})
	}
}

// A real run over TLS with every kind of secret, logged at debug: the
// password from the environment or a file, credentials in the broker URL,
// a token in the config URL. Nothing it logs shows one.
func TestRunLogsNoSecret(t *testing.T) {
	b, err := testbroker.New(testbroker.Config{Transport: testbroker.TLS})
	require.NoError(t, err)
	defer b.Close()
	dir := t.TempDir()
	files, err := b.WriteClientFiles(dir, "dev-s")
	require.NoError(t, err)
	pwFile := filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(pwFile, []byte("pw-SECRET-file\n"), 0o600))
	cs := configserver.NewServer() // answers 404 for this device: the round fails and is logged
	defer cs.Close()
	withCreds := strings.Replace(b.URL(), "ssl://", "ssl://dev:url-SECRET-pass@", 1)

	for name, c := range map[string]struct {
		args []string
		env  map[string]string
		from string // where the log says the credentials came from
	}{
		"password from the environment": {[]string{"-broker", b.URL(), "-username", "dev"},
			map[string]string{"HERDGUARD_PASSWORD": "pw-SECRET-env"}, "username_from=-username password_from=HERDGUARD_PASSWORD"},
		"password from a file": {[]string{"-broker", b.URL(), "-password-file", pwFile}, map[string]string{"HERDGUARD_USERNAME": "dev"},
			`username_from=HERDGUARD_USERNAME password_from="-password-file ` + pwFile + `"`},
		"credentials in the URL": {nil, map[string]string{"HERDGUARD_BROKER": withCreds},
			"username_from=HERDGUARD_BROKER password_from=HERDGUARD_BROKER"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"-client-id", "dev-s", "-ca", files.CA, "-heartbeat", "20ms", "-boot-spread", "1ms",
				"-log-level", "debug", "-allow-plaintext"}, c.args...) // for the config server's plain http
			env := maps.Clone(c.env) // a token in the config URL: only the environment may hold one
			env["HERDGUARD_CONFIG_URL"] = cs.DeviceURL("dev-s") + "?token=cfg-SECRET-token"
			ctx, stop := context.WithCancel(context.Background())
			logs := &syncBuffer{}
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, envOf(env), logs) }()
			logs.await(t, "connected")
			logs.await(t, "config round failed")
			stop()
			require.NoError(t, <-done)
			assert.Contains(t, logs.String(), "tls=true", "the endpoint's TLS is logged")
			assert.Contains(t, logs.String(), c.from)
			assertNoSecret(t, "the log", logs.String())
		})
	}
}
