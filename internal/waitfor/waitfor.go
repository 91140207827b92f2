// Package waitfor lets a goroutine wait for another's state without
// polling or sleeping. The owner of some state announces each change on a
// Broadcast; Until re-checks the state after every announcement, within a
// bound. The firmware waits with it (publisher's Flush, for the queue to
// drain), as do the fault proxy's and the test broker's recorders and the
// tests.
package waitfor

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrTimeout is returned by Until when the bound passes first.
var ErrTimeout = errors.New("waitfor: condition not met in time")

// Broadcast wakes everyone waiting for the next change. It is guarded by the
// mutex that guards the state it announces; the zero value is ready.
type Broadcast struct{ ch chan struct{} }

// Next returns a channel closed at the next Notify. Call with the lock held.
func (b *Broadcast) Next() <-chan struct{} {
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Notify wakes the waiters, if any. Call with the lock held; it costs
// nothing when nobody waits.
func (b *Broadcast) Notify() {
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// Until blocks until done, called with mu held, returns true; done is called
// again after every Notify on b. It returns ErrTimeout after the real-time
// bound timeout.
func Until(mu sync.Locker, b *Broadcast, timeout time.Duration, done func() bool) error {
	return UntilContext(context.Background(), mu, b, timeout, done)
}

// UntilContext is Until that also returns ctx.Err() when ctx ends first.
func UntilContext(ctx context.Context, mu sync.Locker, b *Broadcast, timeout time.Duration, done func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		mu.Lock()
		if done() {
			mu.Unlock()
			return nil
		}
		next := b.Next()
		mu.Unlock()
		select {
		case <-next:
		case <-deadline.C:
			return ErrTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
