package stormstats

// Recovery is what came after one disruption, up to the next: judged on
// its own, so that two recoveries do not read as two rounds of one storm.
type Recovery struct {
	AtS float64 `json:"at_s"` // the disruption, in the log's time
	Preparation
	Judgement
	Arrivals Arrivals `json:"arrivals"`
}

// Overall is a log's verdict from its recoveries': waves if any came in
// waves, spread if the rest did, inconclusive if none could be called.
func Overall(recs []Recovery) Verdict {
	v := Inconclusive
	for _, r := range recs {
		switch r.Verdict {
		case Waves:
			return Waves
		case Spread:
			v = Spread
		}
	}
	return v
}
