package reconnect_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/reconnect"
)

func TestFloodGuardNeverExceedsRequestsPerWindow(t *testing.T) {
	start := time.Unix(0, 0)
	g, err := reconnect.NewFloodGuard(reconnect.FloodGuardConfig{Requests: 6, Window: time.Minute, Clock: fakeclock.New(start)})
	require.NoError(t, err)
	// 100 callers arrive at once; schedule each at now + its reservation.
	var at []time.Time
	for i := 0; i < 100; i++ {
		at = append(at, start.Add(g.Reserve(start)))
	}
	for i := range at {
		// count requests in the window [at[i], at[i]+1m)
		n := 0
		for _, x := range at {
			if !x.Before(at[i]) && x.Before(at[i].Add(time.Minute)) {
				n++
			}
		}
		require.LessOrEqual(t, n, 6, "window starting at %v", at[i].Sub(start))
	}
	assert.Equal(t, time.Duration(0), at[0].Sub(start))
	assert.Equal(t, 10*time.Second, at[1].Sub(start), "waits just long enough: 60 s / 6")
	assert.Equal(t, 990*time.Second, at[99].Sub(start))
}

func TestFloodGuardTryReserveTakesOnlyAFreeSlot(t *testing.T) {
	start := time.Unix(0, 0)
	g, err := reconnect.NewFloodGuard(reconnect.FloodGuardConfig{Requests: 6, Window: time.Minute, Burst: 2})
	require.NoError(t, err)
	assert.Zero(t, g.TryReserve(start), "a full bucket: taken")
	assert.Zero(t, g.TryReserve(start), "the second of the burst")
	assert.Equal(t, 10*time.Second, g.TryReserve(start), "empty: the next slot in 60 s / 6, not taken")
	assert.InDelta(t, 4*time.Second, g.TryReserve(start.Add(6*time.Second)), float64(time.Microsecond), "and still not taken")
	assert.Zero(t, g.TryReserve(start.Add(13*time.Second)), "a caller that waited longer takes it at once")
	assert.InDelta(t, 7*time.Second, g.TryReserve(start.Add(13*time.Second)), float64(time.Microsecond))
	assert.NoError(t, reconnect.FloodGuardConfig{Requests: 1, Window: time.Second}.Validate())
	assert.ErrorIs(t, reconnect.FloodGuardConfig{Requests: 1}.Validate(), reconnect.ErrInvalid)
}

func TestFloodGuardWaitUsesClockAndGivesSlotBackOnCancel(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	g, err := reconnect.NewFloodGuard(reconnect.FloodGuardConfig{Requests: 1, Window: time.Second, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, g.Wait(context.Background()), "first request passes at once")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Wait(ctx) }()
	pending, err := clock.WaitTimers(1, bound)
	require.NoError(t, err)
	assert.Equal(t, time.Second, pending[0])
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(bound):
		t.Fatal("Wait ignored cancel")
	}
	clock.Advance(time.Second)
	assert.Equal(t, time.Duration(0), g.Reserve(clock.Now()), "the cancelled slot was returned")
}

func TestFloodGuardConcurrentCallers(t *testing.T) {
	g, err := reconnect.NewFloodGuard(reconnect.FloodGuardConfig{Requests: 1000, Window: time.Millisecond, Burst: 50})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				assert.NoError(t, g.Wait(context.Background()))
			}
		}()
	}
	wg.Wait()
}

func TestFloodGuardRejectsBadConfig(t *testing.T) {
	for _, c := range []reconnect.FloodGuardConfig{
		{Requests: 0, Window: time.Second},
		{Requests: -1, Window: time.Second},
		{Requests: 1, Window: 0},
		{Requests: 1, Window: -time.Second},
		{Requests: 1, Window: time.Second, Burst: -1},
	} {
		g, err := reconnect.NewFloodGuard(c)
		assert.Nil(t, g)
		assert.ErrorIs(t, err, reconnect.ErrInvalid, "%+v", c)
	}
}
