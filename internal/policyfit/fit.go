package policyfit

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/herdguard/herdguard/internal/policyfit/robust"
)

// groupData is a group's sequences and what every family's fit shares.
type groupData struct {
	seqs []*seq
	s    *settings
	// sub indexes the devices a parameter search reads and scores, every
	// k-th: a few thousand gaps tell a parameter as well as a million do.
	sub  []int
	span float64 // an outlier gap is uniform on [0, span)
	// imm0 is each device's first guess: immediate if its first attempt
	// came within the notice window. pImm is the share of them.
	imm0          []bool
	pImm          float64
	gaps, retried int               // the gaps, and the devices with one
	waits         map[string]*waits // collect's answers by alignment: most families read the same
}

const searchGaps = 1200 // the most gaps a parameter search scores

func newGroupData(seqs []*seq, s *settings, span float64) *groupData {
	g := &groupData{seqs: seqs, s: s, span: span, imm0: make([]bool, len(seqs)), waits: map[string]*waits{}}
	for i, q := range seqs {
		g.gaps, g.retried, g.imm0[i] = g.gaps+len(q.gaps), g.retried+min(len(q.gaps), 1), q.first < s.notice
	}
	g.pImm = clampShare(float64(count(g.imm0, true)) / float64(max(len(seqs), 1)))
	stride := max(1, (g.gaps+searchGaps-1)/searchGaps)
	for i := 0; i < len(seqs); i += stride {
		g.sub = append(g.sub, i)
	}
	return g
}

// spanOf is the outliers' range: past the longest gap.
func spanOf(seqs []*seq) float64 {
	span := 1.0
	for _, q := range seqs {
		span = max(span, q.first+1, slices.Max(append([]float64{0}, q.gaps...))+1)
	}
	return span
}

// minCount is the fewest waits at one retry, of n devices', a curve reads.
func minCount(n int) int { return max(2, n/20) }

// clampShare keeps a share off 0 and 1: one device unlike the rest costs
// a few nats, not all of them.
func clampShare(p float64) float64 { return min(max(p, 0.01), 0.99) }

// waits are a group's waits as an estimator reads them, by the index of
// the retry they precede given each device's alignment, each sorted.
type waits struct {
	at     [][]float64 // at[j]: the waits before retry j seen as gaps
	diffs  [][]float64 // diffs[j]: wait j+1 less wait j, from one device: its round trip cancels
	firsts []float64   // first waits seen as first arrivals, the notice window's middle off
	all    []float64
}

// collect gathers the waits of the devices idx indexes (every device if
// nil, else g.sub), each aligned as imm says. The answer is shared: it
// must not be changed.
func collect(g *groupData, idx []int, imm []bool) *waits {
	key := fmt.Sprint(idx != nil, imm)
	if w, ok := g.waits[key]; ok {
		return w
	}
	w := &waits{at: make([][]float64, maxAttempts), diffs: make([][]float64, maxAttempts)}
	g.waits[key] = w
	for i := range g.seqs {
		if idx != nil && !slices.Contains(idx, i) {
			continue
		}
		q, j0 := g.seqs[i], 0
		if !imm[i] {
			j0 = 1
			w.firsts = append(w.firsts, max(q.first-g.s.notice/2, 0))
		}
		for k, gap := range q.gaps {
			w.at[j0+k] = append(w.at[j0+k], gap)
			w.all = append(w.all, gap)
			if k > 0 {
				w.diffs[j0+k-1] = append(w.diffs[j0+k-1], gap-q.gaps[k-1])
			}
		}
	}
	for _, xs := range w.at {
		slices.Sort(xs)
	}
	slices.Sort(w.all)
	return w
}

// shifted is w with a round trip of mu taken off every gap: still sorted.
func (w *waits) shifted(mu float64) *waits {
	less := func(xs []float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = x - mu
		}
		return out
	}
	out := &waits{at: make([][]float64, len(w.at)), diffs: w.diffs, firsts: w.firsts, all: less(w.all)}
	for j, xs := range w.at {
		out.at[j] = less(xs)
	}
	return out
}

// fitted is a family fitted to a group: the model, each device's
// log-likelihood and posterior of an immediate first attempt, their sum.
type fitted struct {
	m     *model
	ll    []float64
	post  []float64
	total float64
	k     int // parameters, for the BIC
}

