package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/report"
	"github.com/herdguard/herdguard/internal/storm"
)

// A run its host bound exits with the host's status, before any
// expectation's, and says why it cannot pass.
func TestAHostBoundRunExitsWithTheHostsStatus(t *testing.T) {
	r := &report.Report{Setup: report.Setup{Policy: "full"}, Measures: report.Measures{Host: report.Host{Bound: true, NoticeP99S: 0.644}}}
	var e *exitError
	require.True(t, errors.As(errors.Join(hostBound(r), errors.New("an expectation failed")), &e))
	assert.Equal(t, exitHostBound, e.code, "not 0, not 1: the host's status, before any expectation's")
	assert.ErrorContains(t, e, "the host bound this run (644 ms late at the 99th percentile, against 500ms), so it cannot pass")
	r.Host.Bound = false
	assert.NoError(t, hostBound(r))
}

// A storm file's expectations fail first on a run its host bound, even
// where every figure the file asks for was met.
func TestAHostBoundRunFailsItsStormFile(t *testing.T) {
	f, err := storm.Read(strings.NewReader("fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all}]\nexpect: {verdict: spread}"), nil)
	require.NoError(t, err)
	r := &report.Report{Setup: report.Setup{Policy: "full"}, Findings: report.Findings{Verdict: "spread"},
		Measures: report.Measures{Host: report.Host{Bound: true, LagP99S: 0.7}}}
	var out bytes.Buffer
	err = f.Hold(r, &out)
	require.Error(t, err)
	require.Len(t, r.Expectations, 2)
	assert.Equal(t, report.Expectation{What: "the host kept the run's times", Want: "<= 500ms late", Got: "700ms late"}, r.Expectations[0])
	assert.True(t, r.Expectations[1].Pass, "the verdict the file asks for")
	b, err := r.JSON()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"host_bound": true`)
	assert.Contains(t, string(b), `"what": "the host kept the run's times"`)
}

// servedOrBound fails the test unless err is nil or says only that the
// host bound the run: a real-time run's times are the host's to keep, and
// a busy host may not keep them; what the test asserts beside holds
// either way.
func servedOrBound(t *testing.T, err error, out string) {
	t.Helper()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var e *exitError
	require.True(t, len(errs) == 1 && errors.As(errs[0], &e) && e.code == exitHostBound, "%v\n%s", err, out)
	t.Logf("the host bound this run: %v", err)
}
