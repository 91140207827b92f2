package policyfit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/herdguard/herdguard/internal/plan"
)

// analysis is every family fitted to one group, best first by the BIC, and
// the devices the family named does not explain.
type analysis struct {
	g    *groupData
	fits []*fitted // best first; families the waits cannot give are left out
	odd  map[*seq]bool
}

func analyse(g *groupData) *analysis {
	a := &analysis{g: g}
	for _, f := range families {
		if fi := fitFamily(f, g); fi != nil {
			a.fits = append(a.fits, fi)
		}
	}
	slices.SortStableFunc(a.fits, func(x, y *fitted) int { return cmp.Compare(a.score(y), a.score(x)) })
	return a
}

// score is a fit's log-likelihood less the BIC's price of its
// parameters, in nats.
func (a *analysis) score(fi *fitted) float64 {
	return fi.total - float64(fi.k)/2*math.Log(float64(a.g.gaps+len(a.g.seqs)))
}

// A fit is rejected only when it is both far off and beyond chance:
// thousands of waits reject any model's small flaws, and a few dozen can
// be far off by chance.
const (
	maxKS  = 0.1
	ksPMin = 0.001
)

// decide names the best family of the analysis, or says why it cannot
// (the rules are the package's).
func (a *analysis) decide() Fit {
	g, s := a.g, a.g.s
	out := Fit{Devices: len(g.seqs), Retries: g.gaps}
	switch {
	case len(g.seqs) < s.minDevices:
		out.Err = fmt.Errorf("%w: %d, at least %d needed", ErrTooFewDevices, len(g.seqs), s.minDevices)
		return out
	case g.retried < s.minDevices || len(a.fits) == 0:
		out.Err = fmt.Errorf("%w: %d devices retried before they were admitted, at least %d needed",
			ErrTooFewRetries, g.retried, s.minDevices)
		return out
	}
	best := a.fits[0]
	out.Margin = math.Inf(1)
	var close []Family
	for _, fi := range a.fits[1:] {
		d, raw := a.score(best)-a.score(fi), best.total-fi.total
		if deterministic(best.m.fam) != deterministic(fi.m.fam) {
			// A narrow jitter and an unjittered family's round trips differ
			// only within a device: one that retried once tells the round
			// trips' spread, not the policy.
			repeated := 0.0
			for i, q := range g.seqs {
				if len(q.gaps) > 1 {
					repeated += best.ll[i] - fi.ll[i]
				}
			}
			d, raw = min(d, repeated-(raw-d)), min(raw, repeated)
		}
		if d < out.Margin {
			out.Margin, out.RunnerUp = d, fi.m.fam
		}
		if d < s.margin || fi.k > best.k && raw < s.margin {
			close = append(close, fi.m.fam)
		}
	}
	ks, p, tolerant, odd := a.gof(best)
	out.KS, out.KSP = ks, p
	switch {
	case len(close) > 0:
		out.Candidates = append([]Family{best.m.fam}, close...)
		out.Err = fmt.Errorf("%w: %s and %v within %.1f nats", ErrAmbiguous, best.m.fam, close, s.margin)
	case tolerant > maxKS && ksPValue(tolerant, g.gaps) < ksPMin:
		out.Candidates = []Family{best.m.fam}
		out.Err = fmt.Errorf("%w: the closest, %s, is %.2f from its waits beyond its noise (KS %.2f)", ErrNoFamilyFits,
			best.m.fam, tolerant, out.KS)
	default:
		a.describe(best, &out)
		a.odd = odd
	}
	return out
}

// describe fills out with fi's family and parameters.
func (a *analysis) describe(fi *fitted, out *Fit) {
	m, p := fi.m, &fi.m.p
	out.Family, out.Base, out.Noise = m.fam, seconds(p.base), seconds(m.sigma)
	switch m.fam {
	case Exponential:
		out.Factor = p.factor
	case Proportional:
		out.Factor, out.JitterFraction = p.factor, p.jitter
	case FullJitter, EqualJitter:
		out.Factor = 2
	case IoTCore:
		out.Factor, out.Jitter, out.JitterAtCap = 2, seconds(p.jitter), p.atCap && !math.IsInf(p.cap, 1)
	case Linear:
		out.Step = seconds(p.step)
	}
	switch {
	case m.fam == Constant || m.fam == NoBackoff:
		out.Cap = out.Base // it waits its cap from the first retry
	case math.IsInf(p.cap, 1):
		out.CapAtLeast = seconds(a.longestWait(m))
	default:
		out.Cap = seconds(p.cap)
	}
	for _, x := range fi.post {
		out.FirstImmediate += x / float64(len(fi.post))
	}
	out.Spec, out.NoSpec = specOf(out)
}

// longestWait is the longest gap, less the round trip.
func (a *analysis) longestWait(m *model) float64 {
	longest := 0.0
	for _, q := range a.g.seqs {
		longest = max(longest, slices.Max(append([]float64{0}, q.gaps...)))
	}
	return max(longest-m.mu-m.shift, m.p.base)
}

// seconds is x seconds as a Duration, to the microsecond.
func seconds(x float64) time.Duration { return time.Duration(math.Round(x*1e6)) * time.Microsecond }

