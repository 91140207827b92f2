package device

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/herdguard/herdguard/device/internal/transport"
)

// followRedirect sends the next attempt to the server an MQTT 5 broker
// named with 0x9C (use another server) or 0x9D (server moved). It does so
// if err carries one and the Config allows it. It reports whether it did. A
// reference the Config does not allow is refused. So is one past
// MaxRedirects in a row without a session. A refusal makes an event and a
// log line. The next attempt then goes where it would have gone. The wait
// before it is the policy's either way: a redirect never makes the device
// retry sooner.
func (a *Agent) followRedirect(err error) bool {
	code, ref := 0, ""
	var ce *ConnackError
	var de *DisconnectError
	switch {
	case errors.As(err, &ce):
		code, ref = ce.Code, ce.Reference
	case errors.As(err, &de):
		code, ref = de.Code, de.Reference
	}
	if code != CodeUseAnotherServer && code != CodeServerMoved || a.cfg.Timing.IgnoreServerSignals {
		return false
	}
	refuse := func(why string) bool {
		err := fmt.Errorf("device: redirect to %q refused: %s", ref, why)
		a.emit(Event{Kind: EventRedirectRefused, Code: code, Err: err})
		a.log.Warn("redirect refused", "code", code, "reference", ref, "why", why)
		return false
	}
	switch {
	case ref == "":
		return refuse("the broker named no server")
	case a.hops >= a.cfg.MaxRedirects:
		return refuse(fmt.Sprintf("%d redirects in a row without a session (MaxRedirects)", a.hops))
	}
	u, why := a.referenceURL(ref)
	if u == nil {
		return refuse(why)
	}
	a.hops++
	a.redirected.Store(u)
	a.emit(Event{Kind: EventRedirected, Code: code, Endpoint: u.Redacted()})
	a.log.Info("redirected", "code", code, "to", u.Redacted())
	return true
}

// referenceURL makes a Server Reference into the URL of the next attempt. A
// reference is "host", "host:port", or a URL of no more than those. Of a
// space-separated list, the first counts. The host must be a configured
// endpoint's, or a name of letters, digits and hyphens under one of
// RedirectDomains: no IP address but an endpoint's, no IPv6 zone, nothing
// a resolver would read other than as the name checked. A port, if named,
// must be one of the endpoints'; otherwise the current endpoint's is kept,
// as is its scheme. The URL is built from the parts checked, so what is
// dialled is what was checked. Otherwise referenceURL returns nil and why
// not.
func (a *Agent) referenceURL(ref string) (*url.URL, string) {
	from := a.target()
	first, _, _ := strings.Cut(strings.TrimSpace(ref), " ")
	scheme, rest, hasScheme := strings.Cut(first, "://")
	if !hasScheme {
		scheme, rest = "", first
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" || strings.ContainsAny(rest, "/?#@\\") {
		return nil, "not a host, host:port or URL"
	}
	if scheme != "" && tlsScheme(scheme) != tlsScheme(from.Scheme) {
		return nil, fmt.Sprintf("it is %s and the endpoint is %s: a redirect must not change the transport's security",
			security(&url.URL{Scheme: scheme}), security(from))
	}
	host, port := rest, ""
	if h, p, err := net.SplitHostPort(rest); err == nil && p != "" {
		host, port = h, p
	} else if strings.Contains(rest, ":") {
		return nil, "not a host, host:port or URL"
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if port != "" && !a.endpointPort(port) {
		return nil, fmt.Sprintf("port %s is not an endpoint's", port)
	}
	if port == "" {
		port = endpointPort(from)
	}
	if why := a.redirectHost(host); why != "" {
		return nil, why
	}
	u := &url.URL{Scheme: from.Scheme, Host: host}
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	}
	return u, ""
}

// redirectHost says why a broker may not send the device to host, or ""
// if it may: a host of the configured endpoints, or a name in (or under)
// one of RedirectDomains.
func (a *Agent) redirectHost(host string) string {
	for _, u := range a.endpoints {
		if strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), host) {
			return ""
		}
	}
	if !hostName(host) {
		return "not a host name of letters, digits and hyphens, nor a host of Broker or Failover"
	}
	for _, d := range a.cfg.RedirectDomains {
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		if host == d || strings.HasSuffix(host, "."+d) {
			return ""
		}
	}
	return "not a host of Broker or Failover, nor in RedirectDomains"
}

// endpointPort says whether port is one of the configured endpoints',
// written as a port is (no sign, no leading zero).
func (a *Agent) endpointPort(port string) bool {
	for _, u := range a.endpoints {
		if endpointPort(u) == port {
			return true
		}
	}
	return false
}

// endpointPort is the port an endpoint is dialled on: its own, or its
// scheme's.
func endpointPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return transport.DefaultPort(u.Scheme)
}

// hostName says whether s is a DNS host name of letters, digits and
// hyphens (RFC 1123): dot-separated labels of 1 to 63 characters, none
// starting or ending with a hyphen, 253 characters in all, and not all
// digits at the end, so that no resolver reads it as an address.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}
