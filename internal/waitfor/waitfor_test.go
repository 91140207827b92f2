package waitfor_test

import (
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
