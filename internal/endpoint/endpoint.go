// Package endpoint holds the rules the firmware holds every server to,
// the broker and the config server alike. A server needs a URL with a
// host, and errors about the URL never quote it. It needs TLS 1.2 or
// later with the server verified.
//
// Its errors carry no sentinel: the public package that calls it wraps
// its own ErrInvalid around them.
package endpoint

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ParseURL parses the URL in field. Its error never quotes the URL, which
// may hold a password.
func ParseURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		detail := ""
		var ue *url.Error
		// quoted parts echo the input
		if errors.As(err, &ue) && !strings.Contains(ue.Err.Error(), `"`) {
			detail = ": " + ue.Err.Error()
		}
		return nil, fmt.Errorf("%s is not a valid URL%s", field, detail)
	}
	if u.Host == "" {
		// What it has instead might be a secret.
		return nil, fmt.Errorf("%s has no host: write it as scheme://host:port", field)
	}
	return u, nil
}

// StrictTLS returns cfg with TLS 1.2 as its floor: cfg itself if it has
// it, else a clone raised to it. The caller's config is not changed. It
// refuses a config that skips verifying the server. It refuses one that
// caps the version below 1.2: TLS 1.0 and 1.1 have no cipher a device
// should send a password over.
func StrictTLS(field string, cfg *tls.Config) (*tls.Config, error) {
	switch {
	case cfg == nil:
		return nil, nil
	case cfg.InsecureSkipVerify:
		return nil, fmt.Errorf("%s skips verifying the server: anyone on the path could stand in for it", field)
	case cfg.MaxVersion != 0 && cfg.MaxVersion < tls.VersionTLS12:
		return nil, fmt.Errorf("%s allows nothing above %s: the firmware speaks TLS 1.2 and up", field, tls.VersionName(cfg.MaxVersion))
	case cfg.MinVersion >= tls.VersionTLS12:
		return cfg, nil
	}
	raised := cfg.Clone()
	raised.MinVersion = tls.VersionTLS12
	return raised, nil
}

// DefaultPort is the port of a broker URL's scheme when it names none:
// 1883 for tcp and mqtt, 8883 for the TLS schemes, "" for any other.
func DefaultPort(scheme string) string {
	switch {
	case scheme == "tcp" || scheme == "mqtt":
		return "1883"
	case IsTLS(scheme):
		return "8883"
	}
	return ""
}

// IsTLS says whether a broker URL's scheme is TLS: ssl, tls, mqtts, tcps.
func IsTLS(scheme string) bool {
	switch scheme {
	case "ssl", "tls", "mqtts", "tcps":
		return true
	}
	return false
}

// Security names a URL's transport's security, for messages.
func Security(u *url.URL) string {
	if IsTLS(u.Scheme) {
		return "TLS"
	}
	return "plaintext"
}
