// Package decimal reads and writes decimal numbers exactly, as whole
// numbers of 10^-scale units: "12.3" at scale 9 is 12,300,000,000 (12.3 s
// in nanoseconds), where a float64 would hold 12.300000000000000711. Every
// time and lag the module writes or reads in text goes through it, so that
// a file written and read back gives the same instants, and digits beyond
// the scale round one way everywhere: to the nearest, ties to even.
package decimal

import (
	"errors"
	"strconv"
)

// Max bounds a number's units: 9e18, so that a time in nanoseconds is
// within 9e9 s (285 years) of 0, inside what a time.Duration holds.
const Max = 9e18

var (
	ErrNotNumber = errors.New("not a decimal number")
	ErrTooFar    = errors.New("more than 285 years from 0")
)

// maxExponent bounds an exponent's magnitude: beyond it a number is 0 or
// too far whatever its digits (no input holds that many digits).
const maxExponent = 1 << 30

// Parse reads s, a decimal number such as -12.25, 1700000000, .5 or
// 1.5e3 (no spaces, no Inf or NaN), as a whole number of 10^-scale units.
// It reads it exactly, rounding digits beyond the scale to the nearest
// unit, ties to even. A number that is not within Max units is
// ErrTooFar; anything else, ErrNotNumber.
func Parse[T string | []byte](s T, scale int) (int64, error) {
	d, ok := scan(s)
	if !ok {
		return 0, ErrNotNumber
	}
	// The digits at index < keep are whole units; the one at keep rounds.
	keep := int64(d.intDigits) + d.exp + int64(scale)
	v, err := round(s[d.mantissa:d.end], keep)
	if d.neg {
		v = -v
	}
	return v, err
}

// parts is the parts of a decimal number scan found in its text.
type parts struct {
	neg           bool
	mantissa, end int   // where its digits and point are, s[mantissa:end]
	intDigits     int   // how many digits come before the point
	exp           int64 // its exponent, within maxExponent either side of 0
}

// scan finds the parts of s, a decimal number; ok false when s is
// not one.
func scan[T string | []byte](s T) (d parts, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	d.mantissa = i
	digits, point := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			if !point {
				d.intDigits++
			}
			continue
		case c == '.' && !point:
			point = true
			continue
		}
		break
	}
	d.end = i
	if digits == 0 {
		return d, false
	}
	if i == len(s) {
		return d, true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return d, false
	}
	d.exp, ok = exponent(s[i+1:])
	return d, ok
}

// exponent reads the digits after an e, with their sign, capped at
// maxExponent either side of 0; ok false unless s is all of them.
func exponent[T string | []byte](s T) (exp int64, ok bool) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		exp = min(exp*10+int64(c-'0'), maxExponent)
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

// round is the whole number of units that digits (and a point,
// skipped) make when those before index keep are whole units. The digit
// at keep rounds to the nearest, ties to even. Those after it only break
// ties. Beyond Max it is ErrTooFar.
func round[T string | []byte](digits T, keep int64) (int64, error) {
	var v, k int64
	round, sticky := byte(0), false
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c == '.' {
			continue
		}
		d := int64(c - '0')
		switch {
		case k < keep:
			if v > (Max-d)/10 {
				return 0, ErrTooFar
			}
			v = v*10 + d
		case k == keep:
			round = byte(d)
		default:
			sticky = sticky || d != 0
		}
		k++
	}
	for ; k < keep && v != 0; k++ {
		if v > Max/10 {
			return 0, ErrTooFar
		}
		v *= 10
	}
	if round > 5 || round == 5 && (sticky || v%2 == 1) {
		if v++; v > Max {
			return 0, ErrTooFar
		}
	}
	return v, nil
}

// Append appends v units of 10^-scale as a decimal with every one of its
// scale digits after the point (Append(b, 1_500, 3) is "1.500"): exact,
// unlike a float.
func Append(b []byte, v int64, scale int) []byte {
	if v < 0 {
		b = append(b, '-')
	}
	u := uint64(v)
	if v < 0 {
		u = -u
	}
	unit := uint64(1)
	for range scale {
		unit *= 10
	}
	b = strconv.AppendUint(b, u/unit, 10)
	if scale == 0 {
		return b
	}
	b = append(b, '.')
	frac := u % unit
	for place := unit / 10; place > 0; place /= 10 { // every digit, leading zeros included
		b = append(b, byte('0'+frac/place))
		frac %= place
	}
	return b
}
