package rendezvous_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/herdguard/herdguard/internal/rendezvous"
)

// Three shards of one storm meet in a directory they share, and each
// learns the same instant: when the last of them was ready.
func ExampleMeet() {
	dir, err := os.MkdirTemp("", "ready-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	plan := []string{"Devices=300", "Policy=fleet-safe", "Scenario=broker-restart"}
	last := make([]time.Time, 3)
	var wg sync.WaitGroup
	for shard := range 3 {
		wg.Go(func() {
			m, err := rendezvous.Meet(context.Background(), dir, shard, 3, plan, time.Minute)
			if err != nil {
				panic(err)
			}
			last[shard] = m.LastReady()
		})
	}
	wg.Wait()
	fmt.Println("one instant:", last[0].Equal(last[1]) && last[1].Equal(last[2]))
	// Output: one instant: true
}