// fitFamily is fitAfresh's fit of f to g, made once an Infer: kept by the
// family, g's span and its devices' indexes.
func fitFamily(f Family, g *groupData) *fitted {
	key := binary.AppendUvarint(append([]byte(f), 0), math.Float64bits(g.span))
	for _, q := range g.seqs {
		key = binary.AppendUvarint(key, uint64(q.n))
	}
	fi, done := g.s.fitted[string(key)]
	if !done {
		fi = fitAfresh(f, g)
		g.s.fitted[string(key)] = fi
	}
	return fi
}

// fitAfresh fits f to g, nil where g's waits cannot give its parameters,
// and which first attempts were immediate beside them: each re-estimates
// the other, up to two more rounds while more than 1 % of devices move.
func fitAfresh(f Family, g *groupData) *fitted {
	imm := start(f, g)
	for round := 0; ; round++ {
		m := estimate(f, g, imm, false)
		if m == nil {
			return nil
		}
		fi, moved := score(m, g.seqs, imm)
		if moved <= max(len(g.seqs)/100, 2) || round == 2 {
			return fi
		}
	}
}

// start guesses which first attempts were immediate: those within the
// notice window (paho's); for a 2^n jittered family, none where its first
// wait may fall in the window, as read so it is its own curve a retry on,
// told apart only by the first arrivals that the window blurs.
func start(f Family, g *groupData) []bool {
	doubling := f == FullJitter || f == EqualJitter || f == Proportional || f == IoTCore
	if none := make([]bool, len(g.seqs)); doubling && g.pImm > 0.01 {
		if m := estimate(f, g, none, true); m != nil && waitDist(f, &m.p, 0, 0).p[0].lo < g.s.notice {
			return none
		}
	}
	return slices.Clone(g.imm0)
}

// score scores m on every device, with imm's share of immediate first
// attempts; it moves each of imm's devices to its likelier alignment, and
// says how many moved.
func score(m *model, seqs []*seq, imm []bool) (*fitted, int) {
	if imm != nil {
		m.pImm = clampShare(float64(count(imm, true)) / float64(len(imm)))
	}
	fi := &fitted{m: m, ll: make([]float64, len(seqs)), post: make([]float64, len(seqs)), k: ownParams(m.fam, &m.p) + 1}
	moved := 0
	for i, q := range seqs {
		fi.ll[i], fi.post[i] = m.deviceLL(q)
		fi.total += fi.ll[i]
		if imm != nil && (fi.post[i] > 0.5) != imm[i] {
			imm[i] = !imm[i]
			moved++
		}
	}
	return fi, moved
}

// hardLL is the log-likelihood of the search's devices, each aligned as
// imm says.
func hardLL(m *model, g *groupData, imm []bool) (ll float64) {
	for _, i := range g.sub {
		ll += m.alignedLL(g.seqs[i], imm[i])
	}
	return ll
}

// estimate fits f's parameters and noise to g with the alignments imm; a
// quick one skips the noise's search, the base's refinement and the cap's test.
func estimate(f Family, g *groupData, imm []bool, quick bool) *model {
	var m *model
	if deterministic(f) {
		p, ok := fitDeterministic(f, collect(g, nil, imm), minCount(len(g.seqs)))
		if !ok {
			return nil
		}
		m = newModel(f, p, g)
		m.detNoise(g, imm)
	} else if m = searchJittered(f, g, imm, quick); m == nil {
		return nil
	}
	if quick {
		return m
	}
	return capOrNot(m, g, imm)
}

// capOrNot keeps m's cap only where the gaps see the waits grow to it
// (else it is a constant, its growth told by first arrivals a wide notice
// window blurs: MQTT.js's 1 s read as IoT Core from 0.5 s), and it explains
// the waits better than no cap by more than the BIC's price of a parameter.
func capOrNot(m *model, g *groupData, imm []bool) *model {
	if math.IsInf(m.p.cap, 1) {
		return m
	}
	j, prev, last := 1, 0.0, 0.0 // the first retry most gaps see
	if 2*count(imm, true) > len(imm) {
		j = 0
	}
	for k := range j + 2 {
		last, prev = prev, waitDist(m.fam, &m.p, k, prev).mean()
	}
	open := *m
	open.p.cap = math.Inf(1)
	if deterministic(m.fam) {
		open.detNoise(g, imm)
	}
	if prev > 1.1*last && hardLL(m, g, imm)-hardLL(&open, g, imm) > math.Log(float64(g.gaps+len(g.seqs)))/2+1 {
		return m
	}
	return &open
}

