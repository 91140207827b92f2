package endpoint

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Redirect makes a Server Reference into the URL of the next attempt, from
// the endpoint from, given the configured endpoints and the domains a
// broker may send the device under. A reference is "host", "host:port",
// or a URL of no more than those. Of a space-separated list, the first
// counts. The host must be a configured endpoint's, or a name of letters,
// digits and hyphens under one of the agent's redirect domains: no IP
// address but an endpoint's, no IPv6 zone, nothing a resolver would read
// other than as the name checked. A port, if named,
// must be one of the endpoints'; otherwise the current endpoint's is kept,
// as is its scheme. The URL is built from the parts checked, so what is
// dialled is what was checked. Otherwise Redirect returns nil and why not.
func Redirect(ref string, from *url.URL, endpoints []*url.URL, domains []string) (*url.URL, string) {
	first, _, _ := strings.Cut(strings.TrimSpace(ref), " ")
	scheme, rest, hasScheme := strings.Cut(first, "://")
	if !hasScheme {
		scheme, rest = "", first
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" || strings.ContainsAny(rest, "/?#@\\") {
		return nil, "not a host, host:port or URL"
	}
	if scheme != "" && IsTLS(scheme) != IsTLS(from.Scheme) {
		return nil, fmt.Sprintf("it is %s and the endpoint is %s: a redirect must not change the transport's security",
			Security(&url.URL{Scheme: scheme}), Security(from))
	}
	host, port := rest, ""
	if h, p, err := net.SplitHostPort(rest); err == nil && p != "" {
		host, port = h, p
	} else if strings.Contains(rest, ":") {
		return nil, "not a host, host:port or URL"
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if port != "" && !anEndpointsPort(endpoints, port) {
		return nil, fmt.Sprintf("port %s is not an endpoint's", port)
	}
	if port == "" {
		port = endpointPort(from)
	}
	if why := redirectHost(host, endpoints, domains); why != "" {
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
// one of the redirect domains.
func redirectHost(host string, endpoints []*url.URL, domains []string) string {
	for _, u := range endpoints {
		if strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), host) {
			return ""
		}
	}
	if !HostName(host) {
		return "not a host name of letters, digits and hyphens, nor a host of Broker or Failover"
	}
	for _, d := range domains {
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		if host == d || strings.HasSuffix(host, "."+d) {
			return ""
		}
	}
	return "not a host of Broker or Failover, nor under Redirects.Domains"
}

// anEndpointsPort says whether port is one of the configured endpoints',
// written as a port is (no sign, no leading zero).
func anEndpointsPort(endpoints []*url.URL, port string) bool {
	for _, u := range endpoints {
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
	return DefaultPort(u.Scheme)
}

// HostName says whether s is a DNS host name of letters, digits and
// hyphens (RFC 1123): dot-separated labels of 1 to 63 characters, none
// starting or ending with a hyphen, 253 characters in all, and not all
// digits at the end, so that no resolver reads it as an address.
func HostName(s string) bool {
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
