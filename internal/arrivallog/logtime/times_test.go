package logtime

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/herdguard/herdguard/internal/decimal"
)

func TestParseDated(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // ns since the epoch
		err  error
	}{
		{"2024-01-02T03:04:05Z", 1704164645e9, nil},
		{"2024-01-02T03:04:05.25Z", 1704164645e9 + 25e7, nil},
		{"2024-01-02t03:04:05.123456789z", 1704164645e9 + 123456789, nil},
		{"2024-01-02 03:04:05+01:00", 1704164645e9 - 3600e9, nil},
		{"2024-01-02T03:04:05", 1704164645e9, nil}, // no zone, as mosquitto's: UTC
		{"1969-12-31T23:59:59.5Z", -5e8, nil},
		{"2256-01-01T00:00:00Z", 0, decimal.ErrTooFar},
		{"1600-01-01T00:00:00Z", 0, decimal.ErrTooFar},
		{"2024-13-02T03:04:05Z", 0, decimal.ErrNotNumber},
		{"2024-01-02", 0, decimal.ErrNotNumber},
		{"yesterday at noon!!", 0, decimal.ErrNotNumber},
	} {
		got, err := ParseDated(tc.in)
		if tc.err == decimal.ErrNotNumber {
			assert.ErrorContains(t, err, "expected an RFC 3339 time", tc.in)
		} else {
			assert.ErrorIs(t, err, tc.err, tc.in)
		}
		assert.Equal(t, tc.want, int64(got), tc.in)
	}
}
