package device_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/reconnect"
)

var t0 = time.Unix(1_700_000_000, 0)

func timing(t *testing.T, mod func(*device.Timing)) *device.Timing {
	tm := device.DefaultTiming()
	tm.Guard = nil
	if mod != nil {
		mod(&tm)
	}
	require.NoError(t, tm.Validate())
	return &tm
}

func machine(t *testing.T, tm *device.Timing) *device.Machine {
	m, err := device.NewMachine(tm, rand.NewPCG(7, 7))
	require.NoError(t, err)
	return m
}

func TestDefaultTimingIsValid(t *testing.T) {
	assert.NoError(t, device.DefaultTiming().Validate())
}

func TestBootWaitsInsideSpreadAndNeverZero(t *testing.T) {
	tm := timing(t, nil)
	var lo, hi time.Duration = time.Hour, 0
	for i := uint64(0); i < 2000; i++ {
		m, err := device.NewMachine(tm, rand.NewPCG(i, 1))
		require.NoError(t, err)
		s := m.Start(t0)
		require.Equal(t, device.KindWait, s.Kind)
		require.Positive(t, s.Wait)
		require.Less(t, s.Wait, tm.BootSpread)
		lo, hi = min(lo, s.Wait), max(hi, s.Wait)
	}
	assert.Less(t, lo, time.Second, "2,000 devices use the whole window")
	assert.Greater(t, hi, 9*time.Second)
}

// run drives a machine through boot and a first successful connect.
func online(t *testing.T, m *device.Machine, now time.Time) {
	s := m.Start(now)
	require.Equal(t, device.KindWait, s.Kind)
	s = m.Due(now)
	require.Equal(t, device.KindConnect, s.Kind)
	s = m.Result(now, device.Result{})
	require.Equal(t, device.KindOnline, s.Kind)
}

func TestFirstReconnectAfterLossWaitsWaitZero(t *testing.T) {
	m := machine(t, timing(t, nil))
	online(t, m, t0)
	s := m.Lost(t0.Add(2*time.Minute), errors.New("EOF"))
	require.Equal(t, device.KindWait, s.Kind)
	assert.GreaterOrEqual(t, s.Wait, time.Second, "never immediate: wait_0 = 1 s + U[0, 1 s)")
	assert.Less(t, s.Wait, 2*time.Second)
}

func TestFlappingBrokerMeetsGrowingWaits(t *testing.T) {
	m := machine(t, timing(t, nil))
	online(t, m, t0)
	now := t0.Add(time.Hour)
	var waits []time.Duration
	for i := 0; i < 6; i++ {
		s := m.Lost(now, errors.New("dropped")) // dropped 0 s after each CONNACK
		require.Equal(t, device.KindWait, s.Kind)
		waits = append(waits, s.Wait)
		now = now.Add(s.Wait)
		require.Equal(t, device.KindConnect, m.Due(now).Kind)
		require.Equal(t, device.KindOnline, m.Result(now, device.Result{}).Kind)
	}
	lows := []time.Duration{1, 2, 4, 8, 16, 32}
	for i, w := range waits {
		assert.GreaterOrEqual(t, w, min(lows[i]*time.Second, 32*time.Second), "wait %d", i)
	}
	// The first connection was up an hour, so its loss reset the count; the six
	// short-lived ones after it did not.
	assert.Equal(t, 6, m.Attempts())
}

func TestStableConnectionResetsBackoff(t *testing.T) {
	tm := timing(t, nil)
	m := machine(t, tm)
	online(t, m, t0)
	now := t0
	for i := 0; i < 4; i++ { // grow the backoff with failed attempts
		s := m.Result(now, device.Result{Code: 3})
		now = now.Add(s.Wait)
		m.Due(now)
	}
	require.Equal(t, device.KindOnline, m.Result(now, device.Result{}).Kind)
	s := m.Lost(now.Add(tm.StableAfter), errors.New("EOF"))
	assert.Less(t, s.Wait, 2*time.Second, "up for StableAfter: back to wait_0")
	assert.Equal(t, 0, m.Attempts())
}

