package agents

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/herdguard/herdguard/configserver"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/attempt"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/reconnect"
	"github.com/herdguard/herdguard/remoteconfig"
)

// fetchSpread is how far a fleet spreads the config fetch a push triggers
// (remoteconfig.Config.FirstSpread's default).
const fetchSpread = 10 * time.Second

// setupConfigs starts the config server and gives every device a Fetcher
// on its (scaled) policy, which setup has already built.
func (f *Fleet) setupConfigs() error {
	// In memory unless the run is over TCP: an in-memory server also runs
	// in a synctest bubble, in exact virtual time.
	if f.p.Transport == plan.Mem {
		f.configs = configserver.NewMemoryServer()
	} else {
		f.configs = configserver.NewServer()
	}
	f.configs.SetConfig("", []byte(`{"settings": {"telemetry": "on"}}`))
	// One transport for the fleet, as many connections as devices up to
	// 4,000 (over TCP, 8,000 descriptors with the server's side).
	client := f.configs.Client(4000)
	if hint := f.p.RetryAfter; hint%time.Second != 0 {
		f.warn("Retry-After is sent in whole seconds: %v is sent as %v", hint, (hint + time.Second - 1).Truncate(time.Second))
	}
	for _, i := range f.ids {
		fetcher, err := remoteconfig.New(remoteconfig.Config{URL: f.configs.DeviceURL(deviceID(i)), Client: client,
			AllowPlaintext: true, // the simulator's own in-process server
			Retry:          reconnect.Retry{Policy: f.wiring.TimingOf(i).Policy, RetryAfterJitter: f.p.RetryAfterJitter}, Source: rand.NewPCG(f.p.Seed, uint64(i)|1<<63)})
		if err != nil {
			return err
		}
		f.fetchers = append(f.fetchers, fetcher)
	}
	return nil
}

// configOutage makes the config server answer 503 for the first half of
// the outage and 429 for the second. Both carry Retry-After: the time left
// in that half, unless the run names a hint. Meanwhile every device
// fetches once, spread over fetchSpread, as after a config push. The
// window's recovery is the fetches' end. The run is in real time (time
// scale 1).
func (f *Fleet) configOutage(ctx context.Context, t0 time.Time) error {
	outage, hint := f.p.Outage, f.p.RetryAfter
	atEnd := hint == 0
	for _, fw := range []configserver.Fault{
		{Kind: configserver.Unavailable, RetryAfter: hint, RetryAtEnd: atEnd, From: t0, Until: t0.Add(outage / 2)},
		{Kind: configserver.TooManyRequests, RetryAfter: hint, RetryAtEnd: atEnd, From: t0.Add(outage / 2), Until: t0.Add(outage)},
	} {
		if err := f.configs.AddFault(fw); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(f.fetchers))
	for k, fetcher := range f.fetchers {
		wait := time.Duration(rand.New(rand.NewPCG(f.p.Seed, uint64(f.ids[k]))).Float64() * float64(fetchSpread))
		wg.Go(func() {
			if errs[k] = reconnect.Sleep(ctx, nil, wait); errs[k] == nil {
				errs[k] = fetcher.Fetch(ctx)
			}
		})
	}
	f.w.fetched = func() error {
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("config fetches failed: %w", err)
		}
		return nil
	}
	return nil
}

// addConfigRequests adds to b the config server's requests since t0, as
// the fleet's side: an answer with the config (200, or 304 for one
// already held) is a success.
func (f *Fleet) addConfigRequests(b *report.Builder, t0 time.Time) {
	var out []configserver.Request
	for _, q := range f.configs.Requests() {
		if !q.Time.Before(t0) {
			out = append(out, q)
		}
	}
	slices.SortStableFunc(out, func(x, y configserver.Request) int { return attempt.Order(x.Time, x.Device, y.Time, y.Device) })
	for _, q := range out {
		o := fault.Refused
		if q.Status == http.StatusOK || q.Status == http.StatusNotModified {
			o = fault.Accepted
		}
		dev, _ := attempt.DeviceIndex(q.Device)
		b.Add(attempt.Record{T: b.Since(q.Time), Lag: -1, Device: int32(dev), Code: int32(q.Status), Outcome: o})
	}
}
