package policyfit

import (
	"math"
)

// params are a family's parameters in seconds; the zero value of a field a
// family does not have.
type params struct {
	base   float64
	factor float64 // Exponential, Proportional
	step   float64 // Linear
	cap    float64 // +Inf: not reached
	jitter float64 // IoTCore: width (s); Proportional: the fraction r
	atCap  bool    // IoTCore: jitter added above the cap
}

// Where one family could become another, its parameters are kept apart: a
// factor near 1 is a constant, an IoTCore jitter near 0 an exponential.
const (
	minFactor    = 1.2
	maxFactor    = 4
	minFraction  = 0.05
	maxFraction  = 0.25
	minJitter    = 0.02 // s, and 5 % of the base
	minStep      = 0.02 // s, and 5 % of the initial wait
	noBackoffGap = 0.25 // s: a constant gap below it is no backoff but the round trip
	sigmaMin     = 0.001
	maxDetSigma  = 0.05 // s: the most stamp and network noise an unjittered family may claim
	outlierShare = 0.01 // a gap the family cannot explain: a late packet, a host's pause
)

// deterministic reports whether f draws no jitter: its fits model each
// device's round trip as a shift of its own (see model).
func deterministic(f Family) bool {
	return f == NoBackoff || f == Constant || f == Linear || f == Exponential
}

// detWait is an unjittered family's wait before retry j (0-based).
func detWait(f Family, p *params, j int) float64 {
	switch f {
	case Linear:
		return min(p.cap, p.base+float64(j)*p.step)
	case Exponential:
		return min(p.cap, p.base*math.Pow(p.factor, float64(j)))
	}
	return p.base
}

// pow2 is min(limit, base x 2^j).
func pow2(base float64, j int, limit float64) float64 {
	return min(limit, math.Ldexp(base, min(j, 1000)))
}

// hangsOnPrev reports whether f's wait hangs on the one before it: only
// then does waitDist read prev.
func hangsOnPrev(f Family) bool { return f == Decorrelated || f == FleetSafe }

// waitDist is f's wait before retry j, prev being the wait before it (0
// before the first; read where hangsOnPrev): an unjittered family's is an
// atom.
func waitDist(f Family, p *params, j int, prev float64) dist {
	switch f {
	case FullJitter:
		return uniform(0, pow2(p.base, j, p.cap))
	case EqualJitter:
		v := pow2(p.base, j, p.cap)
		return uniform(v/2, v)
	case Proportional:
		v := min(p.cap, p.base*math.Pow(p.factor, float64(j)))
		return uniform(v*(1-p.jitter), v*(1+p.jitter))
	case IoTCore:
		return iotCoreWait(p, j)
	case Decorrelated:
		hi := 3 * max(prev, p.base)
		switch {
		case p.base >= p.cap:
			return atom(p.cap)
		case hi <= p.cap:
			return uniform(p.base, hi)
		}
		return uniformCapped(p.base, hi, p.cap)
	case FleetSafe:
		hi := min(p.cap, 3*max(prev, p.base))
		return uniform(hi/2, hi)
	}
	return atom(detWait(f, p, j))
}

// iotCoreWait is reconnect.IoTCore's wait: the formula as written waits
// exactly the cap once 2^n x Base + U[0, Jitter) passes it; JitterAtCap
// adds the jitter to the capped exponential.
func iotCoreWait(p *params, j int) dist {
	e := pow2(p.base, j, p.cap)
	switch {
	case p.atCap || e+p.jitter <= p.cap:
		return uniform(e, e+p.jitter)
	case e >= p.cap:
		return atom(p.cap)
	}
	return uniformCapped(e, e+p.jitter, p.cap)
}

// ownParams counts a family's parameters for the BIC: its shape's, the cap
// if reached, and the noise's (an unjittered family's shift, its spread and
// sigma; a jittered one's mu and sigma).
func ownParams(f Family, p *params) int {
	k := map[Family]int{NoBackoff: 1, Constant: 1, Linear: 2, Exponential: 2, Proportional: 3,
		FullJitter: 1, EqualJitter: 1, Decorrelated: 1, IoTCore: 2, FleetSafe: 1}[f]
	if !math.IsInf(p.cap, 1) && f != Constant && f != NoBackoff {
		k++
	}
	if deterministic(f) {
		return k + 3
	}
	return k + 2
}

// dist is one wait's distribution: at most a uniform part and an atom (a
// fixed wait, or the cap), a piece with lo == hi.
type dist struct {
	p [2]piece
	n int
}

type piece struct{ lo, hi, w float64 }

func atom(x float64) dist { return dist{p: [2]piece{{x, x, 1}}, n: 1} }

func uniform(lo, hi float64) dist {
	if hi-lo < 1e-9 {
		return atom(lo)
	}
	return dist{p: [2]piece{{lo, hi, 1}}, n: 1}
}

// uniformCapped is U[lo, hi) whose draws at or past limit are limit
// (lo < limit < hi).
func uniformCapped(lo, hi, limit float64) dist {
	w := (limit - lo) / (hi - lo)
	return dist{p: [2]piece{{lo, limit, w}, {limit, limit, 1 - w}}, n: 2}
}

// density is the density of a draw plus N(0, sigma^2) noise at x: the
// smoothing is what lets an unjittered family's atom have a density.
func (d *dist) density(x, sigma float64) float64 {
	sum := 0.0
	for _, p := range d.p[:d.n] {
		h := p.hi - p.lo
		switch {
		case h < 1e-3*sigma:
			sum += p.w * normPDF((x-p.lo)/sigma) / sigma
		case x-p.lo > 9*sigma && p.hi-x > 9*sigma: // well inside: the noise changes nothing
			sum += p.w / h
		case p.lo-x > 9*sigma || x-p.hi > 9*sigma: // well outside
		default:
			sum += p.w * (normCDF((x-p.lo)/sigma) - normCDF((x-p.hi)/sigma)) / h
		}
	}
	return sum
}

func (d dist) mean() float64 { // an unused piece weighs 0
	return d.p[0].w*(d.p[0].lo+d.p[0].hi)/2 + d.p[1].w*(d.p[1].lo+d.p[1].hi)/2
}

// cdf is the distribution function of a draw plus N(0, sigma^2) noise.
func (d *dist) cdf(x, sigma float64) float64 {
	sum := 0.0
	for _, p := range d.p[:d.n] {
		if h := p.hi - p.lo; h < 1e-3*sigma {
			sum += p.w * normCDF((x-p.lo)/sigma)
		} else {
			sum += p.w * sigma / h * (intNormCDF((x-p.lo)/sigma) - intNormCDF((x-p.hi)/sigma))
		}
	}
	return sum
}

// windowed is the density at x of a draw from d plus an offset uniform on
// [0, width) plus noise: a first arrival, whose offset is the time the
// device took to notice the loss and reach the proxy.
func (d *dist) windowed(x, width, sigma float64) float64 {
	return (d.cdf(x, sigma) - d.cdf(x-width, sigma)) / width
}

const invSqrt2Pi = 0.3989422804014327

func normPDF(z float64) float64 { return invSqrt2Pi * math.Exp(-z*z/2) }

func normCDF(z float64) float64 {
	switch {
	case z < -9:
		return 0
	case z > 9:
		return 1
	}
	return 0.5 * math.Erfc(-z/math.Sqrt2)
}

// intNormCDF is the integral of normCDF from -inf to z.
func intNormCDF(z float64) float64 {
	if z < -9 {
		return 0
	}
	return z*normCDF(z) + normPDF(z)
}
