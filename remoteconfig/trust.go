package remoteconfig

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/herdguard/herdguard/internal/endpoint"
)

// redirectPolicy follows a redirect only to https on the URL's own host and
// port. With plaintext allowed, it also follows one to the URL's own
// scheme. A configuration is thus taken only from the server the device was
// pointed at.
func redirectPolicy(origin *url.URL, allowPlaintext bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		to := req.URL
		switch {
		case len(via) >= 10:
			return fmt.Errorf("%w: more than 10 redirects", ErrRedirectRefused)
		case to.Scheme != "https" && !(allowPlaintext && to.Scheme == origin.Scheme):
			return fmt.Errorf("%w: to %s, which is not https", ErrRedirectRefused, redactQuery(to))
		case !sameHost(to, origin):
			return fmt.Errorf("%w: to %s, another host or port than %s:%s", ErrRedirectRefused, redactQuery(to), origin.Hostname(), defaultPort(origin))
		}
		return nil
	}
}

// sameHost compares host and port, a missing port being the scheme's own;
// an upgrade from http on its default port to https on its own is the
// same host.
func sameHost(to, from *url.URL) bool {
	if !strings.EqualFold(to.Hostname(), from.Hostname()) {
		return false
	}
	if from.Scheme == "http" && to.Scheme == "https" && defaultPort(from) == "80" && defaultPort(to) == "443" {
		return true
	}
	return defaultPort(to) == defaultPort(from)
}

// defaultPort is u's port, or its scheme's when it names none.
func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return map[string]string{"http": "80", "https": "443"}[u.Scheme]
}

// redactQuery shows a URL without its credentials or query, either of
// which may carry a device's token.
func redactQuery(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

// strictClient returns c, or a copy of it whose transport speaks TLS 1.2
// or later, when c's *http.Transport allowed less; it refuses one that
// skips verifying the server. Another RoundTripper cannot be looked into:
// checkConnection refuses its weak connections as they answer.
func strictClient(c *http.Client) (*http.Client, error) {
	if c == nil {
		return nil, nil
	}
	tr, ok := c.Transport.(*http.Transport)
	if !ok || tr.TLSClientConfig == nil {
		return c, nil // http.DefaultTransport's TLS, or a RoundTripper's own
	}
	cfg, err := endpoint.StrictTLS("Config.Client's TLS", tr.TLSClientConfig)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if cfg == tr.TLSClientConfig {
		return c, nil
	}
	tr = tr.Clone()
	tr.TLSClientConfig = cfg
	copied := *c
	copied.Transport = tr
	return &copied, nil
}

// checkConnection refuses an answer that came over TLS older than 1.2, or
// from a server that was not verified. It also refuses an answer with no
// TLS state at all when the URL is https. A redirect from such a URL goes
// only to https, so a RoundTripper must be hiding the TLS state. The
// request has gone out by then. The check keeps what came back from being
// used. A RoundTripper that weakens TLS should not be given a URL with a
// token.
func checkConnection(cs *tls.ConnectionState, https bool) error {
	switch {
	case cs == nil && https:
		return fmt.Errorf("%w: an https answer without TLS state", ErrWeakTLS)
	case cs == nil:
		return nil // plain http, which New allowed
	case cs.Version < tls.VersionTLS12:
		return fmt.Errorf("%w: the config server spoke %s", ErrWeakTLS, tls.VersionName(cs.Version))
	case len(cs.VerifiedChains) == 0:
		return fmt.Errorf("%w: the config server's certificate was not verified", ErrWeakTLS)
	}
	return nil
}
