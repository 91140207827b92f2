package surface

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/herdguard/herdguard"

// public are the packages a user imports.
var public = []string{"reconnect", "device", "publisher", "remoteconfig", "testbroker", "faultproxy", "fault"}

// files parses every non-test Go file of the module, by directory.
func files(t *testing.T) map[string][]*ast.File {
	t.Helper()
	out := map[string][]*ast.File{}
	fset := token.NewFileSet()
	require.NoError(t, filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../..":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", filepath.Dir(path))
		out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], f)
		return nil
	}))
	return out
}

// exported is pkg's exported top-level names.
func exported(fs []*ast.File) []string {
	var out []string
	for _, f := range fs {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out = append(out, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out = append(out, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// used is the names of pkg that files outside it select.
func used(all map[string][]*ast.File, pkg string) map[string]bool {
	out := map[string]bool{}
	for dir, fs := range all {
		if dir == pkg {
			continue
		}
		for _, f := range fs {
			name := ""
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/"+pkg {
					name = filepath.Base(pkg)
					if imp.Name != nil {
						name = imp.Name.Name
					}
				}
			}
			if name == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if s, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := s.X.(*ast.Ident); ok && x.Name == name {
						out[s.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	return out
}

// needed is what a user of pkg needs whatever calls it: its sentinel
// errors (Err...), to compare with errors.Is; the values of its exported
// types (an option, a kind, a code); and the types its exported functions,
// methods and types take or give, the shapes of what a user holds.
func needed(fs []*ast.File) map[string]bool {
	out := map[string]bool{}
	types := map[string]bool{}
	for _, f := range fs {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if s := s.(*ast.TypeSpec); s.Name.IsExported() {
						types[s.Name.Name] = true
					}
				}
			}
		}
	}
	mark := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && types[id.Name] {
				out[id.Name] = true
			}
			return true
		})
	}
	for _, f := range fs {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() {
					mark(d.Type)
					if d.Recv != nil {
						mark(d.Recv)
					}
				}
			case *ast.GenDecl:
				var typ ast.Expr // an iota group's values share its first type
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							ast.Inspect(s.Type, func(n ast.Node) bool { // another type's, not its own name
								if id, ok := n.(*ast.Ident); ok && types[id.Name] && id.Name != s.Name.Name {
									out[id.Name] = true
								}
								return true
							})
						}
					case *ast.ValueSpec:
						if s.Type != nil {
							typ = s.Type
						}
						for _, n := range s.Names {
							id, ok := typ.(*ast.Ident)
							if strings.HasPrefix(n.Name, "Err") || d.Tok == token.CONST && ok && types[id.Name] {
								out[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

// Every exported name of a public package is called from outside it by
// code that is not a test, is needed by what is, or is on kept with why a
// user needs it.
func TestEveryExportEarnsItsPlace(t *testing.T) {
	all := files(t)
	for _, pkg := range public {
		names := exported(all[pkg])
		require.NotEmpty(t, names, pkg)
		calls, need := used(all, pkg), needed(all[pkg])
		for _, n := range names {
			if calls[n] || need[n] {
				continue
			}
			_, ok := kept[pkg+"."+n]
			assert.True(t, ok, "%s.%s has no caller outside %s but tests: unexport it, move it, or say in kept why a user needs it", pkg, n, pkg)
		}
	}
	for k := range kept {
		pkg, n, _ := strings.Cut(k, ".")
		assert.True(t, slices.Contains(exported(all[pkg]), n), "kept names %s, which %s no longer exports", k, pkg)
	}
}

// kept are the exports with no caller in the module but tests, and why a
// user needs each.
var kept = map[string]string{
	// hooks a user's Metrics implements, found by a type assertion
	"device.BackPressureCounter":   "an optional Metrics hook: waits stretched by the broker",
	"device.PacketTooLargeCounter": "an optional Metrics hook: connections closed on an oversized packet",
	// errors a caller finds with errors.As (aliases of the transport's)
	"device.DisconnectError":     "errors.As: the broker's MQTT 5 DISCONNECT and its reason",
	"device.PacketTooLargeError": "errors.As: an incoming packet over Incoming.MaxPacket",
	"device.ProtocolError":       "errors.As: a broker that broke MQTT",
	// options and the defaults their fields document
	"device.CredentialsArePermanent":       "a Timing.Credentials value (an alias's, which the kind rule cannot see)",
	"device.RetryCredentialsAtCap":         "a Timing.Credentials value (an alias's, which the kind rule cannot see)",
	"device.DefaultIncomingQueue":          "Config.Incoming.Queue's default, which its doc names",
	"device.DefaultIncomingQueueBytes":     "Config.Incoming.QueueBytes's default, which its doc names",
	"fault.CodeConnectionRateExceeded":     "an Admission.Code: MQTT 5's 0x9F",
	"fault.CodeQuotaExceeded":              "an Admission.Code: MQTT 5's 0x97",
	"reconnect.DefaultFleetSafe":           "the fleet-safe shape's documented settings",
	"reconnect.DefaultResponsive":          "a Responsive's documented settings",
	"reconnect.DefaultMaxRetryAfter":       "Retry.MaxRetryAfter's default, which its doc names",
	"reconnect.DefaultMaxRetryAfterJitter": "Retry.MaxRetryAfterJitter's default, which its doc names",
	"remoteconfig.MaxDocumentBytes":        "the bound on a configuration document, which a server must keep within",
	"remoteconfig.MaxETagBytes":            "the bound on an ETag, which a server must keep within",
	// documented shapes: firmware with a client of its own drives them
	"device.NewMachine":       "the reconnect state machine for firmware with its own MQTT client (docs/agent.md)",
	"reconnect.NewFloodGuard": "the client-side flood guard, on its own (README)",
	"reconnect.NewResponsive": "the responsive retry timer, on its own (README)",
	// the Retry-After retry loop's parts, for a user's own HTTP client
	"reconnect.Classifier":                "an error that knows whether it is retryable (Retry.Retryable's default asks it)",
	"reconnect.IsRetryable":               "Retry.Retryable's default, to wrap in a predicate of one's own",
	"reconnect.NotImplementedIsPermanent": "a Retry.Retryable predicate for servers that answer 501 for good",
	"reconnect.RetryableStatus":           "which HTTP statuses retry, for a client that reads its own responses",
	"reconnect.ErrorReasons":              "a Google-style error body's reasons, for RetryableStatus",
	"reconnect.ParseRetryAfter":           "a Retry-After header read, for a client that reads its own responses",
	"reconnect.RetryAfterHint":            "an error that carries a server's Retry-After (Retry honours it)",
	"reconnect.RetryAfterOf":              "the hint in an error's chain",
	"reconnect.WithRetryAfter":            "an error annotated with a server's hint, for a non-HTTP client",
	// a test's broker, as httptest's NewUnstartedServer
	"testbroker.NewUnstarted": "a broker built without listening, for a test that sets it up before Start",
}
