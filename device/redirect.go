package device

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
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
// reference is "host", "host:port", or a URL. Of a space-separated list,
// the first counts. The URL keeps the current endpoint's scheme, and its
// port unless the reference names one. Its host must be one the Config
// allows. Otherwise referenceURL returns nil and why not.
func (a *Agent) referenceURL(ref string) (*url.URL, string) {
	from := a.target()
	first, _, _ := strings.Cut(strings.TrimSpace(ref), " ")
	raw := first
	if !strings.Contains(first, "://") {
		raw = "//" + first
	}
	r, err := url.Parse(raw)
	switch {
	case err != nil || r.Hostname() == "" || r.User != nil || (r.Path != "" && r.Path != "/") || r.RawQuery != "":
		return nil, "not a host, host:port or URL"
	case r.Scheme != "" && tlsScheme(r.Scheme) != tlsScheme(from.Scheme):
		return nil, fmt.Sprintf("it is %s and the endpoint is %s: a redirect must not change the transport's security", security(r), security(from))
	case !a.redirectAllowed(r.Hostname()):
		return nil, "not a host of Broker or Failover, nor in RedirectDomains"
	}
	port := r.Port()
	if port == "" {
		port = from.Port()
	}
	u := &url.URL{Scheme: from.Scheme, Host: r.Hostname()}
	if port != "" {
		u.Host = net.JoinHostPort(r.Hostname(), port)
	}
	return u, ""
}

// redirectAllowed says whether a broker may send the device to host: a
// host of the configured endpoints, or a name in (or under) one of
// RedirectDomains.
func (a *Agent) redirectAllowed(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, u := range a.endpoints {
		if strings.EqualFold(u.Hostname(), host) {
			return true
		}
	}
	if net.ParseIP(host) != nil {
		return false // an address is allowed only as an endpoint: no domain holds it
	}
	for _, d := range a.cfg.RedirectDomains {
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}
