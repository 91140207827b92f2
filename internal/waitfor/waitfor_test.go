package waitfor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/waitfor"
)

func TestUntilWakesOnNotify(t *testing.T) {
	var mu sync.Mutex
	var b waitfor.Broadcast
	n := 0
	go func() {
		for i := 0; i < 5; i++ {
			mu.Lock()
			n++
			b.Notify()
			mu.Unlock()
		}
	}()
	assert.NoError(t, waitfor.Until(&mu, &b, 5*time.Second, func() bool { return n == 5 }))
}

func TestUntilTimesOut(t *testing.T) {
	var mu sync.Mutex
	var b waitfor.Broadcast
	assert.ErrorIs(t, waitfor.Until(&mu, &b, 10*time.Millisecond, func() bool { return false }), waitfor.ErrTimeout)
}

func TestNotifyWithoutWaitersIsFree(t *testing.T) {
	var b waitfor.Broadcast
	b.Notify()
	ch := b.Next()
	b.Notify()
	select {
	case <-ch:
	default:
		t.Fatal("Next's channel was not closed by Notify")
	}
}

func TestUntilContextEndsWithTheContext(t *testing.T) {
	var mu sync.Mutex
	var b waitfor.Broadcast
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := waitfor.UntilContext(ctx, &mu, &b, time.Hour, func() bool { return false })
	assert.ErrorIs(t, err, context.Canceled)
	assert.NoError(t, waitfor.UntilContext(ctx, &mu, &b, time.Hour, func() bool { return true }), "a condition already met wins")
}
