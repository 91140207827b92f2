package reconnect_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/reconnect"
)

func noJitter() reconnect.ResponsiveConfig {
	c := reconnect.DefaultResponsive
	c.RandomizationFactor = 0
	return c
}

func TestResponsiveGoesUpAndDown(t *testing.T) {
	r, err := reconnect.NewResponsive(noJitter(), nil, rand.NewPCG(1, 1))
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), r.Next(), "no delay before any failure")

	r.Failure()
	assert.Equal(t, 500*time.Millisecond, r.Metrics().Delay)
	r.Failure()
	assert.Equal(t, 750*time.Millisecond, r.Metrics().Delay)
	r.Failure()
	assert.Equal(t, 1125*time.Millisecond, r.Metrics().Delay)

	for i := 0; i < 9; i++ {
		r.Success()
	}
	assert.Equal(t, 1125*time.Millisecond, r.Metrics().Delay, "nine successes are not ten")
	r.Success()
	assert.Equal(t, 1012500*time.Microsecond, r.Metrics().Delay, "x0.9 after ten in a row")

	r.Failure() // breaks the run
	for i := 0; i < 9; i++ {
		r.Success()
	}
	m := r.Metrics()
	assert.Equal(t, 1518750*time.Microsecond, m.Delay)

	// Come all the way down: below InitialInterval it drops to zero.
	for m.Delay > 0 {
		for i := 0; i < 10; i++ {
			r.Success()
		}
		m = r.Metrics()
	}
	assert.Equal(t, int64(4), m.WentUp)
	assert.Equal(t, int64(1+11), m.WentDown) // 1.51875 s x 0.9^k < 0.5 s first at k = 11
}

func TestResponsiveCapsAndRandomises(t *testing.T) {
	cfg := reconnect.DefaultResponsive
	r, err := reconnect.NewResponsive(cfg, nil, rand.NewPCG(5, 5))
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		r.Failure()
	}
	assert.Equal(t, 15*time.Minute, r.Metrics().Delay)
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for i := 0; i < 10000; i++ {
		d := r.Next()
		lo, hi = min(lo, d), max(hi, d)
	}
	// spread = min(0.3 x 15 min, 2 min) = 2 min, and the cap clips the top.
	assert.GreaterOrEqual(t, lo, 13*time.Minute)
	assert.Less(t, lo, 13*time.Minute+5*time.Second)
	assert.Equal(t, 15*time.Minute, hi)
	m := r.Metrics()
	assert.Equal(t, int64(10000), m.Invocations)
	assert.Equal(t, int64(10000), m.Slept)
	assert.Greater(t, m.TotalSleep, 10000*13*time.Minute)
}

func TestResponsiveWaitSleepsOnClock(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	r, err := reconnect.NewResponsive(noJitter(), clock, nil)
	require.NoError(t, err)
	r.Record(errors.New("throttled"))
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background()) }()
	moved, err := clock.AdvanceToNext(bound)
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, moved)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(bound):
		t.Fatal("Wait did not return")
	}
	r.Record(nil)
	assert.Equal(t, int64(1), r.Metrics().Slept)
}

func TestResponsiveSharedByWorkers(t *testing.T) {
	r, err := reconnect.NewResponsive(reconnect.DefaultResponsive, nil, rand.NewPCG(2, 2))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_ = r.Next()
				if (w+i)%3 == 0 {
					r.Failure()
				} else {
					r.Success()
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(10000), r.Metrics().Invocations)
}

func TestResponsiveRejectsBadConfig(t *testing.T) {
	mod := func(f func(*reconnect.ResponsiveConfig)) reconnect.ResponsiveConfig {
		c := reconnect.DefaultResponsive
		f(&c)
		return c
	}
	for name, c := range map[string]reconnect.ResponsiveConfig{
		"zero value":        {},
		"initial zero":      mod(func(c *reconnect.ResponsiveConfig) { c.InitialInterval = 0 }),
		"max below initial": mod(func(c *reconnect.ResponsiveConfig) { c.MaxInterval = time.Millisecond }),
		"factor NaN":        mod(func(c *reconnect.ResponsiveConfig) { c.RandomizationFactor = math.NaN() }),
		"factor above 1":    mod(func(c *reconnect.ResponsiveConfig) { c.RandomizationFactor = 1.5 }),
		"up below 1":        mod(func(c *reconnect.ResponsiveConfig) { c.UpMultiplier = 0.5 }),
		"down zero":         mod(func(c *reconnect.ResponsiveConfig) { c.DownMultiplier = 0 }),
		"down above 1":      mod(func(c *reconnect.ResponsiveConfig) { c.DownMultiplier = 1.1 }),
		"threshold zero":    mod(func(c *reconnect.ResponsiveConfig) { c.DownMultiplierThreshold = 0 }),
		"negative maxrand":  mod(func(c *reconnect.ResponsiveConfig) { c.MaxRandomization = -1 }),
	} {
		r, err := reconnect.NewResponsive(c, nil, nil)
		assert.Nil(t, r, name)
		assert.ErrorIs(t, err, reconnect.ErrInvalid, name)
	}
}
