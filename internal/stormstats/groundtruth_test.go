package stormstats_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdguard/herdguard/internal/stormstats"
)

// The ground truth: arrivals generated from seeds whose verdict is known by
// construction. Synchronised rounds are waves; independent arrivals at a
// smooth rate (an inhomogeneous Poisson process) are spread.
//
// go test ./internal/stormstats -run GroundTruth runs a short version (few
// seeds, no million-arrival cells); make verdict-table runs the whole suite
// at 200 seeds a cell and prints the table docs/verdict.md shows.
var (
	truthSeeds = flag.Int("truth.seeds", 0, "seeds per ground-truth cell (0: the short version's)")
	truthFull  = flag.Bool("truth.full", false, "every cell, up to a million arrivals a round")
	truthTable = flag.Bool("truth.table", false, "print the error rates as a markdown table")
	truthCells = flag.String("truth.cells", "all", "all, plain (exact times) or stamped (times on a tick, as logs write them)")
	truthOnly  = flag.String("truth.only", "", "only the cells whose names match this regular expression")
)

// shape is how a round's arrivals are spread within its width.
type shape int

const (
	lockstep shape = iota // all at one instant
	uniform               // uniform over the width
	normal                // normal, sigma a quarter of the width: 95 % inside it
)

func (s shape) String() string { return [...]string{"lock-step", "uniform", "normal"}[s] }

// rounds are synchronised retries.
type rounds struct {
	count      int           // at least 3
	period     time.Duration // between round starts
	widthShare float64       // the round's width over the period, at most 1/5
	shape      shape
	size       int     // arrivals in the smallest round
	decay      float64 // each round's size over the one before (1: equal)
	background float64 // share of all arrivals that are independent, uniform over the span
}

func (w rounds) String() string {
	sizes := "equal"
	if w.decay != 1 {
		sizes = fmt.Sprintf("x%g", w.decay)
	}
	width := ""
	if w.shape != lockstep {
		width = fmt.Sprintf(" %s %s wide", w.shape, dur(time.Duration(w.widthShare*float64(w.period))))
	}
	bg := ""
	if w.background > 0 {
		bg = fmt.Sprintf(", %.0f%% background", 100*w.background)
	}
	return fmt.Sprintf("%d %s rounds every %s,%s, %s a round (%s)%s", w.count, w.shape, dur(w.period), width, big(w.size), sizes, bg)
}

// counts are the arrivals in each round and in the background.
func (w rounds) counts() (inRound []int, background int) {
	inRounds := 0
	for k := range w.count {
		n := int(math.Round(float64(w.size) / math.Pow(w.decay, float64(w.count-1-k))))
		inRound = append(inRound, n)
		inRounds += n
	}
	if w.background > 0 {
		background = int(math.Round(float64(inRounds) * w.background / (1 - w.background)))
	}
	return inRound, background
}

func (w rounds) total() int {
	inRound, background := w.counts()
	for _, n := range inRound {
		background += n
	}
	return background
}

func (w rounds) arrivals(r *rand.Rand) []time.Duration {
	ts := make([]time.Duration, 0, w.total())
	width := w.widthShare * float64(w.period)
	inRound, background := w.counts()
	for k, n := range inRound {
		start := float64(time.Duration(k) * w.period)
		for range n {
			var t float64
			switch w.shape {
			case lockstep:
				t = start
			case uniform:
				t = start + r.Float64()*width
			case normal:
				t = start + width/2 + r.NormFloat64()*width/4
			}
			ts = append(ts, time.Duration(t))
		}
	}
	span := float64(time.Duration(w.count) * w.period)
	for range background {
		ts = append(ts, time.Duration(r.Float64()*span))
	}
	return ts
}

// smooth is an inhomogeneous Poisson process: n arrivals drawn from a
// smooth rate.
type smooth struct {
	name string
	n    int
	draw func(r *rand.Rand) float64 // one arrival, in seconds
}

func (s smooth) String() string { return fmt.Sprintf("%s, %s arrivals", s.name, big(s.n)) }

func (s smooth) arrivals(r *rand.Rand) []time.Duration {
	ts := make([]time.Duration, s.n)
	for i := range ts {
		ts[i] = time.Duration(s.draw(r) * float64(time.Second))
	}
	return ts
}

