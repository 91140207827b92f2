package policyfit

import (
	"math"
	"slices"

	"github.com/herdguard/herdguard/internal/policyfit/robust"
)

// The estimators read a family's parameters off robust features of the
// waits; the likelihood then chooses. They only have to land near.

// stepScale is one retry's feature: its index, value and sample size.
type stepScale struct {
	j    int
	v, n float64
}

// scales is f(xs) for every retry with at least minCount waits.
func scales(w *waits, minCount int, f func([]float64) float64) []stepScale {
	var out []stepScale
	for j, xs := range w.at {
		if v := f(xs); len(xs) >= minCount && v > 0 { // NaN for none
			out = append(out, stepScale{j, v, float64(len(xs))})
		}
	}
	return out
}

// pooledFrom is every wait at retry j and after.
func pooledFrom(w *waits, j int) []float64 { return slices.Concat(w.at[j:]...) }

// fitDeterministic reads an unjittered family's curve off the differences
// of a device's successive gaps (base x factor^j x (factor - 1), or the
// step), and off the levels (each retry's centre, a round trip on it)
// what they cannot: the cap, and the base from one difference.
func fitDeterministic(f Family, w *waits, minCount int) (params, bool) {
	p := params{cap: math.Inf(1)}
	if len(w.all) == 0 {
		return p, false
	}
	if f == Constant || f == NoBackoff {
		p.base = max(robust.Centre(w.all), sigmaMin)
		// one family, told by its fastest devices' gaps (a slow network's
		// round trips are the typical gap): never both as candidates
		return p, (f == NoBackoff) == (robust.Quantile(w.all, 0.05) < noBackoffGap)
	}
	// a retry's level counts only where its waits cluster: where a
	// jittered minority alone reached it, it tells no lock-step wait
	levels := scales(w, minCount, func(xs []float64) float64 {
		if c, share := robust.Cluster(xs); share >= 0.4 {
			return c
		}
		return 0
	})
	if len(levels) == 0 {
		return p, false
	}
	var steps []stepScale
	for j, xs := range w.diffs {
		if len(xs) >= minCount {
			steps = append(steps, stepScale{j, robust.Centre(xs), float64(len(xs))})
		}
	}
	growing := 0
	for growing < len(steps) && steps[growing].v > 0.01 &&
		(growing == 0 || steps[growing].v > 0.5*steps[growing-1].v) {
		growing++
	}
	if f == Linear {
		p.base, p.step = linearCurve(levels, steps[:growing])
	} else {
		p.base, p.factor = exponentialCurve(levels, steps[:growing])
	}
	if growing == 0 {
		return p, true // no growth seen, no cap: else a cap at the second wait makes it a constant
	}
	shifts := make([]float64, 0, len(levels))
	for _, l := range levels[:min(len(levels), growing)] {
		shifts = append(shifts, l.v-detWait(f, &p, l.j))
	}
	shift := robust.Median(shifts)
	for _, l := range levels {
		if l.j > 0 && l.v-shift < 0.9*detWait(f, &p, l.j) {
			p.cap = max(robust.Centre(pooledFrom(w, l.j))-shift, detWait(f, &p, 1))
			break
		}
	}
	return p, true
}

// linearCurve is the initial wait and step: the step from the
// differences, the initial wait (its round trip included: the two are one
// to the proxy) from the levels.
func linearCurve(levels, steps []stepScale) (initial, step float64) {
	step = levels[0].v / float64(levels[0].j+1) // no difference: the simulator's, initial = step
	if len(steps) > 0 {
		ds := make([]float64, len(steps))
		for i, s := range steps {
			ds[i] = s.v
		}
		step = robust.Median(ds)
	}
	initial = max(levels[0].v-float64(levels[0].j)*step, sigmaMin)
	return initial, max(step, minStep, 0.05*initial)
}

// exponentialCurve is the base and factor: from the ratio of successive
// differences where there are two, or a difference and its level (the
// round trip taken as 0) where there is one, or the level alone.
func exponentialCurve(levels, steps []stepScale) (base, factor float64) {
	var ratios []float64
	for i := 1; i < len(steps); i++ {
		ratios = append(ratios, math.Pow(steps[i].v/steps[i-1].v, 1/float64(steps[i].j-steps[i-1].j)))
	}
	switch {
	case len(ratios) > 0:
		factor = robust.Median(ratios)
	case len(steps) == 1:
		at := slices.IndexFunc(levels, func(l stepScale) bool { return l.j == steps[0].j })
		if at < 0 {
			return levels[0].v / math.Pow(2, float64(levels[0].j)), 2
		}
		factor = 1 + steps[0].v/levels[at].v
	default:
		return levels[0].v / math.Pow(2, float64(levels[0].j)), 2 // one retry tells no factor
	}
	factor = min(max(factor, minFactor), maxFactor)
	for i := 1; i < len(steps); i++ { // a retry the cap cut short (64 s, then 120 s) ends the curve
		if r := ratios[i-1]; r < 0.9*factor || r > 1.1*factor {
			steps = steps[:i]
			break
		}
	}
	if len(steps) < 2 {
		return steps[0].v / (math.Pow(factor, float64(steps[0].j)) * (factor - 1)), factor
	}
	// Least squares on the differences themselves: each is as precise
	// (the noise of two arrivals) whatever its size, so the longest pin
	// the factor, and the waits a storm's end reaches come out to the ms.
	fit := func(f float64) (b, ss float64) {
		var sxy, sxx float64
		for _, s := range steps {
			x := math.Pow(f, float64(s.j)) * (f - 1)
			sxy, sxx = sxy+s.n*s.v*x, sxx+s.n*x*x
		}
		b = sxy / sxx
		for _, s := range steps {
			d := s.v - b*math.Pow(f, float64(s.j))*(f-1)
			ss += s.n * d * d
		}
		return b, ss
	}
	factor = robust.Golden(func(f float64) float64 { _, ss := fit(f); return -ss },
		max(factor*0.95, minFactor), min(factor*1.05, maxFactor), 40)
	base, _ = fit(factor)
	return base, factor
}

