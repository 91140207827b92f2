package device

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/devicecore"
	"github.com/herdguard/herdguard/reconnect"
)

var errDial = errors.New("dial: connection refused")

// Each wait the machine chooses, it says what chose it: the boot spread,
// the policy (after no CONNACK, or one whose code means nothing more), a
// credentials refusal's floor, a back-pressure code's stretch (in a
// CONNACK or a DISCONNECT, unless server signals are ignored), the flood
// guard.
func TestMachineSaysWhatChoseEachWait(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	tm := DefaultTiming()
	tm.Guard = &reconnect.FloodGuardConfig{Requests: 1, Window: time.Hour, Burst: 2}
	m, err := NewMachine(&tm, rand.NewPCG(1, 2))
	require.NoError(t, err)
	wait := func(s Step, want waitReason) {
		t.Helper()
		require.Equal(t, KindWait, s.Kind)
		assert.Equal(t, want, m.why, "the wait of %v", s.Wait)
		at = at.Add(s.Wait)
	}
	wait(m.Start(at), waitBootSpread)
	require.Equal(t, KindConnect, m.Due(at).Kind)
	wait(m.Result(at, Result{Code: NoConnack, Err: errDial}), waitPolicy)
	require.Equal(t, KindConnect, m.Due(at).Kind)
	wait(m.Result(at, Result{Code: 3}), waitPolicy)
	wait(m.Due(at), waitFloodGuard) // the burst of 2 is spent

	m.ct.Guard = nil
	for code, want := range map[int]waitReason{5: waitCredentials, 0x87: waitCredentials, 0x89: waitBackPressure,
		0x9F: waitBackPressure, 0x88: waitPolicy, 0x80: waitPolicy} {
		require.Equal(t, KindConnect, m.Due(at).Kind)
		wait(m.Result(at, Result{Code: code}), want)
	}
	require.Equal(t, KindConnect, m.Due(at).Kind)
	require.Equal(t, KindOnline, m.Result(at, Result{}).Kind)
	wait(m.Lost(at, &DisconnectError{Code: 0x89}), waitBackPressure)
	require.Equal(t, KindConnect, m.Due(at).Kind)
	require.Equal(t, KindOnline, m.Result(at, Result{}).Kind)
	wait(m.Lost(at, &DisconnectError{Code: 0x8B}), waitPolicy)

	m.ct.IgnoreServerSignals = true // the control group: nothing stretched
	require.Equal(t, KindConnect, m.Due(at).Kind)
	wait(m.Result(at, Result{Code: 0x89}), waitPolicy)
}

// Saying why takes nothing from the machine's random source: a machine
// waits what a bare core with the same source waits, code for code.
func TestSayingWhyDrawsNothing(t *testing.T) {
	tm := DefaultTiming()
	m, err := NewMachine(&tm, rand.NewPCG(3, 3))
	require.NoError(t, err)
	var core devicecore.Core
	ct, src := devicecore.Timing(tm), rand.NewPCG(3, 3)
	origin := time.Unix(1_700_000_000, 0)
	var now time.Duration
	require.Equal(t, core.Start(&ct, src).Wait, m.Start(origin).Wait)
	for _, code := range []int{NoConnack, 5, 0x89, 3, 0x97, 0x9F, 4} {
		now += time.Minute
		require.Equal(t, devicecore.KindConnect, core.Due(&ct, src, now).Kind)
		require.Equal(t, KindConnect, m.Due(origin.Add(now)).Kind)
		want := core.Result(&ct, src, now, devicecore.Result{Code: code, Failed: code == NoConnack})
		got := m.Result(origin.Add(now), Result{Code: code, Err: errDial})
		assert.Equal(t, want.Wait, got.Wait, "after code %d", code)
	}
}