// rates are the smooth rates of the suite, each drawing one arrival.
var rates = []struct {
	name string
	draw func(n int) func(r *rand.Rand) float64
}{
	{"constant over 60 s", fixed(func(r *rand.Rand) float64 { return 60 * r.Float64() })},
	{"off 30 s, then a step up decaying with tau 2 s", fixed(func(r *rand.Rand) float64 { return 30 + 2*r.ExpFloat64() })},
	{"off 30 s, then a step up decaying with tau 30 s", fixed(func(r *rand.Rand) float64 { return 30 + 30*r.ExpFloat64() })},
	{"a linear ramp up over 60 s", fixed(func(r *rand.Rand) float64 { return 60 * math.Sqrt(r.Float64()) })},
	{"a linear ramp down over 60 s", fixed(func(r *rand.Rand) float64 { return 60 * (1 - math.Sqrt(r.Float64())) })},
	{"a ramp up then down over 60 s", fixed(func(r *rand.Rand) float64 { return 30 * (r.Float64() + r.Float64()) })},
	{"1 + sin, period 60 s, 5 periods", fixed(sinusoid(60))},
	{"1 + sin, period 300 s, 5 periods", fixed(sinusoid(300))},
	{"a limiter's even pace, refused attempts half of them", paced},
}

func fixed(f func(r *rand.Rand) float64) func(int) func(*rand.Rand) float64 {
	return func(int) func(*rand.Rand) float64 { return f }
}

// sinusoid draws from a rate of 1 + sin(2 pi t / period) over five periods
// (the rate touches zero once a period), by rejection.
func sinusoid(period float64) func(r *rand.Rand) float64 {
	return func(r *rand.Rand) float64 {
		for {
			t := 5 * period * r.Float64()
			if 2*r.Float64() < 1+math.Sin(2*math.Pi*t/period) {
				return t
			}
		}
	}
}

// paced is a limiter admitting n/2 attempts at an even pace over 60 s while
// the other n/2, refused, arrive independently over the same span.
func paced(n int) func(*rand.Rand) float64 {
	i := 0
	return func(r *rand.Rand) float64 {
		i++
		if i%2 == 0 {
			return 60 * float64(i/2) / float64(n/2+1)
		}
		return 60 * r.Float64()
	}
}

// cell is one row of the suite: a generator and the verdict it must get.
type cell struct {
	name     string
	truth    stormstats.Verdict
	family   string // the table's row
	size     int    // the table's column: arrivals a round, or in all
	arrivals int    // in all
	gen      func(r *rand.Rand) []time.Duration
	// tick: the times are written on this grid, as a log stamps them, and
	// judged the way a log is (Prepare, Qualify). beyond: structure finer
	// than the tick lets the judge see (rounds too close together, a whole
	// recovery within a few ticks): inconclusive is the right answer for
	// them, and a wrong definite verdict is held to the same bar.
	tick   time.Duration
	beyond bool
}

// quantisedCells are cells whose times are written on a tick, as logs
// write them: every smooth rate and every kind of rounds, at 100 and 1,000
// arrivals (a round) on 1 s and 100 ms ticks, equal rounds only; the full
// suite adds decaying rounds, 10 ms ticks, 100,000 and 1,000,000.
func quantisedCells(full bool) []cell {
	keep := func(c cell) bool {
		return c.size >= 100 && (full || (c.size <= 1000 && !strings.Contains(c.name, "(x")))
	}
	ticks := []time.Duration{time.Second, 100 * time.Millisecond}
	if full {
		ticks = append(ticks, 10*time.Millisecond)
	}
	var cells []cell
	for _, tick := range ticks {
		for _, c := range append(waveCells(full), spreadCells(full)...) {
			if !keep(c) {
				continue
			}
			gen := c.gen
			c.gen = func(r *rand.Rand) []time.Duration {
				ts := gen(r)
				// a storm does not start on a whole second
				phase := time.Duration(r.Int64N(int64(time.Second)))
				for i, t := range ts {
					t += phase
					ts[i] = t - t%tick // a clock read and truncated
					if t < 0 && t%tick != 0 {
						ts[i] -= tick
					}
				}
				return ts
			}
			c.tick = tick
			c.name = fmt.Sprintf("%s, stamped to %s", c.name, dur(tick))
			c.family = fmt.Sprintf("%s, stamped to %s", c.family, dur(tick))
			if c.truth == stormstats.Waves {
				// A round w wide stamped to the tick spans up to w + tick, and a
				// burst needs windows of its width free on both sides.
				period := periodOf(c.family)
				width := 0.0
				if !strings.HasPrefix(c.family, "lock-step") {
					width = float64(period) / 5
				}
				c.beyond = period < stormstats.Resolvable(tick)+time.Duration(4*width)
			}
			if c.truth == stormstats.Spread && strings.Contains(c.family, "tau 2 s") && tick == time.Second {
				// 98 % of it within 9 s: less than 4 resolvable periods of a 1 s tick
				c.beyond = true
			}
			if c.truth == stormstats.Spread && strings.HasPrefix(c.family, "a limiter's even pace") && tick == time.Second {
				// Half the arrivals at an even 8 a second: on a 1 s tick their
				// counts are as regular as rounds finer than the tick make
				// them (inconclusive in 11 of 200 seeds at 1,000 arrivals).
				c.beyond = true
			}
			cells = append(cells, c)
		}
	}
	return cells
}