// fitJittered estimates a jittered family's parameters (IoTCore's two
// variants, which differ at the cap, as two candidates).
func fitJittered(f Family, w *waits, minCount int) []params {
	switch f {
	case FullJitter, EqualJitter, Proportional, IoTCore:
		return fitExponentialJitter(f, w, minCount)
	case Decorrelated, FleetSafe:
		if p, ok := fitEnvelope(f, w); ok {
			return []params{p}
		}
	}
	return nil
}

// fitExponentialJitter reads a 2^n family's base from each retry's edges:
// FullJitter's top, EqualJitter's top and bottom, IoTCore's bottom (and
// its width), Proportional's middle (and its half-width). The first retry
// whose scale falls short of the curve starts the cap.
func fitExponentialJitter(f Family, w *waits, minCount int) []params {
	scale := func(xs []float64) float64 {
		lo, hi := robust.Edges(xs)
		switch f {
		case EqualJitter:
			return (hi + 2*lo) / 2
		case IoTCore:
			return lo
		case Proportional:
			return (lo + hi) / 2
		}
		return hi
	}
	sc := scales(w, minCount, scale)
	if len(sc) == 0 {
		return nil
	}
	p := params{factor: 2, cap: math.Inf(1)}
	if f == Proportional {
		p.factor = growth(sc)
	}
	capFrom := -1
	var bs, ns []float64
	width := -1.0 // IoTCore's at its first retry: the formula as written loses it at the cap
	for _, s := range sc {
		b := s.v / math.Pow(p.factor, float64(s.j))
		lo, hi := robust.Edges(w.at[s.j])
		if len(bs) > 0 && (b < 0.8*robust.WeightedMedian(bs, ns) || f == IoTCore && hi-lo < width/2) {
			capFrom = s.j
			break
		}
		if width < 0 {
			width = max(hi-lo, minJitter)
		}
		bs, ns = append(bs, b), append(ns, s.n)
	}
	p.base = max(robust.WeightedMedian(bs, ns), sigmaMin)
	switch f {
	case IoTCore:
		p.jitter = widthBelow(w, sc, capFrom, func(lo, hi float64) float64 { return hi - lo })
		p.jitter = max(p.jitter, minJitter, 0.05*p.base)
	case Proportional:
		r := widthBelow(w, sc, capFrom, func(lo, hi float64) float64 { return (hi - lo) / (hi + lo) })
		p.jitter = min(max(r, minFraction), maxFraction)
	}
	if capFrom < 0 {
		return []params{p}
	}
	pooled := pooledFrom(w, capFrom)
	lo, hi := robust.Edges(pooled)
	switch f {
	case FullJitter, EqualJitter:
		p.cap = hi
	case Proportional:
		p.cap = (lo + hi) / 2
	case IoTCore:
		atCap := p
		p.cap, atCap.cap, atCap.atCap = robust.Centre(pooled), lo, true
		return []params{p, atCap}
	}
	return []params{p}
}

// growth is the factor between successive retries' scales: the median
// of those that grow, 2 where none does.
func growth(sc []stepScale) float64 {
	var ratios []float64
	for i := 1; i < len(sc); i++ {
		if r := math.Pow(sc[i].v/sc[i-1].v, 1/float64(sc[i].j-sc[i-1].j)); r > 1.1 {
			ratios = append(ratios, r)
		}
	}
	if len(ratios) == 0 {
		return 2
	}
	return min(max(robust.Median(ratios), minFactor), maxFactor)
}

// widthBelow is the median of width(edges) over the retries before the
// cap.
func widthBelow(w *waits, sc []stepScale, capFrom int, width func(lo, hi float64) float64) float64 {
	var ws, ns []float64
	for _, s := range sc {
		if capFrom >= 0 && s.j >= capFrom-1 {
			break // the retry before the cap may be cut by it
		}
		lo, hi := robust.Edges(w.at[s.j])
		ws, ns = append(ws, width(lo, hi)), append(ns, s.n)
	}
	if len(ws) == 0 {
		lo, hi := robust.Edges(w.at[sc[0].j])
		return width(lo, hi)
	}
	return robust.WeightedMedian(ws, ns)
}

// fitEnvelope estimates the families whose envelope grows from the last
// wait. The base sets the first wait (U[b, 3b), U[1.5b, 3b)) and the
// decorrelated floor; the cap is where waits pile up (Decorrelated waits
// it two times in three once there) or stop (FleetSafe's top).
func fitEnvelope(f Family, w *waits) (params, bool) {
	first := append(slices.Clone(w.firsts), w.at[0]...)
	if len(first) == 0 || len(w.all) < 2 {
		return params{}, false
	}
	lo, hi := robust.Edges(first)
	p := params{base: (lo/1.5 + hi/3) / 2}
	if f == Decorrelated {
		p.base = robust.Quantile(w.all, 0.005) // its floor, read off every wait
	}
	p.base = max(p.base, sigmaMin)
	upper := w.all[len(w.all)/2:] // sorted
	if _, p.cap = robust.Edges(upper); f == Decorrelated {
		p.cap = robust.Centre(upper)
	}
	p.cap = max(p.cap, min(robust.Quantile(w.all, 0.99), 3*p.base), p.base)
	return p, true
}
