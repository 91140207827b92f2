package main

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goFields matches what names a Go field rather than a flag: Config.X, or
// a field of device.Config's or remoteconfig.Config's by its own name.
var goFields = regexp.MustCompile(`Config\.|\b(AllowPlaintext|Credentials|ClientID|MaxPacket|Incoming|Redirects|Domains|KeepAlive|` +
	`PingTimeout|Broker|Failover|Username|Password|Protocol|Dial)\b`)

// What device.New and remoteconfig.New refuse of the Config the command
// made from its flags, the command says with its flags.
func TestLibraryFlagErrorsNameFlagsNotFields(t *testing.T) {
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"a password over plaintext": {[]string{"-broker", "tcp://localhost:1883", "-client-id", "a"},
			map[string]string{"HERDGUARD_PASSWORD": "pw"}, "use TLS, or set -allow-plaintext"},
		"a redirect domain that is an address": {[]string{"-broker", "tcp://b:1883", "-client-id", "a", "-redirect-domains", "10.0.0.1"},
			nil, `-redirect-domains entry "10.0.0.1" is not a domain name`},
		"a scheme the agent does not dial": {[]string{"-broker", "carrier://b", "-client-id", "a"}, nil, `-broker scheme "carrier"`},
		"a broker without a host":          {[]string{"-broker", "tcp:///b", "-client-id", "a"}, nil, "-broker has no host"},
		"a plaintext failover": {[]string{"-broker", "ssl://b:8883", "-client-id", "a", "-failover", "ssl://c:8883,tcp://d:1883"}, nil,
			"-failover URL 2 is plaintext while -broker is TLS"},
		"credentials in a failover": {[]string{"-broker", "ssl://b:8883", "-client-id", "a"},
			map[string]string{"HERDGUARD_FAILOVER": "ssl://u:p@c:8883"},
			"-failover URL 1 carries credentials: set -username and HERDGUARD_PASSWORD (or -password-file)"},
		"credentials twice": {[]string{"-client-id", "a", "-username", "v"}, map[string]string{"HERDGUARD_BROKER": "ssl://u:p@b:8883"},
			"credentials both in -broker and in -username or HERDGUARD_PASSWORD"},
		"a packet bound below MQTT's least": {[]string{"-broker", "tcp://b:1883", "-client-id", "a", "-max-packet", "10"}, nil,
			"-max-packet: want a size from 64"},
		"a plain http config URL": {[]string{"-broker", "tcp://b:1883", "-client-id", "a", "-config-url", "http://cfg/d"}, nil,
			"-config-url http://cfg/d is plain http: anyone on the path could rewrite the device's settings; use https, or set -allow-plaintext"},
		"a config URL of another scheme": {[]string{"-broker", "tcp://b:1883", "-client-id", "a", "-config-url", "ftp://cfg/d"}, nil,
			`-config-url scheme "ftp"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), c.args, envOf(c.env), &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Empty(t, goFields.FindAllString(err.Error(), -1), "%v", err)
		})
	}
}

// In a build without MQTT 5 (-tags nomqtt5) -mqtt-version 5 is refused,
// naming the flag; with it, the agent is made.
func TestMQTTVersionRefusalNamesTheFlag(t *testing.T) {
	o, err := parse([]string{"-broker", "tcp://b:1883", "-client-id", "a", "-mqtt-version", "5"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	_, _, err = newAgent(o, slog.New(slog.DiscardHandler))
	if err != nil {
		assert.Contains(t, err.Error(), "-mqtt-version is MQTT 5, and this firmware was built without it (nomqtt5)")
		assert.Empty(t, goFields.FindAllString(err.Error(), -1), "%v", err)
	}
}
