package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/internal/deploy"
	"github.com/herdguard/herdguard/internal/plan"
)

// deploy/ is what docs/large-fleets.md's command renders for
// deploy/storm.yaml, file for file.
func TestDeployDirectoryIsWhatTheCommandRenders(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"deploy", "-f", "../../deploy/storm.yaml", "-image", "registry.example.com/devicesim:v1",
		"-out", dir}, noenv, nil, &out, &out))
	rendered, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, rendered)
	for _, e := range rendered {
		want, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("../../deploy", e.Name()))
		require.NoError(t, err, "deploy/ lacks %s: render it again (docs/large-fleets.md)", e.Name())
		assert.Equal(t, string(want), string(got), "deploy/%s is not what devicesim deploy renders: render it again", e.Name())
	}
}

// Each pod's command line, as Kubernetes expands it, runs its own slice of
// the storm into the Job run's own directory, meets the others beside it,
// and strikes when the storm file says.
func TestAPodsCommandLineRunsItsShard(t *testing.T) {
	const uid = "0f3c5d1e-7b2a-4c69-9d3e-2a1b4c5d6e7f"
	for i := range 10 {
		env := map[string]string{deploy.IndexVar: strconv.Itoa(i), deploy.RunVar: uid}
		var args []string
		for _, a := range deploy.Args() {
			a = os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(a), func(k string) string { return env[k] })
			args = append(args, strings.Replace(a, "/storm/storm.yaml", "../../deploy/storm.yaml", 1))
		}
		require.Equal(t, "run", args[0])
		f, err := parseRunFlags(args[1:], io.Discard)
		require.NoError(t, err)
		p, err := f.resolve(func(k string) string { return env[k] }, nil, io.Discard, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, plan.Shard{Index: i, Count: 10}, p.Shard)
		assert.Equal(t, "/reports/"+uid+"/shard-"+strconv.Itoa(i), *f.out)
		assert.Equal(t, "/reports/"+uid+"/ready", p.ReadyDir, "the shards meet beside their reports")
		assert.Equal(t, "+2m0s", p.DisruptAt.String())
		assert.True(t, *f.merge)
	}
}
