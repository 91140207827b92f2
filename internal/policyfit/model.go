package policyfit

import (
	"math"

	"github.com/herdguard/herdguard/internal/policyfit/robust"
)

// model is a family with its parameters and its noise. Under an
// unjittered family each device's round trip is a shift of its own,
// N(shift, shiftSpread^2); a jittered family's jitter dwarfs it, and every
// gap carries the mean shift mu. Either way a share outlierShare of the
// gaps may be anything in [0, span): a late packet or a host's pause must
// not sink a family. A model and its copies share their wait table: none
// is safe for concurrent use.
type model struct {
	fam Family
	p   params

	sigma              float64
	mu                 float64 // jittered
	shift, shiftSpread float64 // unjittered

	pImm   float64 // the share of devices whose first attempt is immediate
	notice float64 // a first arrival's offset is U[0, notice)
	out    float64 // an outlier's density, its share included
	lnOut  float64

	waits *waitTable // made on first use; copies of the model share it
}

// waitTable holds the waits of a family whose wait does not hang on the
// one before it, by retry index, for the parameters they were made with:
// a fit's likelihood asks for the same few waits once a device.
type waitTable struct {
	of params
	n  int // d[:n] are of's
	d  [maxAttempts + 1]dist
}

// wait is waitDist(m.fam, &m.p, j, prev), the same to the bit, kept in
// m.waits where prev does not matter. A search that changes m.p in place
// finds the table made for other parameters and makes it anew.
func (m *model) wait(j int, prev float64) dist {
	if hangsOnPrev(m.fam) || j > maxAttempts {
		return waitDist(m.fam, &m.p, j, prev)
	}
	if m.waits == nil {
		m.waits = &waitTable{of: m.p}
	}
	t := m.waits
	if t.of != m.p {
		t.of, t.n = m.p, 0
	}
	for ; t.n <= j; t.n++ {
		t.d[t.n] = waitDist(m.fam, &m.p, t.n, 0)
	}
	return t.d[j]
}

func newModel(f Family, p params, g *groupData) *model {
	out := outlierShare / g.span
	return &model{fam: f, p: p, sigma: 0.03, pImm: g.pImm, notice: g.s.notice, out: out, lnOut: math.Log(out)}
}

// mix is the log of a density with the outlier share mixed in.
func (m *model) mix(density float64) float64 {
	return math.Log((1-outlierShare)*max(density, 0) + m.out)
}

// deviceLL is the log-likelihood of q's arrivals, its first attempt
// immediate or not as the share pImm says, and the posterior that it was.
func (m *model) deviceLL(q *seq) (ll, postImm float64) {
	a := math.Log(m.pImm) + m.alignedLL(q, true)
	b := math.Log1p(-m.pImm) + m.alignedLL(q, false)
	ll = robust.LogSumExp(a, b)
	return ll, math.Exp(a - ll)
}

// alignedLL is the log-likelihood of q's arrivals with its first attempt
// immediate (imm: every later wait's index is one less) or not. An
// unjittered curve's first wait may carry the gaps' round trip (a short
// storm cannot tell it apart), which the first arrival does not: that
// may come up to half the notice window early.
func (m *model) alignedLL(q *seq, imm bool) float64 {
	d, early := atom(0), 0.0
	if !imm {
		d = m.wait(0, 0)
		if deterministic(m.fam) {
			early = m.notice / 2
		}
	}
	ll := m.mix(d.windowed(q.first+early, m.notice+early, max(m.sigma, sigmaMin)))
	if len(q.gaps) == 0 {
		return ll
	}
	if deterministic(m.fam) {
		return ll + m.detGapsLL(q, imm)
	}
	return ll + m.jitterGapsLL(q, imm)
}

// firstIndex is the index of the wait before q's second attempt, and the
// wait before its first (the first arrival less half the notice window).
func (m *model) firstIndex(q *seq, imm bool) (j0 int, prev float64) {
	if imm {
		return 0, 0
	}
	return 1, max(q.first-m.notice/2, 0)
}