func TestRefusalCodes(t *testing.T) {
	cases := []struct {
		name   string
		code   int
		creds  device.CredentialsHandling
		kind   device.StepKind
		minW   time.Duration
		stopIs error
	}{
		{"3 server unavailable retries", 3, device.RetryCredentialsAtCap, device.KindWait, time.Second, nil},
		{"network error retries", device.NoConnack, device.RetryCredentialsAtCap, device.KindWait, time.Second, nil},
		{"unmapped 0x87 is a refusal, not a session", 0x87, device.RetryCredentialsAtCap, device.KindWait, time.Second, nil},
		{"1 protocol is permanent", 1, device.RetryCredentialsAtCap, device.KindStop, 0, device.ErrRefused},
		{"2 identifier is permanent", 2, device.RetryCredentialsAtCap, device.KindStop, 0, device.ErrRefused},
		{"4 retried at the cap", 4, device.RetryCredentialsAtCap, device.KindWait, 32 * time.Second, nil},
		{"5 retried at the cap", 5, device.RetryCredentialsAtCap, device.KindWait, 32 * time.Second, nil},
		{"5 permanent when configured", 5, device.CredentialsArePermanent, device.KindStop, 0, device.ErrRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := machine(t, timing(t, func(tm *device.Timing) { tm.Credentials = c.creds }))
			m.Start(t0)
			m.Due(t0)
			r := device.Result{Code: c.code}
			if c.code == device.NoConnack {
				r.Err = errors.New("connection refused")
			}
			s := m.Result(t0, r)
			require.Equal(t, c.kind, s.Kind)
			assert.GreaterOrEqual(t, s.Wait, c.minW)
			if c.stopIs != nil {
				assert.ErrorIs(t, s.Err, c.stopIs)
				var ce *device.ConnackError
				require.ErrorAs(t, s.Err, &ce)
				assert.Equal(t, c.code, ce.Code)
			}
		})
	}
}

// A refusal that was the last attempt before the retry cap is named in the
// error the session ends with, beside ErrGaveUp.
func TestGaveUpNamesTheLastRefusal(t *testing.T) {
	p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 1})
	require.NoError(t, err)
	m := machine(t, timing(t, func(tm *device.Timing) { tm.Policy = p }))
	m.Start(t0)
	m.Due(t0)
	s := m.Result(t0, device.Result{Code: 3})
	for s.Kind == device.KindWait {
		m.Due(t0.Add(time.Hour))
		s = m.Result(t0.Add(time.Hour), device.Result{Code: 3})
	}
	require.Equal(t, device.KindStop, s.Kind)
	assert.ErrorIs(t, s.Err, device.ErrGaveUp)
	var ce *device.ConnackError
	require.ErrorAs(t, s.Err, &ce)
	assert.Equal(t, 3, ce.Code)
	assert.Contains(t, s.Err.Error(), "CONNACK 3 (server unavailable)")
}

func TestRetryCapEndsWithErrGaveUp(t *testing.T) {
	p, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 3})
	require.NoError(t, err)
	m := machine(t, timing(t, func(tm *device.Timing) { tm.Policy = p }))
	now := t0
	s := m.Start(now)
	for s.Kind == device.KindWait {
		now = now.Add(s.Wait)
		require.Equal(t, device.KindConnect, m.Due(now).Kind)
		s = m.Result(now, device.Result{Code: device.NoConnack, Err: errors.New("dial: refused")})
	}
	require.Equal(t, device.KindStop, s.Kind)
	assert.ErrorIs(t, s.Err, device.ErrGaveUp)
	assert.Contains(t, s.Err.Error(), "4 attempts")
	assert.Contains(t, s.Err.Error(), "dial: refused")
}

