package external_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/report/external"
)

// A prediction runs the fleet's fit, or its largest group's, and says why
// when there is none to run.
func TestRunnableSaysWhyNone(t *testing.T) {
	var none *external.Policy
	_, why := none.Runnable()
	assert.Equal(t, "no device's attempts were read", why)

	full := external.Fit{Family: "full", BaseS: 1, Factor: 2, CapS: 32, Spec: "full:1s:32s"}
	fit, why := (&external.Policy{Fleet: full}).Runnable()
	assert.Empty(t, why)
	assert.Equal(t, full, fit)

	_, why = (&external.Policy{Fleet: external.Fit{CannotTell: "too few retries"}}).Runnable()
	assert.Equal(t, "which policy the fleet runs cannot be told: too few retries", why)

	odd := external.Fit{Family: "linear", NoSpec: "devicesim runs no linear shape"}
	fit, why = (&external.Policy{Fleet: full, Groups: []external.Group{{Devices: 9, Fit: odd}, {Devices: 1, Fit: full}}}).Runnable()
	assert.Equal(t, odd, fit, "the largest group's")
	assert.Equal(t, "the largest group's policy (linear) has no spec devicesim runs: devicesim runs no linear shape", why)
}

// The summary says the fit in a line, and what it could not read; a
// storm of the simulator's own fleet has neither part and writes nothing.
func TestWriteSaysTheFitAndWhatWasUnread(t *testing.T) {
	var b strings.Builder
	(&external.Policy{Fleet: external.Fit{Family: "full", BaseS: 0.5, Factor: 2, CapS: 32, Devices: 40, Retries: 160,
		Margin: 12, RunnerUp: "equal", KS: 0.041, Spec: "full:500ms:32s"}}).Write(&b)
	(&external.Devices{ByClientID: 38, BySession: 2, NeverBack: []string{"dev-7"}, NeverBackCount: 3}).Write(&b)
	var nothing *external.Policy
	nothing.Write(&b)
	(*external.Devices)(nil).Write(&b)
	assert.Equal(t, "the fleet's reconnect policy: full: base 500 ms, x2 a retry, cap 32 s; fit over 40 devices, 160 waits: "+
		"12 nats over equal, KS 0.041; devicesim's -policy full:500ms:32s\n"+
		"  (refused attempts named no device: -identify reads each one's whole sequence)\n"+
		"the fleet's devices: 38 by client ID, 2 by session only; refused attempts are counted, not named (-identify names them)\n"+
		"never back (3): dev-7 and 2 more\n", b.String())
}