func (m *model) jitterGapsLL(q *seq, imm bool) (ll float64) {
	j0, prev := m.firstIndex(q, imm)
	for k, g := range q.gaps {
		d := m.wait(j0+k, prev)
		ll, prev = ll+m.mix(d.density(g-m.mu, m.sigma)), max(g-m.mu, 0)
	}
	return ll
}

// residuals fills r with q's gaps less the waits, and gives its median.
func (m *model) residuals(q *seq, imm bool, r []float64) ([]float64, float64) {
	j0, _ := m.firstIndex(q, imm)
	r = r[:len(q.gaps)]
	for k, g := range q.gaps {
		r[k] = g - detWait(m.fam, &m.p, j0+k)
	}
	var s [maxAttempts]float64
	return r, robust.MedianInPlace(append(s[:0], r...))
}

// detGapsLL is the gaps' log-likelihood under an unjittered family: the
// gaps within 6 sigma of the device's median shift are normal about its
// shift, itself normal about the fleet's (integrated out); the others, or
// the whole device (at the gaps' share: one on another policy), outliers.
func (m *model) detGapsLL(q *seq, imm bool) float64 {
	var buf [maxAttempts]float64
	r, c := m.residuals(q, imm, buf[:])
	n, sum, sq := m.inliers(r, c)
	ll, odd := float64(len(r)-n)*m.lnOut, float64(len(r))*m.lnOut+math.Log(outlierShare)
	if n == 0 {
		return odd
	}
	k := float64(n)
	mean := sum / k
	within := max(sq-k*mean*mean, 0)
	s2, v := m.sigma*m.sigma, m.sigma*m.sigma+k*m.shiftSpread*m.shiftSpread
	d := mean - m.shift
	return robust.LogSumExp(odd, ll+(k+1)*math.Log1p(-outlierShare)-k/2*math.Log(2*math.Pi)-(k-1)/2*math.Log(s2)-math.Log(v)/2-
		within/(2*s2)-k*d*d/(2*v))
}

// inliers counts the residuals r within 6 sigma of the device's median c,
// and sums them and their squares.
func (m *model) inliers(r []float64, c float64) (n int, sum, sq float64) {
	for _, x := range r {
		if math.Abs(x-c) <= 6*m.sigma {
			n, sum, sq = n+1, sum+x, sq+x*x
		}
	}
	return n, sum, sq
}

// pit is one wait's probability integral transform under a model, and its
// range when the wait moves by up to three noise sigmas, at most 5 % of the
// gap and 300 ms (a jittered sigma also takes up misfit, not to excuse).
type pit struct{ at, lo, hi float64 }

// pits appends the probability integral transforms of q's gaps under m,
// uniform if m is the truth; an unjittered family's each given the
// device's other gaps, so that a gap does not pull its shift towards it.
func (m *model) pits(q *seq, imm bool, span float64, out []pit) []pit {
	at := func(cdf func(float64) float64, g float64) pit {
		f := func(x float64) float64 {
			return (1-outlierShare)*cdf(x) + outlierShare*min(max(x/span, 0), 1)
		}
		d := min(3*m.sigma, 0.05*g, 0.3)
		return pit{f(g), f(g - d), f(g + d)}
	}
	if !deterministic(m.fam) {
		j0, prev := m.firstIndex(q, imm)
		for k, g := range q.gaps {
			d := m.wait(j0+k, prev)
			out = append(out, at(func(x float64) float64 { return d.cdf(x-m.mu, m.sigma) }, g))
			prev = max(g-m.mu, 0)
		}
		return out
	}
	var buf [maxAttempts]float64
	r, c := m.residuals(q, imm, buf[:])
	n, sum, _ := m.inliers(r, c)
	s2, t2 := m.sigma*m.sigma, max(m.shiftSpread*m.shiftSpread, 1e-12)
	for k, x := range r {
		on, others := n, sum
		if math.Abs(x-c) <= 6*m.sigma {
			on, others = n-1, sum-x
		}
		prec := 1/t2 + float64(on)/s2
		shift := (m.shift/t2 + others/s2) / prec
		sd, wait := math.Sqrt(s2+1/prec), q.gaps[k]-x
		out = append(out, at(func(g float64) float64 { return normCDF((g - wait - shift) / sd) }, q.gaps[k]))
	}
	return out
}
