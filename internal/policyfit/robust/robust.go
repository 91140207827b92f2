// Package robust holds the estimates policyfit reads a fleet's waits
// with, which a few outliers do not move (quantiles, medians, a sample's
// edges and densest cluster), and the numerics its fits need: a sum of
// exponentials in logs and a golden-section search. Every function only
// reads its slices unless its name says InPlace.
package robust

import (
	"cmp"
	"math"
	"slices"
)

// SortedCopy returns xs sorted, leaving xs as it is: xs itself if it is
// sorted already (the waits at one retry are kept sorted).
func SortedCopy(xs []float64) []float64 {
	if slices.IsSorted(xs) {
		return xs
	}
	return slices.Sorted(slices.Values(xs))
}

// Quantile is the p-quantile of sorted s, interpolated; NaN for none.
func Quantile(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	x := p * float64(len(s)-1)
	if i := int(x); i < len(s)-1 {
		return s[i] + (x-float64(i))*(s[i+1]-s[i])
	}
	return s[len(s)-1]
}

// Median is the median of xs, interpolated; NaN for none.
func Median(xs []float64) float64 { return Quantile(SortedCopy(xs), 0.5) }

// MedianInPlace is Median, sorting xs to find it.
func MedianInPlace(xs []float64) float64 {
	slices.Sort(xs)
	return Quantile(xs, 0.5)
}

// Edges estimates the support [lo, hi) of a uniform sample from its 5 %
// and 95 % quantiles, which a few outliers do not move (below 20 values,
// its extremes, widened as usual).
func Edges(xs []float64) (lo, hi float64) {
	s := SortedCopy(xs)
	n := len(s)
	switch {
	case n == 0:
		return math.NaN(), math.NaN()
	case n == 1:
		return s[0], s[0]
	case n < 20:
		w := (s[n-1] - s[0]) / float64(n-1)
		return s[0] - w, s[n-1] + w
	}
	q1, q2 := Quantile(s, 0.05), Quantile(s, 0.95)
	w := (q2 - q1) / 0.9
	return q1 - 0.05*w, q2 + 0.05*w
}

// Cluster is where most of xs sit (the median of the values near the
// densest window), and the share of xs near it. A lock-step group's waits
// at one retry are a tight cluster (each device's round trip apart),
// which a jittered minority around it does not move, as it would a median.
func Cluster(xs []float64) (c, share float64) {
	s := SortedCopy(xs)
	if len(s) == 0 {
		return math.NaN(), 0
	}
	best, bi, bj, j := 0, 0, 0, 0
	for i, x := range s {
		for j < len(s) && s[j] <= x+max(0.05, 0.1*x) {
			j++
		}
		if j-i > best {
			best, bi, bj = j-i, i, j
		}
	}
	c = Quantile(s[bi:bj], 0.5)
	w := max(0.1, 0.2*c)
	lo, _ := slices.BinarySearch(s, c-w)
	hi, _ := slices.BinarySearch(s, c+w)
	return Quantile(s[lo:hi], 0.5), float64(hi-lo) / float64(len(s))
}

// Centre is Cluster's centre alone.
func Centre(xs []float64) float64 { c, _ := Cluster(xs); return c }

// WeightedMedian is the median of xs each counted ws times.
func WeightedMedian(xs, ws []float64) float64 {
	idx := make([]int, len(xs))
	total := 0.0
	for i := range idx {
		idx[i], total = i, total+ws[i]
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	acc := 0.0
	for _, i := range idx {
		if acc += ws[i]; acc >= total/2 {
			return xs[i]
		}
	}
	return math.NaN()
}

// LogSumExp is log(e^a + e^b) without overflow, for finite a and b.
func LogSumExp(a, b float64) float64 { return max(a, b) + math.Log1p(math.Exp(-math.Abs(a-b))) }

// Golden maximises f over [lo, hi] by golden-section search in n steps;
// f need only be unimodal near its maximum.
func Golden(f func(float64) float64, lo, hi float64, n int) float64 {
	const r = 0.6180339887498949
	a, b := lo, hi
	c, d := b-r*(b-a), a+r*(b-a)
	fc, fd := f(c), f(d)
	for range n {
		if fc >= fd {
			b, d, fd = d, c, fc
			c = b - r*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + r*(b-a)
			fd = f(d)
		}
	}
	if fc >= fd {
		return c
	}
	return d
}