// detNoise sets an unjittered model's noise: sigma from the lower quartile
// (0.3186 sigma) of the differences of a device's residuals two retries
// apart, over root 2 (a stamp's error is in two gaps side by side), which
// half a group on a jittered policy does not move, then on by likelihood:
// timers late by a drifting amount (MQTT.js, in one event loop) keep a
// quartile far under their spread. The shift's mean and spread are read
// from the devices whose gaps agree to within 3 sigma.
func (m *model) detNoise(g *groupData, imm []bool) {
	var within, devSpread, shifts []float64
	var buf [maxAttempts]float64
	for i, q := range g.seqs {
		if len(q.gaps) == 0 {
			continue
		}
		r, c := m.residuals(q, imm[i], buf[:])
		shifts = append(shifts, c)
		lag, dev := min(2, len(r)-1), [maxAttempts]float64{}
		for k := range len(r) - lag {
			dev[k] = math.Abs(r[k+lag]-r[k]) / math.Sqrt2
		}
		if lag > 0 {
			within = append(within, dev[:len(r)-lag]...)
		}
		devSpread = append(devSpread, robust.MedianInPlace(dev[:len(r)-lag]))
	}
	m.sigma, m.shift, m.shiftSpread = sigmaMin, 0, sigmaMin
	if len(shifts) == 0 {
		return
	}
	if len(within) > 0 { // more than maxDetSigma is jitter, not an unjittered family's noise
		m.sigma = min(max(robust.Quantile(robust.SortedCopy(within), 0.25)/0.3186, sigmaMin), maxDetSigma)
	}
	at := func(sigma float64) *model {
		out, agreeing := *m, make([]float64, 0, len(shifts))
		for i, c := range shifts {
			if devSpread[i] <= 3*sigma {
				agreeing = append(agreeing, c)
			}
		}
		if len(agreeing) == 0 {
			agreeing = shifts
		}
		out.sigma, out.shift = sigma, robust.Median(agreeing)
		dev := make([]float64, len(agreeing))
		for i, c := range agreeing {
			dev[i] = math.Abs(c - out.shift)
		}
		spread := 1.4826 * robust.MedianInPlace(dev) // the median absolute deviation, as a normal's sigma
		out.shiftSpread = math.Sqrt(max(spread*spread-sigma*sigma/2, sigmaMin*sigmaMin))
		return &out
	}
	*m = *at(math.Exp(robust.Golden(func(x float64) float64 { return hardLL(at(math.Exp(x)), g, imm) },
		math.Log(m.sigma), math.Log(maxDetSigma), 8)))
}

// The grids a jittered family's round trip and noise are searched on, to
// a cellular network's (50 to 600 ms). The search starts at 30 ms: wide
// enough for an atom (a cap) that each device's round trip spreads.
var (
	muGrid    = []float64{0, 0.03, 0.1, 0.2, 0.4}
	sigmaGrid = []float64{0.003, 0.01, 0.03, 0.1, 0.2}
)

// searchJittered fits a jittered family: its parameters estimated from
// the waits with each round trip on muGrid taken off (a quick search
// tries one), the best of them by likelihood, then its noise on
// sigmaGrid, then an envelope family's base refined.
func searchJittered(f Family, g *groupData, imm []bool, quick bool) *model {
	var best *model
	bestLL := math.Inf(-1)
	try := func(m *model) {
		if ll := hardLL(m, g, imm); ll > bestLL {
			best, bestLL = m, ll
		}
	}
	grid := muGrid
	if quick {
		grid = muGrid[1:2]
	}
	raw := collect(g, g.sub, imm)
	for i, mu := range grid {
		w := raw.shifted(mu)
		if i > 0 && robust.Quantile(w.all, 0.05) < 0 {
			break // a round trip longer than the shortest gaps
		}
		for _, p := range fitJittered(f, w, minCount(len(g.sub))) {
			m := newModel(f, p, g)
			m.mu = mu
			try(m)
		}
	}
	if best == nil || quick {
		return best
	}
	for _, s := range sigmaGrid {
		if s != best.sigma { // best's own is scored
			m := *best
			m.sigma = s
			try(&m)
		}
	}
	if f != Decorrelated && f != FleetSafe {
		return best // a 2^n family's base is read off every retry's edges
	}
	b := best.p.base // but an envelope's off the first wait's alone
	best.p.base = robust.Golden(func(x float64) float64 {
		m := *best
		m.p.base = x
		return hardLL(&m, g, imm)
	}, 0.8*b, 1.25*b, 6)
	return best
}
