package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/remoteconfig"
)

// configFlags names, for each device.Config field a refusal of New can
// name, what sets it here: a user of the command has flags, not Go fields.
// A field the command never sets has no flag: it is named in words, as
// built in.
var configFlags = map[string]string{
	"Broker":                     "-broker",
	"Failover":                   "-failover",
	"ClientID":                   "-client-id",
	"Credentials.Username":       "-username",
	"Credentials.Password":       "HERDGUARD_PASSWORD (or -password-file)",
	"Credentials.AllowPlaintext": "-allow-plaintext",
	"TLS":                        "-ca, -cert and -key",
	"Incoming.MaxPacket":         "-max-packet",
	"KeepAlive":                  "-keepalive",
	"PingTimeout":                "-ping-timeout",
	"Protocol":                   "-mqtt-version",
	"Redirects.Domains":          "-redirect-domains",
	"Dial":                       "only a Go program's own dialer",
}

// flagOf is what sets a device.Config field here, for ConfigError.Rename:
// "-failover URL 2" for "Failover[1]".
func flagOf(field string) string {
	name, index, listed := strings.Cut(field, "[")
	flag, ok := configFlags[name]
	if !ok {
		return "the agent's built-in " + inWords(name)
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(index, "]")); listed && err == nil {
		return fmt.Sprintf("%s URL %d", flag, n+1)
	}
	return flag
}

// inWords spells a Go name in lower-case words: "connect timeout", and
// "incoming queue" for Incoming.Queue.
func inWords(name string) string {
	var b strings.Builder
	for i, r := range strings.ReplaceAll(name, ".", "") {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// fetcherFlags are what sets the fields remoteconfig.New's refusals name.
// remoteconfig's errors carry no field of their own: its text is mapped.
var fetcherFlags = strings.NewReplacer(
	"Config.URL", "-config-url",
	"set AllowPlaintext", "set -allow-plaintext",
	"Config.TLS", "-ca, -cert and -key",
)

// flagError is a library's refusal of the Config the command made, said
// with the command's flags. It wraps the refusal, for errors.Is.
type flagError struct {
	msg string
	err error
}

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return e.err }

// namingFlags says err, a refusal of device.New or remoteconfig.New, with
// the flags that set what it names. Any other error is returned as it is.
func namingFlags(err error) error {
	var ce *device.ConfigError
	switch {
	case errors.As(err, &ce):
		return &flagError{ce.Rename(flagOf), err}
	case errors.Is(err, remoteconfig.ErrInvalid):
		msg := strings.TrimPrefix(err.Error(), remoteconfig.ErrInvalid.Error()+": ")
		return &flagError{fetcherFlags.Replace(msg), err}
	}
	return err
}