func TestGuardBoundsAttemptsWhateverThePolicy(t *testing.T) {
	// A policy that would retry every 10 ms, under a guard of 10 a minute.
	p, err := reconnect.New(reconnect.Constant{Interval: 10 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	require.NoError(t, err)
	m := machine(t, timing(t, func(tm *device.Timing) {
		tm.Policy = p
		tm.Guard = &reconnect.FloodGuardConfig{Requests: 10, Window: time.Minute, Burst: 1}
	}))
	now := t0
	s := m.Start(now)
	var attemptsAt []time.Time
	for len(attemptsAt) < 30 {
		now = now.Add(s.Wait)
		s = m.Due(now)
		if s.Kind == device.KindConnect {
			attemptsAt = append(attemptsAt, now)
			s = m.Result(now, device.Result{Code: 3})
		}
	}
	for i := range attemptsAt {
		n := 0
		for _, x := range attemptsAt {
			if !x.Before(attemptsAt[i]) && x.Before(attemptsAt[i].Add(time.Minute)) {
				n++
			}
		}
		require.LessOrEqual(t, n, 10)
	}
}

// A fleet whose guards all filled before one disruption must not retry on
// the guard's grid together: each guarded wait gets up to a slot of jitter.
func TestGuardedDevicesDoNotRetryInStep(t *testing.T) {
	p, err := reconnect.New(reconnect.Constant{Interval: 10 * time.Millisecond}, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	require.NoError(t, err)
	tm := timing(t, func(tm *device.Timing) {
		tm.Policy = p
		tm.Guard = &reconnect.FloodGuardConfig{Requests: 10, Window: time.Minute, Burst: 5}
	})
	const devices = 1000
	lost := t0.Add(time.Hour) // every session ends at once, every bucket full
	perInstant := map[time.Time]int{}
	for i := range devices {
		m, err := device.NewMachine(tm, rand.NewPCG(1, uint64(i)))
		require.NoError(t, err)
		m.Start(t0)
		m.Due(t0)
		m.Result(t0, device.Result{})
		now, s := lost, m.Lost(lost, errors.New("dropped"))
		for now.Before(lost.Add(2 * time.Minute)) {
			now = now.Add(s.Wait)
			if s = m.Due(now); s.Kind == device.KindConnect {
				if now.Sub(lost) > time.Second { // past the policy's own 10 ms retries: guarded
					perInstant[now.Truncate(10*time.Millisecond)]++
				}
				s = m.Result(now, device.Result{Code: 3})
			}
		}
	}
	busiest := 0
	for _, n := range perInstant {
		busiest = max(busiest, n)
	}
	// Without jitter every one of the 1,000 devices retries in the same
	// 10 ms every 6 s; with up to a slot (6 s) of it, about 2 do.
	assert.Less(t, busiest, devices/50, "guarded retries in step")
}

func TestTimingRejectsUnsafeValues(t *testing.T) {
	for name, mod := range map[string]func(*device.Timing){
		"nil policy":        func(tm *device.Timing) { tm.Policy = nil },
		"zero boot spread":  func(tm *device.Timing) { tm.BootSpread = 0 },
		"zero stable after": func(tm *device.Timing) { tm.StableAfter = 0 },
		"negative creds":    func(tm *device.Timing) { tm.CredentialsWait = -1 },
		"bad guard":         func(tm *device.Timing) { tm.Guard = &reconnect.FloodGuardConfig{} },
		"unknown creds":     func(tm *device.Timing) { tm.Credentials = 9 },
	} {
		tm := device.DefaultTiming()
		mod(&tm)
		_, err := device.NewMachine(&tm, nil)
		assert.ErrorIs(t, err, device.ErrInvalid, name)
	}
	tm := device.DefaultTiming()
	tm.Guard = &reconnect.FloodGuardConfig{}
	assert.ErrorIs(t, tm.Validate(), reconnect.ErrInvalid, "the guard's own verdict too")
}

// A back-pressure code (0x89, 0x97, 0x9F, in a CONNACK or a DISCONNECT)
// stretches the policy's wait d to d + U[0, d): over 4,000 devices and
// every step of the IoTCore formula, never shorter than the same device's
// wait deaf to the code, at most twice it, and 1.5 times it on average.
func TestBackPressureStretchesTheWaitNeverShortensIt(t *testing.T) {
	for _, how := range []string{"connack", "disconnect"} {
		var sum float64
		n := 0
		for seed := range uint64(4000) {
			waits := [2]time.Duration{}
			for k, ignore := range []bool{false, true} {
				m, err := device.NewMachine(timing(t, func(tm *device.Timing) { tm.IgnoreServerSignals = ignore }), rand.NewPCG(seed, 1))
				require.NoError(t, err)
				m.Start(t0)
				m.Due(t0)
				now := t0
				// a few failures in: a later step of the formula
				for step := 0; step <= int(seed%7); step++ {
					s := m.Result(now, device.Result{Code: 3})
					now = now.Add(s.Wait)
					m.Due(now)
				}
				var s device.Step
				if how == "connack" {
					s = m.Result(now, device.Result{Code: 0x9F, Err: &device.ConnackError{Code: 0x9F}})
				} else {
					m.Result(now, device.Result{})
					s = m.Lost(now.Add(time.Second), &device.DisconnectError{Code: 0x89})
				}
				require.Equal(t, device.KindWait, s.Kind)
				waits[k] = s.Wait
			}
			stretched, plain := waits[0], waits[1]
			require.GreaterOrEqual(t, stretched, plain, "%s seed %d", how, seed)
			require.Less(t, stretched, 2*plain, "%s seed %d", how, seed)
			sum += float64(stretched) / float64(plain)
			n++
		}
		assert.InDelta(t, 1.5, sum/float64(n), 0.02, "%s: the mean stretch", how)
	}
}
