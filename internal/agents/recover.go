package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/herdguard/herdguard/internal/agents/observer"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/report"
)

// ErrNotRecovered is wrapped when a fleet is not back within its bound,
// whichever engine ran it.
var ErrNotRecovered = report.ErrNotRecovered

// Watch is one window of a fleet's life, watched: from its first
// disruption until the fleet was back, or the wait for it gave up. It is a
// plain value, for Report.
type Watch struct {
	T0 time.Time // the first disruption (observe: the first session lost)
	// Returned is when the broker was back after the first disruption
	// (node restarts that follow it: the last), as the plan has it for a
	// run (plan.FirstReturn).
	Returned time.Time
	// At is each disruption's start after T0, unscaled: the window's
	// recoveries, each judged on its own; Disruptions is what each was.
	At          []time.Duration
	Disruptions []plan.Event
	// Until is when the fleet stopped being watched: once everyone was
	// back and a cap's quiet passed (nobody was left to retry), or when the
	// wait gave up.
	Until     time.Time
	Recovered bool // every device came back
	// SessionsLost counts the sessions the devices lost in the window.
	SessionsLost int
}

// AwaitRecovery closes the window the disruptions since the last recovery
// opened. It waits for those the fleet's return depends on to end (an
// outage, a flapping window, a black hole). It waits for every device to
// hear of the last one, and for every device to be back, within the
// plan's bound. Then it waits for every attempt's outcome. It returns the
// window, and an error that wraps ErrNotRecovered when the bound passed
// first, or is ctx's when ctx ended. Either way the window can still be
// reported. Any other error (a disruption that could not end) means it
// cannot.
func (f *Fleet) AwaitRecovery(ctx context.Context) (Watch, error) {
	w := f.w
	if w == nil {
		return Watch{}, errNoWindow
	}
	f.w = nil
	rec := Watch{T0: w.t0, Returned: w.returned, At: w.at, Disruptions: w.events}
	err := f.awaitBack(ctx, w)
	if w.stopProgress != nil {
		w.stopProgress()
	}
	f.devlog.AwaitSettled(ctx, f.scale(plan.ConnectTimeout)+time.Second)
	f.nodes.Settle(ctx, f.scale(plan.ConnectTimeout)+time.Second)
	rec.Recovered, rec.SessionsLost, rec.Until = err == nil, f.devlog.Losses(), time.Now()
	if rec.Recovered { // nobody left to retry for a cap after the last came back
		rec.Until = rec.Until.Add(f.scale(f.p.MaxBackoff))
	}
	return rec, err
}

// awaitBack waits for w's disruptions to end and its fleet to come back.
func (f *Fleet) awaitBack(ctx context.Context, w *window) error {
	for _, end := range w.ends {
		select {
		case <-end:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := f.faultsErr(); err != nil {
		return err
	}
	if w.fetched != nil {
		return w.fetched()
	}
	if n := w.noticed; n != nil {
		// Until each device hears of the disruption, it still says it is
		// connected: the wait for everyone back would end before it began.
		bound := f.wiring.KeepAlive + time.Minute
		if err := f.devlog.AwaitNoticed(ctx, n.at, n.devices, bound); err != nil {
			return err
		}
	}
	n, bound := len(f.ids), f.recoverBound()
	if err := f.obs.Await(ctx, bound, func(k int) bool { return k == n }); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %d of %d devices back within %v", ErrNotRecovered, f.obs.Connected(), n, bound)
	}
	return nil
}

// reportable reports whether a window whose wait ended in err can still
// be reported: it is back, not back in time, or interrupted.
func reportable(ctx context.Context, err error) bool {
	return err == nil || errors.Is(err, ErrNotRecovered) || ctx.Err() != nil
}

// progress prints connected/total and attempts per second once a second,
// from t0 until stop.
func progress(w io.Writer, obs observer.Observer, total int, scale float64, t0 time.Time) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := obs.Attempted()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				n := obs.Attempted()
				fmt.Fprintf(w, "t=%5.0fs  connected %d/%d  attempts/s %d\n",
					time.Since(t0).Seconds()*scale, obs.Connected(), total, int(float64(n-last)/scale))
				last = n
			}
		}
	}()
	return func() { close(done); <-finished }
}
