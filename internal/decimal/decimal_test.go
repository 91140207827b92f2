package decimal

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseIsExact(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scale int
		want  int64
		err   error
	}{
		{"12.3", 9, 12_300_000_000, nil},
		{"1700000000.120", 9, 1_700_000_000_120_000_000, nil},
		{"1700000000120", 6, 1_700_000_000_120_000_000, nil},
		{"1700000000120.000001", 6, 1_700_000_000_120_000_001, nil},
		{"-0.5", 9, -500_000_000, nil},
		{"+7", 9, 7_000_000_000, nil},
		{"5.", 9, 5_000_000_000, nil},
		{".25", 9, 250_000_000, nil},
		{"1.5e3", 9, 1_500_000_000_000, nil},
		{"15E-1", 9, 1_500_000_000, nil},
		{"1e-9", 9, 1, nil},
		{"1e-10", 9, 0, nil},
		{"0.0000000015", 9, 2, nil},   // a tie, to even
		{"0.0000000025", 9, 2, nil},   // a tie, to even
		{"-0.0000000025", 9, -2, nil}, // and so below 0
		{"0.00000000250000000001", 9, 3, nil},
		{"0.0000000024999", 9, 2, nil},
		{"0.30000000000000004", 9, 300_000_000, nil},
		{"000000000000000000000000012", 9, 12_000_000_000, nil},
		{"9000000000", 9, 9e18, nil},
		{"-9000000000", 9, -9e18, nil},
		{"9000000000.0000000004", 9, 9e18, nil},
		{"9000000000.000000001", 9, 0, ErrTooFar},
		{"9000000000.0000000005", 9, 9e18, nil},     // a tie, to even: the bound
		{"9000000000.00000000051", 9, 0, ErrTooFar}, // rounds past it
		{"1e10", 9, 0, ErrTooFar},
		{"1e1000000000000", 9, 0, ErrTooFar},
		{"0e1000000000000", 9, 0, nil},
		{"1e-1000000000000", 9, 0, nil},
		{"", 9, 0, ErrNotNumber},
		{"-", 9, 0, ErrNotNumber},
		{".", 9, 0, ErrNotNumber},
		{"1e", 9, 0, ErrNotNumber},
		{"1e+", 9, 0, ErrNotNumber},
		{"1.2.3", 9, 0, ErrNotNumber},
		{"1_000", 9, 0, ErrNotNumber},
		{"0x10", 9, 0, ErrNotNumber},
		{"Inf", 9, 0, ErrNotNumber},
		{"NaN", 9, 0, ErrNotNumber},
		{" 1", 9, 0, ErrNotNumber},
		{"1 ", 9, 0, ErrNotNumber},
		{"--1", 9, 0, ErrNotNumber},
	} {
		got, err := Parse(tc.in, tc.scale)
		assert.ErrorIs(t, err, tc.err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		gotBytes, errBytes := Parse([]byte(tc.in), tc.scale)
		assert.Equal(t, got, gotBytes, "%s: the same from bytes", tc.in)
		assert.Equal(t, err, errBytes, "%s: the same from bytes", tc.in)
	}
}

// decimalSyntax is what Parse reads.
var decimalSyntax = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?([0-9]+))?$`)

// exactly is the oracle: s, in units of 10^-scale, rounded half to even,
// by arbitrary-precision arithmetic; ok false when beyond Max units.
func exactly(s string, scale int) (v int64, ok bool) {
	r, _ := new(big.Rat).SetString(s)
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	neg := r.Sign() < 0
	r.Abs(r)
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	switch c := new(big.Int).Lsh(m, 1).Cmp(r.Denom()); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		q.Add(q, big.NewInt(1))
	}
	if q.Cmp(big.NewInt(Max)) > 0 {
		return 0, false
	}
	if neg {
		q.Neg(q)
	}
	return q.Int64(), true
}

// FuzzParse checks Parse against arbitrary-precision
// arithmetic: the same number, rounded the same way, or the same refusal.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"12.3", "-0.0000000025", "1.5e3", "9000000000.0000000005", "1700000000120.5", ".5", "1e-10", "x"} {
		f.Add(s, uint8(9))
		f.Add(s, uint8(6))
	}
	f.Fuzz(func(t *testing.T, s string, scale uint8) {
		sc := int(scale % 10)
		got, err := Parse(s, sc)
		m := decimalSyntax.FindStringSubmatch(s)
		if m == nil {
			if !errors.Is(err, ErrNotNumber) {
				t.Fatalf("%q: %d, %v; want ErrNotNumber", s, got, err)
			}
			return
		}
		if e, _ := strconv.Atoi(m[3]); len(m[3]) > 4 || e > 1000 {
			return // the oracle would take too long; TestParseIsExact has these
		}
		want, ok := exactly(s, sc)
		switch {
		case !ok && !errors.Is(err, ErrTooFar):
			t.Fatalf("%q at scale %d: %d, %v; want ErrTooFar", s, sc, got, err)
		case ok && (err != nil || got != want):
			t.Fatalf("%q at scale %d: %d, %v; want %d", s, sc, got, err, want)
		}
	})
}

// What Append writes, Parse reads back, at every scale a file uses.
func TestAppendIsReadBack(t *testing.T) {
	assert.Equal(t, "1.500", string(Append(nil, 1_500, 3)))
	assert.Equal(t, "-0.000000001", string(Append(nil, -1, 9)))
	assert.Equal(t, "42", string(Append(nil, 42, 0)))
	assert.Equal(t, "-9223372036.854775808", string(Append(nil, math.MinInt64, 9)))
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		v, scale := r.Int64N(Max+1), r.IntN(10)
		if r.IntN(2) == 0 {
			v = -v
		}
		got, err := Parse(Append(nil, v, scale), scale)
		if err != nil || got != v {
			t.Fatalf("%d at scale %d: written %s, read %d, %v", v, scale, Append(nil, v, scale), got, err)
		}
	}
}
