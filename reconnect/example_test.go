package reconnect_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/herdguard/herdguard/reconnect"
)

// The mission's formula: wait_n = min(2^n s + U[0, 1000 ms], 32 s), with a
// seeded source so the output is reproducible.
func Example_formula() {
	policy, err := reconnect.New(reconnect.DefaultIoTCore, reconnect.Limits{MaxRetries: 7})
	if err != nil {
		panic(err)
	}
	b := reconnect.NewBackoff(policy, rand.NewPCG(2026, 1))
	now := time.Now()
	for {
		wait, ok := b.Next(now)
		if !ok {
			fmt.Println("give up after", b.Retries(), "retries")
			return
		}
		fmt.Println(wait.Round(time.Millisecond))
	}
	// Output:
	// 1.468s
	// 2.201s
	// 4.872s
	// 8.163s
	// 16.877s
	// 32s
	// 32s
	// give up after 7 retries
}

// A retry loop that stops at a permanent error and reports how many attempts
// it made.
func ExampleRetry_Do() {
	policy, _ := reconnect.New(reconnect.Constant{Interval: time.Millisecond}, reconnect.Limits{MaxRetries: 5})
	calls := 0
	err := reconnect.Retry{
		Policy: policy,
		Notify: func(n reconnect.Notice) { fmt.Printf("attempt %d failed: %v\n", n.Attempt, n.Cause) },
	}.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("broker busy")
		}
		return reconnect.Permanent(errors.New("not authorised"))
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, reconnect.ErrPermanent))
	// Output:
	// attempt 1 failed: broker busy
	// attempt 2 failed: broker busy
	// reconnect: permanent error after 3 attempts: not authorised
	// true
}

// A flood guard of 6 connects a minute: callers arriving together are spaced
// just far enough apart.
func ExampleFloodGuard() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	guard, _ := reconnect.NewFloodGuard(reconnect.FloodGuardConfig{Requests: 6, Window: time.Minute})
	for i := 0; i < 4; i++ {
		fmt.Println(guard.Reserve(now))
	}
	// Output:
	// 0s
	// 10s
	// 20s
	// 30s
}

// A large fleet behind a broker that admits only so many connects a second:
// FleetSafe's waits grow from each device's last draw and, at the cap, stay
// between half the cap and the cap.
func ExampleFleetSafe() {
	policy, err := reconnect.New(reconnect.DefaultFleetSafe, reconnect.Limits{MaxRetries: reconnect.RetryForever})
	if err != nil {
		panic(err)
	}
	b := reconnect.NewBackoff(policy, rand.NewPCG(1, 42))
	for range 8 {
		d, _ := b.Next(time.Time{})
		fmt.Print(d.Round(100*time.Millisecond), " ")
	}
	fmt.Println()
	// Output: 1.6s 3.6s 5.9s 12.5s 20.8s 16.1s 23.8s 28.5s
}