// gof is the KS distance of fi's waits' probability integral transforms
// from the uniform, its p-value, and what remains of it when each wait may
// move within its pit range, which decides rejection (the round trips are
// not normal, nor need they be). odd are the devices whose own transforms
// fi explains at less than oddP: a policy on too few devices to split off.
func (a *analysis) gof(fi *fitted) (d, p, tolerant float64, odd map[*seq]bool) {
	var u []pit
	odd = map[*seq]bool{}
	for i, q := range a.g.seqs {
		n0 := len(u)
		if u = fi.m.pits(q, fi.post[i] > 0.5, a.g.span, u); fisherP(u[n0:]) < oddP {
			odd[q] = true
		}
	}
	if len(u) == 0 {
		return 0, 1, 0, odd
	}
	n := float64(len(u))
	sorted := func(part func(pit) float64) []float64 {
		xs := make([]float64, len(u))
		for i, x := range u {
			xs[i] = part(x)
		}
		slices.Sort(xs)
		return xs
	}
	for i, x := range sorted(func(x pit) float64 { return x.at }) {
		d = max(d, float64(i+1)/n-x, x-float64(i)/n)
	}
	// each wait as late as its noise allows: the ECDF at its lowest
	for i, x := range sorted(func(x pit) float64 { return x.hi }) {
		tolerant = max(tolerant, float64(i+1)/n-x)
	}
	// and as early: at its highest
	for i, x := range sorted(func(x pit) float64 { return x.lo }) {
		tolerant = max(tolerant, x-float64(i)/n)
	}
	return d, ksPValue(d, len(u)), tolerant, odd
}

const oddP = 0.001 // the chance below which a device is not its group's: 1 in 1000 of its own are

// fisherP is the chance of transforms as far from 1/2 as us, each at the
// point of its range nearest 1/2 (the noise's spread is not oddness):
// Fisher's -2 sum log(2 min(u, 1-u)) is chi-square with 2K degrees of
// freedom, whose tail is e^-t/2 sum over i < K of (t/2)^i / i!.
func fisherP(us []pit) float64 {
	t := 0.0
	for _, u := range us {
		v := min(max(0.5, u.lo), u.hi)
		t -= 2 * math.Log(max(2*min(v, 1-v), 1e-300))
	}
	term, sum := 1.0, 1.0
	for i := 1; i < len(us); i++ {
		term *= t / 2 / float64(i)
		sum += term
	}
	return math.Exp(-t/2) * sum
}

// ksPValue is the probability that n uniform draws lie d or more from the
// uniform distribution (Kolmogorov's limit with Stephens's correction for
// finite n).
func ksPValue(d float64, n int) float64 {
	sn := math.Sqrt(float64(n))
	l := (sn + 0.12 + 0.11/sn) * d
	if l < 0.2 {
		return 1
	}
	sum := 0.0
	for j := 1.0; j <= 100; j++ { // the series alternates and falls fast
		sum -= math.Pow(-1, j) * math.Exp(-2*j*j*l*l)
	}
	return min(max(2*sum, 0), 1)
}

// specOf is the simulator's policy spec for f, or why it has none. A spec
// is given only if internal/plan reads it and builds a shape from it with
// f's cap (its lower bound when the storm did not reach it): what is given
// runs.
func specOf(f *Fit) (spec, noSpec string) {
	base := f.Base.Round(time.Millisecond).String()
	switch f.Family {
	case Exponential:
		if math.Abs(f.Factor-2) > 0.1 {
			return "", fmt.Sprintf("the simulator's exponential doubles; this one grows x%.2f", f.Factor)
		}
		spec = "exponential:base=" + base
	case FullJitter, EqualJitter, Decorrelated, FleetSafe:
		spec = string(f.Family) + ":base=" + base
	case IoTCore:
		name := "iotcore"
		if f.JitterAtCap {
			name = "iotcore-jitter-at-cap"
		}
		spec = name + ":base=" + base + ",jitter=" + f.Jitter.Round(time.Millisecond).String()
	case Linear:
		// its first wait is seen with the refused attempt's round trip on
		// it, which the proxy cannot tell from the wait: 15 % of slack
		if math.Abs(f.Step.Seconds()-f.Base.Seconds()) > 0.15*f.Base.Seconds() {
			return "", fmt.Sprintf("the simulator's linear steps by its first wait; this one starts at %v and steps %v",
				f.Base.Round(time.Millisecond), f.Step.Round(time.Millisecond))
		}
		spec = "linear:base=" + f.Step.Round(time.Millisecond).String()
	case Constant:
		spec = "constant" // it waits its cap: f.Cap
	case NoBackoff:
		return "", "the simulator has no policy that retries at once"
	case Proportional:
		return "", "the simulator has no proportional jitter (gRPC's, the HiveMQ client's)"
	default:
		return "", "no family"
	}
	limit := f.Cap
	if limit == 0 {
		limit = max(f.CapAtLeast, f.Base)
	}
	if _, err := plan.Shape(spec, limit.Round(time.Millisecond)); err != nil {
		return "", fmt.Sprintf("%s with a %v cap: %v", spec, limit.Round(time.Millisecond), err)
	}
	return spec, ""
}
