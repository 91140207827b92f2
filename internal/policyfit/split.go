package policyfit

import (
	"cmp"
	"math"
	"slices"

	"github.com/herdguard/herdguard/internal/policyfit/robust"
)

// group is devices judged together, and their analysis. Its members are
// its devices but those a split placed with it without being sure.
type group struct {
	seqs, members []*seq
	an            *analysis
}

func (g *group) fit() Fit { return g.an.decide() }

// maxGroups bounds the groups a fleet is split into: firmware versions
// seldom run more than a few at once, and each split costs a fit of all.
const maxGroups = 4

// partition splits a fleet into groups that each run one policy: a group
// is split in two while a two-policy mixture explains its devices better
// than its best single family by the margin, up to maxGroups groups. The
// devices a split cannot place (neither side's fit 99 times likelier) go
// to neither side, and come back as unsure.
func partition(seqs []*seq, s *settings) (groups []*group, unsure []*seq) {
	if len(seqs) == 0 {
		return nil, nil
	}
	span := spanOf(seqs)
	todo := []*group{newGroup(seqs, s, span)}
	for len(todo) > 0 {
		g := todo[0]
		todo = todo[1:]
		if len(groups)+len(todo)+1 >= maxGroups {
			groups = append(groups, g)
			continue
		}
		a, b, left := g.split(s, span)
		if a == nil {
			groups = append(groups, g)
			continue
		}
		todo, unsure = append(todo, a, b), append(unsure, left...)
	}
	slices.SortStableFunc(groups, func(x, y *group) int {
		return cmp.Or(len(y.members)-len(x.members), cmp.Compare(x.seqs[0].id, y.seqs[0].id))
	})
	return groups, unsure
}

func newGroup(seqs []*seq, s *settings, span float64) *group {
	return &group{seqs: seqs, members: seqs, an: analyse(newGroupData(seqs, s, span))}
}

const (
	// proposalGain is how many nats a device must prefer another family
	// by to be proposed as a group of its own.
	proposalGain = 2
	// sureRatio is the least likelihood ratio that places a device on one
	// side of a split: a posterior of 99 %.
	sureRatio = 4.595 // ln 99
	// minShare is the least share of a group's devices that each side of
	// its split must hold surely. A few devices of one policy whose draws
	// happen to look like another family, picked out of hundreds, fit it
	// well because they were picked: a tenth is not picked by chance.
	minShare = 0.1
)

// split tries each proposal for a second group: each side's family the best
// its own analysis finds (one fitted to the whole, half another policy, is
// no guide), refined by hard EM, judged by accept.
func (g *group) split(s *settings, span float64) (a, b *group, unsure []*seq) {
	if len(g.seqs) < 2*s.minDevices || len(g.an.fits) == 0 {
		return nil, nil, nil
	}
	for _, p := range g.proposals(s) {
		if sd, ok := g.refine(p.inB, s, span); ok {
			if a, b, unsure = g.accept(sd, s, span); a != nil {
				return a, b, unsure
			}
		}
	}
	return nil, nil, nil
}

// maxProposals bounds the other families whose devices are proposed.
const maxProposals = 2

// least is the fewest devices each side of a split of n devices holds.
func least(n int, s *settings) int { return max(s.minDevices, int(math.Ceil(minShare*float64(n)))) }

// proposals are sets of devices to try as a second group: those that prefer
// each of the maxProposals families other than the best the most (by over
// proposalGain, summing to the margin), and those whose own attempts the
// best family explains at less than 1 % (fisherP).
func (g *group) proposals(s *settings) []offer {
	fits, n := g.an.fits, s.minDevices // the EM grows a proposal; accept holds each side to least
	var offers []offer
	for _, fi := range fits[1:] {
		o := offer{inB: make([]bool, len(g.seqs))}
		for i := range o.inB {
			if d := fi.ll[i] - fits[0].ll[i]; d > proposalGain {
				o.inB[i], o.gain = true, o.gain+d
			}
		}
		if count(o.inB, true) >= n && o.gain >= s.margin {
			offers = append(offers, o)
		}
	}
	slices.SortFunc(offers, func(x, y offer) int { return cmp.Compare(y.gain, x.gain) })
	out := offers[:min(len(offers), maxProposals)]
	worst := offer{inB: make([]bool, len(g.seqs))}
	for i, q := range g.seqs {
		us := fits[0].m.pits(q, fits[0].post[i] > 0.5, g.an.g.span, nil)
		for k := range us { // no slack for the noise: a proposal is only a start
			us[k].lo, us[k].hi = us[k].at, us[k].at
		}
		worst.inB[i] = fisherP(us) < 0.01
	}
	if count(worst.inB, true) >= n {
		out = append(out, worst)
	}
	return out
}

// offer is a proposed second group: its devices, and by how many nats
// they prefer another family.
type offer struct {
	inB  []bool
	gain float64
}

// sides is a split's two fits, each scored on every device, and which
// side each device is on.
type sides struct {
	a, b *fitted
	inB  []bool
}

// refine runs up to four rounds of hard EM from the proposal inB: each
// side's family chosen by its own analysis (the family its devices prefer
// in the whole's fits may fit them loosely) and refitted to its devices,
// each device moved to the likelier side.
func (g *group) refine(inB []bool, s *settings, span float64) (sd sides, ok bool) {
	var famA, famB Family
	sd.inB = slices.Clone(inB)
	for round := range 4 {
		if count(sd.inB, true) < s.minDevices || count(sd.inB, false) < s.minDevices {
			return sd, false
		}
		sa, sb := divide(g.seqs, sd.inB)
		if round == 0 {
			if famA, famB, ok = bestFamilies(sa, sb, s, span); !ok {
				return sd, false
			}
		}
		if sd.a, sd.b = refit(famA, sa, g.seqs, s, span), refit(famB, sb, g.seqs, s, span); sd.a == nil || sd.b == nil {
			return sd, false
		}
		if !reassign(sd.a, sd.b, sd.inB) {
			break
		}
	}
	return sd, count(sd.inB, true) >= s.minDevices && count(sd.inB, false) >= s.minDevices
}

