package reconnect_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/herdguard/herdguard/reconnect"
)

// Every shape of the package writes the Go that builds it, and this list
// holds one of each: a type with a Delay method missing from it fails the
// test, so a new shape cannot be added without its Go.
func TestEveryShapeWritesItsGo(t *testing.T) {
	want := map[reconnect.Shape]string{
		reconnect.IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: 32 * time.Second, JitterAtCap: true}: "reconnect.IoTCore{Base: time.Second, Jitter: time.Second, MaxBackoff: 32 * time.Second, JitterAtCap: true}",
		reconnect.Exponential{Base: time.Second, Multiplier: 1.5, Max: 10 * time.Minute}:                           "reconnect.Exponential{Base: time.Second, Multiplier: 1.5, Max: 10 * time.Minute}",
		reconnect.FullJitter{Base: 500 * time.Millisecond, Max: 2 * time.Hour}:                                     "reconnect.FullJitter{Base: 500 * time.Millisecond, Max: 2 * time.Hour}",
		reconnect.EqualJitter{Base: time.Second, Max: 90 * time.Second}:                                            "reconnect.EqualJitter{Base: time.Second, Max: 90 * time.Second}",
		reconnect.Decorrelated{Base: 1500 * time.Millisecond, Max: time.Minute}:                                    "reconnect.Decorrelated{Base: 1500 * time.Millisecond, Max: time.Minute}",
		reconnect.FleetSafe{Base: time.Second, Max: 64 * time.Second}:                                              "reconnect.FleetSafe{Base: time.Second, Max: 64 * time.Second}",
		reconnect.Linear{Initial: time.Second, Step: 250 * time.Microsecond, Max: time.Minute}:                     "reconnect.Linear{Initial: time.Second, Step: 250 * time.Microsecond, Max: time.Minute}",
		reconnect.Constant{Interval: 7}:                                                                            "reconnect.Constant{Interval: 7}",
	}
	var listed []string
	for s, src := range want {
		assert.Equal(t, src, fmt.Sprintf("%#v", s))
		e, err := parser.ParseExpr(src)
		require.NoError(t, err, "Go: %s", src)
		listed = append(listed, strings.TrimPrefix(fmt.Sprintf("%T", s), "reconnect."))
		assert.Equal(t, listed[len(listed)-1], e.(*ast.CompositeLit).Type.(*ast.SelectorExpr).Sel.Name)
	}
	slices.Sort(listed)
	assert.Equal(t, shapeTypes(t), listed, "every type of the package with a Delay method, one of each above")
}

// shapeTypes are the package's types with a Delay method, from its source.
func shapeTypes(t *testing.T) []string {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.Name == "Delay" {
				if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok && id.IsExported() {
					out = append(out, id.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
