package attempt

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// events.csv's t_s is what formatting the float gave, byte for byte: at
// random instants, at and beside every kind of halfway point between two
// places, and at the edges of the integer path.
func TestSecondsAreWrittenAsTheFloatWas(t *testing.T) {
	check := func(d time.Duration) {
		t.Helper()
		if want, got := strconv.AppendFloat(nil, d.Seconds(), 'f', 4, 64), appendSeconds4(nil, d); string(got) != string(want) {
			t.Fatalf("%d ns: %s, the float gives %s", int64(d), got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(time.Duration(r.Int64N(1 << 45)))
	}
	const place = int64(100 * time.Microsecond)
	for range 20_000 {
		halfway := r.Int64N(1<<45/place)*place + place/2
		for d := int64(-3); d <= 3; d++ {
			check(time.Duration(halfway + d))
		}
	}
	for _, d := range []int64{0, 1, place/2 - 2, place / 2, place - 1, place, 1<<45 - 1, 1 << 45, -1, -place / 2, math.MaxInt64, math.MinInt64} {
		check(time.Duration(d))
	}
}
