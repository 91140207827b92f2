package timedfault_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/agents/timedfault"
)

// breaker logs what is done to it, with the time since the test began.
type breaker struct {
	mu    sync.Mutex
	start time.Time
	log   []string
	fail  error
}

func (b *breaker) note(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, fmt.Sprintf("%v ", time.Since(b.start))+fmt.Sprintf(format, args...))
}

func (b *breaker) DropAll() int                        { b.note("drop"); return 0 }
func (b *breaker) BeginOutage() int                    { b.note("down"); return 0 }
func (b *breaker) EndOutage() error                    { b.note("up"); return b.fail }
func (b *breaker) SetAdmission(fault.Admission) error  { return nil }
func (b *breaker) SetFlapping(d time.Duration) error   { b.note("flap %v", d); return nil }
func (b *breaker) BeginBlackhole()                     { b.note("silent") }
func (b *breaker) EndBlackhole()                       { b.note("heard") }
func (b *breaker) SetLatency(l, j time.Duration) error { b.note("slow %v+%v", l, j); return nil }

func (b *breaker) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.log, "; ")
}

// Overlapping faults hold as the model's windows do: the broker is down
// until the last outage ends, flaps at the first open window's flap, and
// the path is as slow as the latest slow path still in force.
func TestOverlappingFaultsHoldUntilTheLastEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &breaker{start: time.Now()}
		var f timedfault.Faults
		first := f.Outage(b, 30*time.Second, nil)
		time.Sleep(10 * time.Second)
		second := f.Outage(b, 30*time.Second, func() error { b.note("throttle"); return nil })
		<-first
		<-second
		assert.Equal(t, "0s down; 10s down; 40s throttle; 40s up", b.String(), "back once, when the second outage ends")

		b = &breaker{start: time.Now()}
		w1, _ := f.Flapping(b, 20*time.Second, 2*time.Second)
		time.Sleep(10 * time.Second)
		w2, _ := f.Flapping(b, 20*time.Second, 5*time.Second)
		<-w1
		<-w2
		assert.Equal(t, "0s flap 2s; 0s drop; 10s flap 2s; 10s drop; 20s flap 5s; 30s flap 0s", b.String())

		b = &breaker{start: time.Now()}
		f.Latency(b, 20*time.Second, time.Second, 0)
		time.Sleep(10 * time.Second)
		slow, _ := f.Latency(b, 20*time.Second, 3*time.Second, time.Second)
		<-slow
		assert.Equal(t, "0s slow 1s+0s; 0s drop; 10s slow 3s+1s; 10s drop; 20s slow 3s+1s; 30s slow 0s+0s", b.String())
		f.Stop()
	})
}

// A fault whose end fails says so, once; Stop cancels the ends still due.
func TestAFailedEndIsKeptAndStopCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &breaker{start: time.Now(), fail: errors.New("address taken")}
		var f timedfault.Faults
		<-f.Outage(b, time.Second, nil)
		assert.EqualError(t, f.Err(), "address taken")
		b.fail = nil
		pending := f.Blackhole(b, time.Hour)
		f.Stop()
		<-pending
		assert.Equal(t, "0s down; 1s up; 1s silent", b.String(), "the black hole never ended: the fleet stopped first")
	})
}
