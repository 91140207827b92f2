package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/plan"
)

// A duration flag past its bound is refused, naming the flag and the
// bound, as the command reads its flags. Each command line carries a
// second mistake that the command would find later: the duration is
// refused first, before anything runs (a 2,000,000 h cap wrapped the run's
// recovery bound round; an outage that long kept the model busy for ever).
func TestDurationFlagsPastTheirBoundsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-engine", "virtual", "-max-backoff", "2000000h", "-devices", "0"}, "-max-backoff 2000000h0m0s: at most 24h0m0s"},
		{[]string{"run", "-engine", "virtual", "-outage", "2000000h", "-devices", "0"}, "-outage 2000000h0m0s: at most 24h0m0s"},
		{[]string{"run", "-keepalive", "65536s", "-devices", "0"}, "-keepalive 18h12m16s: at most 18h12m15s"},
		{[]string{"run", "-duration", "2000000h", "-devices", "0"}, "-duration 2000000h0m0s: at most 168h0m0s"},
		{[]string{"plan", "-outage", "2000000h", "-devices", "0"}, "-outage 2000000h0m0s: at most 24h0m0s"},
		{[]string{"plan", "-target-p99", "2000000h", "-devices", "0"}, "-target-p99 2000000h0m0s: at most 168h0m0s"},
		{[]string{"plan", "-caps", "32s,2000000h", "-devices", "0"}, "-caps 2000000h0m0s: at most 24h0m0s"},
		{[]string{"grid", "-outage", "2000000h", "-devices", "x"}, "-outage 2000000h0m0s: at most 24h0m0s"},
		{[]string{"grid", "-max-backoff", "2000000h", "-devices", "x"}, "-max-backoff 2000000h0m0s: at most 24h0m0s"},
		{[]string{"grid", "-mix", "full", "-outage", "2000000h", "-shares", "x"}, "-outage 2000000h0m0s: at most 24h0m0s"},
		{[]string{"soak", "-outage", "2000000h", "-devices", "0"}, "-outage 2000000h0m0s: at most 24h0m0s"},
		{[]string{"delays", "-max-backoff", "2000000h", "-attempts", "0"}, "-max-backoff 2000000h0m0s: at most 24h0m0s"},
		{[]string{"merge", "-await", "2000000h"}, "-await 2000000h0m0s: at most 168h0m0s"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, noenv, nil, &out, &out)
		require.Error(t, err, tc.args)
		assert.Equal(t, tc.want, err.Error(), tc.args)
	}
}

// Every duration flag of every command has its bound.
func TestEveryDurationFlagIsBounded(t *testing.T) {
	flagOf := regexp.MustCompile(`(?m)^\s+-(\S+) duration$`)
	seen := 0
	for _, cmd := range [][]string{{"run"}, {"plan"}, {"grid"}, {"grid", "-mix", "full"}, {"soak"}, {"calibrate"}, {"delays"},
		{"merge"}, {"deploy"}, {"judge"}} {
		var help bytes.Buffer
		require.NoError(t, run(context.Background(), append(cmd, "-h"), noenv, nil, &help, &help), cmd)
		for _, m := range flagOf.FindAllStringSubmatch(help.String(), -1) {
			seen++
			_, bounded := plan.FlagLimits[m[1]]
			assert.True(t, bounded, "%s -%s has no bound in plan.FlagLimits", strings.Join(cmd, " "), m[1])
		}
	}
	assert.GreaterOrEqual(t, seen, len(plan.FlagLimits), "the help lists every flag bounded")
}