// accept keeps a split whose soft mixture (devices that prefer a side by
// chance buy it little) beats the one family by the margin and the BIC's
// price, and whose sides' own analyses name different policies. Each side's fit
// reads every device the EM put there (the sure ones alone are a family
// cut off where it overlaps the other); its members are the sure ones.
func (g *group) accept(sd sides, s *settings, span float64) (a, b *group, unsure []*seq) {
	share := float64(count(sd.inB, true)) / float64(len(sd.inB))
	mixed := 0.0
	for i := range sd.inB {
		mixed += robust.LogSumExp(math.Log1p(-share)+sd.a.ll[i], math.Log(share)+sd.b.ll[i])
	}
	price := float64(sd.b.k+1) / 2 * math.Log(float64(g.an.g.gaps+len(g.seqs)))
	if mixed-g.an.fits[0].total-price < s.margin {
		return nil, nil, nil
	}
	var ma, mb []*seq
	for i, q := range g.seqs {
		switch lr := math.Log(share) + sd.b.ll[i] - math.Log1p(-share) - sd.a.ll[i]; {
		case !g.isMember(q):
		case lr > sureRatio:
			mb = append(mb, q)
		case lr < -sureRatio:
			ma = append(ma, q)
		default:
			unsure = append(unsure, q)
		}
	}
	if n := least(len(g.seqs), s); len(ma) < n || len(mb) < n {
		return nil, nil, nil
	}
	sa, sb := divide(g.seqs, sd.inB)
	a, b = newGroup(sa, s, span), newGroup(sb, s, span)
	if len(a.an.fits) == 0 || len(b.an.fits) == 0 || a.an.decide().Err != nil || b.an.decide().Err != nil || alike(a.an, b.an) {
		return nil, nil, nil // a side no family fits may be a subset one happens to
	}
	a.members, b.members = ma, mb
	return a, b, unsure
}

func (g *group) isMember(q *seq) bool {
	return len(g.members) == len(g.seqs) || slices.Contains(g.members, q)
}

// alike reports whether two groups' best fits tell one policy: one family,
// base, factor, step and cap within 25 %, a base a factor off being one
// curve a retry apart (an immediate first attempt the notice window
// missed), a cap one reached only if the other waited past it (a jitter's
// width, read off a subset, tells nothing). Decorrelated jitter's bases,
// read off first waits alone, are alike within 50 %: two halves of one
// fleet of 100 agents read 0.89 and 1.28 s of 1 s.
func alike(x, y *analysis) bool {
	mx, my := x.fits[0].m, y.fits[0].m
	baseTol := 0.25
	if mx.fam == Decorrelated && my.fam == Decorrelated {
		baseTol = 0.5
	}
	near := func(u, v float64) bool { return u == v || math.Abs(u-v) <= 0.25*max(math.Abs(u), math.Abs(v)) }
	nearBase := func(u, v float64) bool { return u == v || math.Abs(u-v) <= baseTol*max(math.Abs(u), math.Abs(v)) }
	p, q := &mx.p, &my.p
	capsAlike := near(p.cap, q.cap)
	switch {
	case math.IsInf(p.cap, 1) && !math.IsInf(q.cap, 1):
		capsAlike = x.longestWait(mx) < 1.2*q.cap
	case math.IsInf(q.cap, 1) && !math.IsInf(p.cap, 1):
		capsAlike = y.longestWait(my) < 1.2*p.cap
	}
	f := max(p.factor, 1)
	bases := nearBase(p.base, q.base) || nearBase(p.base*f, q.base) || nearBase(p.base, q.base*f)
	return mx.fam == my.fam && bases && near(p.factor, q.factor) && near(p.step, q.step) && capsAlike
}

// bestFamilies is each side's best family by its own analysis.
func bestFamilies(sa, sb []*seq, s *settings, span float64) (famA, famB Family, ok bool) {
	a, b := analyse(newGroupData(sa, s, span)), analyse(newGroupData(sb, s, span))
	if len(a.fits) == 0 || len(b.fits) == 0 {
		return "", "", false
	}
	return a.fits[0].m.fam, b.fits[0].m.fam, true
}

// divide is seqs in two: those inB leaves out, those it takes.
func divide(seqs []*seq, inB []bool) (a, b []*seq) {
	for i, q := range seqs {
		if inB[i] {
			b = append(b, q)
		} else {
			a = append(a, q)
		}
	}
	return a, b
}

// refit fits f to sub and scores it on all.
func refit(f Family, sub, all []*seq, s *settings, span float64) *fitted {
	fi := fitFamily(f, newGroupData(sub, s, span))
	if fi == nil {
		return nil
	}
	out, _ := score(fi.m, all, nil)
	return out
}

// reassign puts each device with the likelier fit, weighed by the sides'
// shares, and reports whether any moved.
func reassign(a, b *fitted, inB []bool) bool {
	share := clampShare(float64(count(inB, true)) / float64(len(inB)))
	moved := false
	for i := range inB {
		if want := math.Log(share)+b.ll[i] > math.Log1p(-share)+a.ll[i]; want != inB[i] {
			inB[i], moved = want, true
		}
	}
	return moved
}

func count(xs []bool, v bool) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}