// periodOf reads the period back from a rounds family's name.
func periodOf(family string) time.Duration {
	rest := family[strings.LastIndex(family, "every ")+len("every "):]
	rest = rest[:strings.Index(rest+",", ",")]
	d, err := time.ParseDuration(strings.ReplaceAll(rest, " ", ""))
	if err != nil {
		panic(fmt.Sprintf("no period in %q: %v", family, err))
	}
	return d
}

// waveCells: three rounds of every shape and period, equal or decaying
// (a limiter admitting 40 % of each round), with or without an independent
// background carrying half of all arrivals. Sizes are the smallest round's.
// The short version has equal rounds only from 100,000 a round (the
// decaying ones hold twice the arrivals); the full suite has both.
func waveCells(full bool) []cell {
	sizes := []int{10, 20, 100, 1000, 100_000}
	if full {
		sizes = append(sizes, 1_000_000)
	}
	var cells []cell
	for _, size := range sizes {
		for _, p := range []time.Duration{500 * time.Millisecond, 4 * time.Second, 32 * time.Second, 300 * time.Second} {
			for _, sh := range []shape{lockstep, uniform, normal} {
				for _, bg := range []float64{0, 0.5} {
					for _, decay := range []float64{1, 0.6} {
						if (size == 1_000_000 || size == 100_000 && !full) && decay != 1 {
							// up to 11 million arrivals a seed: the equal rounds stand for them
							continue
						}
						w := rounds{count: 3, period: p, shape: sh, size: size, decay: decay, background: bg}
						if sh != lockstep {
							w.widthShare = 0.2
						}
						n := w.total()
						if size < 100 && n >= 100 {
							continue // the small sizes are for the cells below 100 arrivals
						}
						family := fmt.Sprintf("%s rounds every %s", sh, dur(p))
						if sh != lockstep {
							family = fmt.Sprintf("%s rounds %s wide every %s", sh, dur(p/5), dur(p))
						}
						cells = append(cells, cell{name: w.String(), truth: stormstats.Waves, family: family, size: size,
							arrivals: n, gen: w.arrivals})
					}
				}
			}
		}
	}
	return cells
}

func spreadCells(full bool) []cell {
	sizes := []int{10, 30, 60, 100, 1000, 100_000}
	if full {
		sizes = append(sizes, 1_000_000)
	}
	var cells []cell
	for _, n := range sizes {
		for _, rt := range rates {
			s := smooth{name: rt.name, n: n}
			cells = append(cells, cell{name: s.String(), truth: stormstats.Spread, family: rt.name, size: n, arrivals: n,
				gen: func(r *rand.Rand) []time.Duration {
					s.draw = rt.draw(n)
					return s.arrivals(r)
				}})
		}
	}
	return cells
}

// outcome is a cell's measured verdicts.
type outcome struct {
	cell
	seeds                        int
	wrong, inconclusive, correct int
	example                      string // a wrong verdict's reason
}

func measure(c cell, seeds int) outcome {
	o := outcome{cell: c, seeds: seeds}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		h, m := &stormstats.Histogram{}, stormstats.DefaultMethod
		var prep stormstats.Preparation
		if c.tick > 0 {
			h, m, prep = stormstats.Prepare(c.gen(r), nil, m)
		} else {
			for _, t := range c.gen(r) {
				h.Add(t)
			}
		}
		j, err := stormstats.Judge(h, m)
		if err != nil {
			panic(err)
		}
		j = prep.Qualify(j)
		switch j.Verdict {
		case c.truth:
			o.correct++
		case stormstats.Inconclusive:
			o.inconclusive++
		default:
			o.wrong++
			if o.example == "" {
				o.example = fmt.Sprintf("seed %d: %s", seed, j.Reason)
			}
		}
	}
	return o
}

