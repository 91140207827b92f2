package device

import (
	"errors"
	"fmt"

	"github.com/herdguard/herdguard/internal/endpoint"
)

// followRedirect sends the next attempt to the server an MQTT 5 broker
// named with 0x9C (use another server) or 0x9D (server moved). It does so
// if err carries one and the Config allows it. It reports whether it did. A
// reference the Config does not allow is refused. So is one past
// Redirects.Max in a row without a session. A refusal makes an event and a
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
	case a.hops >= a.cfg.Redirects.Max:
		return refuse(fmt.Sprintf("%d redirects in a row without a session (Redirects.Max)", a.hops))
	}
	u, why := endpoint.Redirect(ref, a.target(), a.endpoints, a.cfg.Redirects.Domains)
	if u == nil {
		return refuse(why)
	}
	a.hops++
	a.redirected.Store(u)
	a.emit(Event{Kind: EventRedirected, Code: code, Endpoint: u.Redacted()})
	a.log.Info("redirected", "code", code, "to", u.Redacted())
	return true
}
