package stormstatstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every test that runs Seeds() seeds (stormstatstest's or fleetsimtest's)
// runs them all in make stats: its name matches the target's -run pattern
// and its package is in the target's list. Under the race detector it runs
// one; a test moved to a package the list lacks would run one and no more,
// and its error rate would go unmeasured.
func TestEveryStatisticalTestRunsInMakeStats(t *testing.T) {
	root := filepath.Join("..", "..")
	run, pkgs := makeStats(t, filepath.Join(root, "Makefile"))
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		dir, err := filepath.Rel(root, path)
		require.NoError(t, err)
		for _, name := range seedingTests(t, path) {
			seen++
			assert.True(t, run.MatchString(name), "%s in ./%s runs Seeds() seeds: make stats's -run pattern must name it", name, dir)
			assert.Contains(t, pkgs, "./"+filepath.ToSlash(dir)+"/", "%s runs Seeds() seeds: make stats must list ./%s/", name, dir)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, seen, 10, "the walk found the statistical tests")
}

// makeStats reads the stats target's -run pattern and packages.
func makeStats(t *testing.T, makefile string) (*regexp.Regexp, []string) {
	b, err := os.ReadFile(makefile)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^stats:\n\t\$\(GO\) test -count=1 -run '([^']+)' (.+)$`).FindSubmatch(b)
	require.NotNil(t, m, "the Makefile's stats target")
	return regexp.MustCompile(string(m[1])), strings.Fields(string(m[2]))
}

// seedingTests are the Test functions in dir's test files that reach
// stormstatstest.Seeds or fleetsimtest.Seeds: directly, or through the
// package-level functions and variables of those files.
func seedingTests(t *testing.T, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	decls := map[string]ast.Node{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					decls[d.Name.Name] = d
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if v, ok := s.(*ast.ValueSpec); ok {
						for _, n := range v.Names {
							decls[n.Name] = v
						}
					}
				}
			}
		}
	}
	memo := map[string]bool{}
	var reaches func(name string) bool
	reaches = func(name string) bool {
		if r, ok := memo[name]; ok {
			return r
		}
		memo[name] = false // a cycle reaches nothing more
		found := false
		ast.Inspect(decls[name], func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && (x.Name == "stormstatstest" || x.Name == "fleetsimtest") && n.Sel.Name == "Seeds" {
					found = true
				}
			case *ast.Ident:
				if _, ok := decls[n.Name]; ok && n.Name != name && reaches(n.Name) {
					found = true
				}
			}
			return !found
		})
		memo[name] = found
		return found
	}
	var out []string
	for name := range decls {
		if strings.HasPrefix(name, "Test") && reaches(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