func measureAll(cells []cell, seeds int) []outcome {
	out := make([]outcome, len(cells))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = measure(cells[i], seeds)
			}
		}()
	}
	for i := range cells {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

func TestGroundTruth(t *testing.T) {
	seeds := *truthSeeds
	if seeds == 0 {
		seeds = 20
	}
	var cells []cell
	switch *truthCells {
	case "all", "plain", "stamped":
	default:
		t.Fatalf("-truth.cells %q: all, plain or stamped", *truthCells)
	}
	if *truthCells != "stamped" {
		cells = append(cells, waveCells(*truthFull)...)
		cells = append(cells, spreadCells(*truthFull)...)
	}
	if *truthCells != "plain" {
		cells = append(cells, quantisedCells(*truthFull)...)
	}
	if *truthOnly != "" {
		only, err := regexp.Compile(*truthOnly)
		if err != nil {
			t.Fatalf("-truth.only: %v", err)
		}
		cells = slices.DeleteFunc(cells, func(c cell) bool { return !only.MatchString(c.name) })
	}
	if raceDetector && *truthSeeds == 0 {
		// The race step looks for data races in the harness and the judge,
		// which one seed of every eighth cell up to 10,000 arrivals
		// exercises (under the detector a judgement costs ten times as
		// much); make test's stats step runs the statistic itself, every
		// cell at 20 seeds, without it.
		i := 0
		cells, seeds = slices.DeleteFunc(cells, func(c cell) bool {
			i++
			return c.arrivals > 10_000 || i%8 != 0
		}), 1
	}
	outcomes := measureAll(cells, seeds)
	for _, o := range outcomes {
		// From 100 arrivals up the verdict is definite and wrong in at
		// most 1 % of seeds; below, inconclusive is allowed and a wrong
		// definite verdict happens in at most 5 %. Stamped to a tick, a
		// series the tick resolves may still be inconclusive in 1 % (the
		// sign test on its tick counts, at 4 standard deviations, on a
		// steep decay: 1 of 200 seeds of tau 2 s on a 100 ms tick).
		inconclusive := 0.0
		if o.tick > 0 {
			inconclusive = 0.01
		}
		if o.arrivals >= 100 && float64(o.inconclusive) > inconclusive*float64(o.seeds) && !o.beyond {
			t.Errorf("%s: %d of %d seeds inconclusive", o.name, o.inconclusive, o.seeds)
		}
		if bound := map[bool]float64{true: 0.01, false: 0.05}[o.arrivals >= 100]; float64(o.wrong) > bound*float64(o.seeds) {
			t.Errorf("%s (%s): wrong in %d of %d seeds; %s", o.name, o.truth, o.wrong, o.seeds, o.example)
		}
	}
	if *truthTable {
		t.Log("\n" + table(outcomes))
	}
}

// table is the error rates as docs/verdict.md shows them: a row a family, a
// column a size, each entry the worst cell's share of wrong verdicts (and
// of inconclusive ones, where there were any).
func table(outcomes []outcome) string {
	var b strings.Builder
	for _, truth := range []stormstats.Verdict{stormstats.Waves, stormstats.Spread} {
		var families []string
		var sizes []int
		worst := map[[2]string]outcome{}
		cells := map[[2]string]int{}
		for _, o := range outcomes {
			if o.truth != truth {
				continue
			}
			if !slices.Contains(families, o.family) {
				families = append(families, o.family)
			}
			if !slices.Contains(sizes, o.size) {
				sizes = append(sizes, o.size)
			}
			k := [2]string{o.family, big(o.size)}
			cells[k]++
			if w, ok := worst[k]; !ok || o.wrong*w.seeds > w.wrong*o.seeds || (o.wrong == w.wrong && o.inconclusive > w.inconclusive) {
				worst[k] = o
			}
		}
		slices.Sort(sizes)
		what := "arrivals"
		if truth == stormstats.Waves {
			what = "a round"
		}
		fmt.Fprintf(&b, "| %s: wrong verdicts (inconclusive) |", truth)
		for _, s := range sizes {
			fmt.Fprintf(&b, " %s %s |", big(s), what)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(sizes)) + "\n")
		for _, f := range families {
			fmt.Fprintf(&b, "| %s |", f)
			for _, s := range sizes {
				o, ok := worst[[2]string{f, big(s)}]
				switch {
				case !ok:
					b.WriteString(" |")
				case o.inconclusive > 0:
					fmt.Fprintf(&b, " %s (%s) |", pct(o.wrong, o.seeds), pct(o.inconclusive, o.seeds))
				default:
					fmt.Fprintf(&b, " %s |", pct(o.wrong, o.seeds))
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	total, seeds := 0, 0
	for _, o := range outcomes {
		total++
		seeds = o.seeds
	}
	fmt.Fprintf(&b, "%d cells, %d seeds each\n", total, seeds)
	return b.String()
}

func pct(k, n int) string {
	if k == 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(k)/float64(n))
}

func dur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

func big(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
