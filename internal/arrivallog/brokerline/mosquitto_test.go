package brokerline

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseMosquittoClientID(t *testing.T) {
	for rest, want := range map[string]string{
		"127.0.0.1:53522 as dev-17 (p2, c1, k30).":           "dev-17",
		"127.0.0.1:53522 as dev-17 (p2, c1, k30, u'user').":  "dev-17",
		"127.0.0.1:53522 as dev-17 (p2, c1, k30, u'a (b)').": "dev-17",
		"::1:53522 as weird id (p1) (p5, c0, k0).":           "weird id (p1)",
		"::1:53522 as a (p2, c1, k30) b (p2, c1, k30).":      "a (p2, c1, k30) b",
		"10.0.0.1 as old (c1, k60).":                         "old",
		"10.0.0.1 as as as (p2, c1, k30).":                   "as as",
		"10.0.0.1:1 as no-flags-at-all.":                     "no-flags-at-all",
		"10.0.0.1:1 as dev (p2, c1, k30, u'x', extra).":      "dev (p2, c1, k30, u'x', extra)",
		"10.0.0.1:1 without the word":                        "",
		"10.0.0.1:1 as  (p2, c1, k30).":                      "",
	} {
		assert.Equal(t, want, mosquittoClientID(rest), rest)
	}
}
