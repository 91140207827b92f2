package virtual

import (
	"math"
	"slices"
	"time"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// brokerModel is the virtual engine's broker: it refuses dials while down,
// answers at once when up, and applies admission (refuse, pause or
// accept-then-disconnect) and flapping as the test broker does. It knows
// nothing of devices or of the event queue: given an attempt's time, it
// says what became of it.
type brokerModel struct {
	down    []window // the outages
	busy    []window // busy spells: every connect refused (busy-node)
	flap    []window // the flapping windows, each with its session length
	lim     *bucket  // nil: no admission limit
	limFrom time.Duration
	mode    fault.AdmissionMode
}

// window is [from, until): an outage, or a flapping window whose sessions
// last after.
type window struct{ from, until, after time.Duration }

func (w window) holds(t time.Duration) bool { return t >= w.from && t < w.until }

// flapsEnd is when the last flapping window ends, plus its sessions'
// length: no drop is due after it. 0 with none.
func (bm *brokerModel) flapsEnd() time.Duration {
	end := time.Duration(0)
	for _, w := range bm.flap {
		end = max(end, w.until+w.after)
	}
	return end
}

// answer is what the modelled broker does with one attempt. It has four
// fields, which the compiler keeps in registers: with six, every answer
// went through memory: 6 % of the engine's time in a refusing storm.
type answer struct {
	outcome fault.Outcome
	// seen is when the broker took the attempt (its side of the record);
	// negative: never, a refused dial or a paused socket given up on.
	seen time.Duration
	// after is when the device hears (a paused socket waits for its token,
	// or gives up after the connect timeout); 0: at once.
	after time.Duration
	// lostAfter > 0: the broker drops the session that much later
	// (flapping, whose sessions last > 0). A Throttled session is dropped
	// at once.
	lostAfter time.Duration
}

// code is the CONNACK code a 3.1.1 device reads. There is none for a dial
// refused or a socket given up on. It is 3 (server unavailable) for a
// refusal over the limit or while busy. It is 0 otherwise. (An MQTT 5
// device reads the reason code the engine names.)
func (a answer) code() int {
	switch a.outcome {
	case fault.Dropped:
		return device.NoConnack
	case fault.Refused:
		return 3
	}
	return 0
}

// limit applies an admission limit (a.Rate > 0) from virtual time from on.
func (bm *brokerModel) limit(a fault.Admission, from time.Duration) {
	bm.lim = newBucket(a.Rate, max(a.Burst, 1))
	bm.limFrom, bm.mode = from, a.Mode
}

// busyAt says whether the broker is busy at t: it refuses every connect.
func (bm *brokerModel) busyAt(t time.Duration) bool {
	return slices.ContainsFunc(bm.busy, func(w window) bool { return w.holds(t) })
}

// connect answers an attempt arriving at now.
func (bm *brokerModel) connect(now time.Duration) answer {
	if slices.ContainsFunc(bm.down, func(w window) bool { return w.holds(now) }) {
		return answer{outcome: fault.Dropped, seen: -1}
	}
	if bm.busyAt(now) {
		return answer{outcome: fault.Refused, seen: now}
	}
	if bm.lim != nil && now >= bm.limFrom {
		switch bm.mode {
		case fault.RefuseOverLimit:
			if !bm.lim.allow(now) {
				return answer{outcome: fault.Refused, seen: now}
			}
		case fault.PauseOverLimit: // the socket waits for a token, up to the connect timeout
			act := bm.lim.reserve(now)
			if wait := act - now; wait > 0 {
				if wait > plan.ConnectTimeout {
					// The device gives up first; the broker never took the
					// socket off its backlog, so it never saw it.
					bm.lim.cancel(now, act)
					return answer{outcome: fault.Dropped, seen: -1, after: plan.ConnectTimeout}
				}
				// A broker that goes down meanwhile resets its backlog: the
				// socket fails then, unseen.
				for _, w := range bm.down {
					if w.from > now && w.from <= now+wait {
						bm.lim.cancel(now, act)
						return answer{outcome: fault.Dropped, seen: -1, after: w.from - now}
					}
				}
				// taken off the backlog when a token frees
				return answer{outcome: fault.Accepted, seen: now + wait, after: wait}
			}
		case fault.DisconnectOverLimit:
			if !bm.lim.allow(now) {
				return answer{outcome: fault.Throttled, seen: now}
			}
		}
	}
	a := answer{outcome: fault.Accepted, seen: now}
	if i := slices.IndexFunc(bm.flap, func(w window) bool { return w.holds(now) }); i >= 0 {
		a.lostAfter = bm.flap[i].after
	}
	return a
}

// bucket is the broker's admission limit: golang.org/x/time/rate's token
// bucket, one token a connect. It does that bucket's arithmetic step for
// step, with the same float operations in the same order. The same devices
// therefore get the same tokens. It works on durations since the engine's
// epoch rather than on time.Time. It has no mutex, which the model does not
// need, as it runs on one goroutine. The broker's limiter was a tenth of a
// million-device grid's time. A test drives it beside a rate.Limiter on the
// same times.
type bucket struct {
	limit     float64 // tokens a second, > 0
	burst     float64
	tokens    float64
	last      time.Duration // when tokens was last worked out, once used
	lastEvent time.Duration // the latest reservation's time to act
	used      bool          // last is set; a new bucket is full
}

func newBucket(limit float64, burst int) *bucket {
	return &bucket{limit: limit, burst: float64(burst), tokens: float64(burst)}
}

// advance is the tokens there are at t (rate.Limiter.advance). A new
// limiter's last is the zero time, centuries before t: it is full.
func (b *bucket) advance(t time.Duration) float64 {
	if !b.used {
		return b.burst
	}
	last := min(b.last, t)
	tokens := b.tokens + (t-last).Seconds()*b.limit
	return min(tokens, b.burst)
}

// take takes a token at t if the wait for it is at most maxWait, and
// returns when it may be used (rate.Limiter.reserveN).
func (b *bucket) take(t, maxWait time.Duration) (act time.Duration, ok bool) {
	tokens := b.advance(t) - 1
	var wait time.Duration
	if tokens < 0 {
		wait = tokenTime(-tokens, b.limit)
	}
	if wait > maxWait {
		return 0, false
	}
	b.last, b.used, b.tokens, b.lastEvent = t, true, tokens, t+wait
	return t + wait, true
}

// allow takes a token at t if one is there (rate.Limiter.AllowN(t, 1)).
func (b *bucket) allow(t time.Duration) bool {
	_, ok := b.take(t, 0)
	return ok
}

// reserve takes the next token, however far ahead, and returns when it
// may be used (rate.Limiter.ReserveN(t, 1), its time to act).
func (b *bucket) reserve(t time.Duration) time.Duration {
	act, _ := b.take(t, math.MaxInt64)
	return act
}

// cancel gives back, at t, the token reserved to be used at act, less what
// later reservations have taken since (rate.Reservation.CancelAt).
func (b *bucket) cancel(t, act time.Duration) {
	if act < t {
		return
	}
	restore := 1 - (b.lastEvent-act).Seconds()*b.limit
	if restore <= 0 {
		return
	}
	tokens := min(b.advance(t)+restore, b.burst)
	b.last, b.used, b.tokens = t, true, tokens
	if act == b.lastEvent {
		if prev := act + tokenTime(-1, b.limit); prev >= t {
			b.lastEvent = prev
		}
	}
}

// tokenTime is how long limit takes to make tokens
// (rate.Limit.durationFromTokens).
func tokenTime(tokens, limit float64) time.Duration {
	d := tokens / limit * float64(time.Second)
	if d > float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(d)
}
