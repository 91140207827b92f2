package storm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/fileline"
	"github.com/herdguard/herdguard/internal/storm"
)

// laughs is a billion laughs: ten aliases of ten, nine deep, a billion
// strings once a group's labels expand them, and under 800 bytes as
// written. The decoder before this check held 4.5 GB of it within 20 s.
func laughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	b.WriteString("fleet: [{devices: 10, labels: {lol: *a8}}]\ntimeline: [{disruption: drop-all}]\n")
	return b.String()
}

// YAML's anchors, aliases and merge keys are refused where they are
// written, before anything is expanded: a billion laughs is an error
// naming its first anchor's line, not gigabytes. Deep nesting and long
// keys, which the parser pays for by their square, are refused so too.
func TestAnchorsAliasesAndMergeKeysAreRefusedWhereTheyAre(t *testing.T) {
	require.Less(t, len(laughs()), 800)
	for _, tc := range []struct {
		name, text, want string
		line             int
	}{
		{"an alias", "fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all}]\nexpect: *x\n", "*x: a storm file takes no anchors", 3},
		{"a merge key", "fleet:\n  - devices: 10\n    <<: {policy: full}\ntimeline: [{disruption: drop-all}]\n", "<<: a storm file takes no", 3},
		{"an anchor", "fleet: &f [{devices: 10}]\ntimeline: [{disruption: drop-all}]\n", "&f: a storm file takes no", 1},
		{"an explicit key", "? fleet\n: [{devices: 10}]\ntimeline: [{disruption: drop-all}]\n", "?: a storm file takes no", 1},
		{"nesting", "fleet: [{devices: 10, labels: {a: [[[[[1]]]]]}}]\n", "nested over 6 deep", 1},
		{"block nesting", "fleet:\n- - - - - - - 1\n", "nested over 6 deep", 2},
		{"a long key", "fleet: [{devices: 10, labels: {" + strings.Repeat("k", 129) + ": v}}]\n", "a key of 129 bytes", 1},
		{"a billion laughs", laughs(), "&a0: a storm file takes no anchors (&), aliases (*), merge keys (<<)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(t, tc.text)
			require.Error(t, err)
			assert.ErrorIs(t, err, storm.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
			var at *fileline.Error
			require.ErrorAs(t, err, &at)
			assert.Equal(t, tc.line, at.Line)
		})
	}
	// What a storm file does nest: a group's labels, a list of a list.
	_, err := read(t, "fleet:\n  - devices: 10\n    labels:\n      firmware: \"2.1\"\nbrokers: {external: {urls: [\"tcp://a:1883\", \"tcp://b:1883\"]}}\n")
	assert.NoError(t, err)
}

// A storm file is read to MaxFileBytes and no further, by every reader
// (run -f, plan -f, merge -f and deploy -f read through Load), and its
// ${NAME}s may not take it past the cap either.
func TestAStormFileIsReadToItsCap(t *testing.T) {
	valid := "fleet: [{devices: 10}]\ntimeline: [{disruption: drop-all}]\n"
	atCap := valid + strings.Repeat("#", storm.MaxFileBytes-len(valid)-1) + "\n"
	_, err := read(t, atCap)
	require.NoError(t, err, "a file of the cap itself")

	dir := t.TempDir()
	over := filepath.Join(dir, "over.yaml")
	require.NoError(t, os.WriteFile(over, []byte(atCap+"\n"), 0o600))
	_, err = storm.Load(over)
	assert.ErrorIs(t, err, storm.ErrInvalid)
	assert.ErrorContains(t, err, "over 128 KiB")
	_, err = storm.ReadFile(over, nil)
	assert.ErrorContains(t, err, "over 128 KiB")
	_, err = read(t, atCap+"\n")
	assert.ErrorContains(t, err, "over 128 KiB")

	big := strings.Repeat("x", storm.MaxFileBytes/4)
	_, err = storm.Read(strings.NewReader(valid+"# ${BIG} ${BIG} ${BIG} ${BIG} ${BIG}\n"), func(string) string { return big })
	assert.ErrorIs(t, err, storm.ErrInvalid)
	assert.ErrorContains(t, err, "over 128 KiB with its ${NAME}s filled in")
}
