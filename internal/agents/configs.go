package agents

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/reconnect"
)

// fetchSpread is how far a fleet spreads the config fetch a push triggers
// (device.FetcherConfig.FirstSpread's default).
const fetchSpread = 10 * time.Second

// setupConfigs starts the config server and gives every device a Fetcher
// on the run's (scaled) policy, which setup has already built.
func (r *run) setupConfigs() error {
	// In memory unless the run is over TCP: an in-memory server also runs
	// in a synctest bubble, in exact virtual time.
	if r.c.Transport == plan.Mem {
		r.configs = configserver.NewMemoryServer()
	} else {
		r.configs = configserver.NewServer()
	}
	r.configs.SetConfig("", []byte(`{"settings": {"telemetry": "on"}}`))
	// One transport for the fleet, as many connections as devices up to
	// 4,000 (over TCP, 8,000 descriptors with the server's side).
	client := r.configs.Client(4000)
	if hint := r.c.RetryAfter; hint%time.Second != 0 {
		r.warn("Retry-After is sent in whole seconds: %v is sent as %v", hint, (hint + time.Second - 1).Truncate(time.Second))
	}
	for _, i := range r.ids {
		f, err := device.NewFetcher(device.FetcherConfig{URL: r.configs.DeviceURL(clientID(i)), Client: client,
			AllowPlaintext: true, // the simulator's own in-process server
			Retry:          reconnect.Retry{Policy: r.timingOf(i).Policy, RetryAfterJitter: r.c.RetryAfterJitter}, Source: rand.NewPCG(r.c.Seed, uint64(i)|1<<63)})
		if err != nil {
			return err
		}
		r.fetchers = append(r.fetchers, f)
	}
	return nil
}

// configOutage makes the config server answer 503 for the first half of
// the outage and 429 for the second, both with Retry-After (the time left
// in that half unless the run names a hint), while every device fetches
// once (spread over fetchSpread, as after a config push). It returns when
// the fetches are done. The run is in real time (time scale 1).
func (r *run) configOutage(ctx context.Context, t0 time.Time) (disruption, error) {
	outage, hint := r.c.Outage, r.c.RetryAfter
	d := disruption{t0: t0, returned: t0.Add(outage)}
	atEnd := hint == 0
	for _, f := range []configserver.Fault{
		{Kind: configserver.Unavailable, RetryAfter: hint, RetryAtEnd: atEnd, From: t0, Until: t0.Add(outage / 2)},
		{Kind: configserver.TooManyRequests, RetryAfter: hint, RetryAtEnd: atEnd, From: t0.Add(outage / 2), Until: t0.Add(outage)},
	} {
		if err := r.configs.AddFault(f); err != nil {
			return d, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(r.fetchers))
	for k, f := range r.fetchers {
		wait := time.Duration(rand.New(rand.NewPCG(r.c.Seed, uint64(r.ids[k]))).Float64() * float64(fetchSpread))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[k] = reconnect.Sleep(ctx, nil, wait); errs[k] == nil {
				errs[k] = f.Fetch(ctx)
			}
		}()
	}
	d.wait = func() error {
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("config fetches failed: %w", err)
		}
		return nil
	}
	return d, nil
}

// configAttempts are the config server's requests since t0; an answer with
// the config (200, or 304 for one already held) is a success.
func (r *run) configAttempts(t0 time.Time) []sighting {
	var out []sighting
	for _, q := range r.configs.Requests() {
		if q.Time.Before(t0) {
			continue
		}
		o := fault.Refused
		if q.Status == http.StatusOK || q.Status == http.StatusNotModified {
			o = fault.Accepted
		}
		out = append(out, sighting{at: q.Time, clientID: q.Device, outcome: o, code: q.Status})
	}
	return inOrder(out)
}
