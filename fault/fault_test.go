package fault_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/fault"
)

func TestAdmissionModesReadBackAsWritten(t *testing.T) {
	for _, m := range []fault.AdmissionMode{fault.RefuseOverLimit, fault.PauseOverLimit, fault.DisconnectOverLimit} {
		got, err := fault.ParseAdmissionMode(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	_, err := fault.ParseAdmissionMode("hold")
	assert.ErrorContains(t, err, "refuse, pause or disconnect")
	assert.Equal(t, "AdmissionMode(7)", fault.AdmissionMode(7).String())
}

func TestAdmissionValidate(t *testing.T) {
	assert.NoError(t, fault.Admission{}.Validate(), "the zero Admission: no limit")
	assert.NoError(t, fault.Admission{Rate: 100, Burst: 0, Mode: fault.PauseOverLimit}.Validate())
	for _, bad := range []fault.Admission{{Rate: 0, Burst: 5}, {Rate: -1}, {Rate: 10, Burst: -1}, {Rate: 10, Mode: 7}, {Mode: fault.PauseOverLimit}} {
		assert.ErrorIs(t, bad.Validate(), fault.ErrInvalid, "%+v", bad)
	}
}

func TestOutcomesReadBackAsWritten(t *testing.T) {
	var k fault.Counts
	for o := fault.Pending; o <= fault.Overflowed; o++ {
		got, ok := fault.ParseOutcome(o.String())
		require.True(t, ok, o)
		assert.Equal(t, o, got)
		*k.Of(o)++
	}
	assert.Equal(t, fault.Counts{Pending: 1, Accepted: 1, Refused: 1, Throttled: 1, Dropped: 1, Unreachable: 1, Overflowed: 1}, k,
		"every outcome has a counter of its own")
	_, ok := fault.ParseOutcome("admitted")
	assert.False(t, ok)
	assert.Equal(t, "outcome(9)", fault.Outcome(9).String())
}
