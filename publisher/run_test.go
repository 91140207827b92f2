package publisher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fakeclock"
	"github.com/herdguard/herdguard/publisher"
)

// switchable is a session whose connection the test turns on and off.
type switchable struct {
	mu    sync.Mutex
	up    bool
	upCh  chan struct{}
	fail  bool       // publishes fail while set
	calls chan error // every Publish's result, for the test to wait on
	// waiting hears when AwaitConnection finds the session down.
	waiting chan struct{}
}

func newSwitchable() *switchable {
	return &switchable{upCh: make(chan struct{}), calls: make(chan error, 100), waiting: make(chan struct{}, 100)}
}

func (s *switchable) set(up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if up && !s.up {
		close(s.upCh)
	}
	if !up && s.up {
		s.upCh = make(chan struct{})
	}
	s.up = up
}

func (s *switchable) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up
}

func (s *switchable) AwaitConnection(ctx context.Context) error {
	s.mu.Lock()
	ch := s.upCh
	if !s.up {
		s.waiting <- struct{}{}
	}
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *switchable) Publish(context.Context, string, byte, bool, []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if !s.up || s.fail {
		if s.fail {
			s.up = false // the failure was the connection going away
			s.upCh = make(chan struct{})
		}
		err = errors.New("connection lost before PUBACK")
	}
	s.calls <- err
	return err
}

func (s *switchable) nextCall(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.calls:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("no publish attempt")
		return nil
	}
}

// A publish that fails because the session went away must not add the
// publisher's own backoff on top of the agent's reconnect: once the session
// is back, the queue drains at once.
func TestNoPublisherBackoffWhileSessionIsDown(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	s := newSwitchable()
	p, err := publisher.New(publisher.Config{Session: s, Clock: clock, DrainRate: 1000, DrainBurst: 100})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Publish("t", []byte("1"))
	require.NoError(t, err)
	s.mu.Lock()
	s.fail = true
	s.mu.Unlock()
	s.set(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	require.Error(t, s.nextCall(t), "the first publish fails and takes the session down")
	select { // Run is waiting for the session, not sleeping a backoff
	case <-s.waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not go back to waiting for the session")
	}
	s.mu.Lock()
	s.fail = false
	s.mu.Unlock()
	s.set(true)
	// Without advancing the fake clock: a backoff wait here would never end.
	require.NoError(t, s.nextCall(t), "delivered as soon as the session is back")
	assert.Equal(t, uint64(1), p.Stats().Failures)
}
