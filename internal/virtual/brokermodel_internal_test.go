package virtual

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"

	"github.com/herdguard/herdguard/device"
	"github.com/herdguard/herdguard/fault"
	"github.com/herdguard/herdguard/internal/plan"
)

// The virtual engine's broker on its own: given an attempt's time, what
// becomes of it.
func TestBrokerModelAnswers(t *testing.T) {
	s := time.Second
	ask := func(bm *brokerModel, at time.Duration) answer { return bm.connect(at) }

	down := brokerModel{down: []window{{from: s, until: 31 * s}}}
	assert.Equal(t, answer{outcome: fault.Dropped, seen: -1}, ask(&down, 10*s), "down: the dial is refused, the broker sees nothing")
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 31 * s}, ask(&down, 31*s), "back at the outage's end")

	var refuse brokerModel
	refuse.limit(fault.Admission{Rate: 1, Burst: 2, Mode: fault.RefuseOverLimit}, 5*s)
	assert.Equal(t, fault.Accepted, ask(&refuse, 4*s).outcome, "no limit before it applies")
	assert.Equal(t, fault.Accepted, ask(&refuse, 5*s).outcome)
	assert.Equal(t, fault.Accepted, ask(&refuse, 5*s).outcome, "the burst")
	assert.Equal(t, answer{outcome: fault.Refused, seen: 5 * s}, ask(&refuse, 5*s), "over the limit: CONNACK 3")
	assert.Equal(t, fault.Accepted, ask(&refuse, 6*s).outcome, "a token a second")

	var pause brokerModel
	pause.limit(fault.Admission{Rate: 1, Burst: 1, Mode: fault.PauseOverLimit}, 0)
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 0}, ask(&pause, 0))
	assert.Equal(t, answer{outcome: fault.Accepted, seen: s, after: s}, ask(&pause, 0), "waits in the backlog for the next token")
	for range 8 {
		ask(&pause, 0)
	}
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 10 * s, after: 10 * s}, ask(&pause, 0), "a wait of exactly the connect timeout is served")
	assert.Equal(t, answer{outcome: fault.Dropped, seen: -1, after: plan.ConnectTimeout}, ask(&pause, 0),
		"the device gives up first and the broker never sees it")
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 11 * s, after: 10 * s}, ask(&pause, s),
		"a socket given up on gives its token back")

	var disconnect brokerModel
	disconnect.limit(fault.Admission{Rate: 1, Burst: 1, Mode: fault.DisconnectOverLimit}, 0)
	assert.Equal(t, fault.Accepted, ask(&disconnect, 0).outcome)
	assert.Equal(t, answer{outcome: fault.Throttled, seen: 0}, ask(&disconnect, 0), "accepted, then dropped")

	flap := brokerModel{flap: []window{{from: s, until: 61 * s, after: 2 * s}}}
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 0}, ask(&flap, 0))
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 30 * s, lostAfter: 2 * s}, ask(&flap, 30*s), "dropped 2 s after it is let in")
	assert.Equal(t, answer{outcome: fault.Accepted, seen: 61 * s}, ask(&flap, 61*s), "the flapping is over")

	for o, code := range map[fault.Outcome]int{fault.Dropped: device.NoConnack, fault.Refused: 3, fault.Accepted: 0, fault.Throttled: 0} {
		assert.Equal(t, code, answer{outcome: o}.code(), "the CONNACK code the device reads after %v", o)
	}
}

// The broker's bucket takes the same tokens as a rate.Limiter on the same
// times: allowed or not, the same time to act to the nanosecond, and the
// same state after a cancel, over random limits and call sequences (times
// bunched, spread and repeated; reservations cancelled at once and later),
// so the model admits exactly whom the limiter it replaced did.
func TestTheBrokersBucketIsRateLimitersArithmetic(t *testing.T) {
	epoch := time.Unix(1_700_000_000, 0).Truncate(time.Millisecond)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		limit, burst := math.Exp(r.Float64()*12-2), 1+r.IntN(50) // 0.14 to 22,000 a second
		lim, b := rate.NewLimiter(rate.Limit(limit), burst), newBucket(limit, burst)
		now := time.Duration(r.Int64N(int64(time.Hour)))
		type held struct {
			res *rate.Reservation
			act time.Duration
		}
		var reserved []held
		for call := range 400 {
			switch r.IntN(4) {
			case 0:
				now += time.Duration(r.Int64N(int64(time.Second / 10)))
			case 1:
				now += time.Duration(r.Int64N(int64(time.Duration(float64(time.Second) * float64(burst) / limit))))
			case 3:
				now += time.Duration(r.Int64N(10))
			}
			at := epoch.Add(now)
			switch k := r.IntN(5); {
			case k < 2:
				if want, got := lim.AllowN(at, 1), b.allow(now); want != got {
					t.Fatalf("seed %d, call %d (%g/s, burst %d, at %v): allow %v, rate.Limiter %v", seed, call, limit, burst, now, got, want)
				}
			case k < 4:
				res, act := lim.ReserveN(at, 1), b.reserve(now)
				if want := now + res.DelayFrom(at); act != want {
					t.Fatalf("seed %d, call %d (%g/s, burst %d, at %v): acts at %v, rate.Limiter %v", seed, call, limit, burst, now, act, want)
				}
				reserved = append(reserved, held{res, act})
			case len(reserved) > 0:
				k := r.IntN(len(reserved))
				reserved[k].res.CancelAt(at)
				b.cancel(now, reserved[k].act)
				reserved = slices.Delete(reserved, k, k+1)
			}
		}
	}
}
