package all_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/backends"
	_ "github.com/lockbench/lockbench/backends/all"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/nemesis"
)

// outside are the packages that must know no backend by name: they read
// the backends' descriptors (bench, cmd), the results (report), or know
// only servers and hosts (nemesis, remote, inventory).
var outside = []string{"bench", "nemesis", "report", "cmd", "workloads", "judge", "history", "results", "stats", "inventory", "remote"}

// TestNoBackendNamedOutsideItsPackage: no non-test Go file of the
// packages outside the backends holds a string literal that names a
// registered backend ("redlock", "postgres?mode=advisory") — so none can
// branch on one — and none imports a backend package but the registry
// and backends/all.
func TestNoBackendNamedOutsideItsPackage(t *testing.T) {
	names := backends.Names()
	if len(names) < 9 {
		t.Fatalf("registered: %v", names)
	}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	for _, dir := range outside {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if rest, ok := strings.CutPrefix(p, "github.com/lockbench/lockbench/backends/"); ok && rest != "all" {
					t.Errorf("%s imports %s: read the backend's descriptor instead", fset.Position(imp.Pos()), p)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				name, _, _ := strings.Cut(s, "?")
				if slices.Contains(names, name) {
					t.Errorf("%s: the string %q names backend %s: ask its descriptor", fset.Position(lit.Pos()), s, name)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("scanned %d files: the walk missed the packages", files)
	}
}

// TestEveryInapplicableFaultHasItsKindsReason: wherever the nemesis
// cannot run a fault class on a backend's servers, the reason is the one
// written where the missing capability is not implemented — by the
// servers' kind, or the mechanism this machine lacks — not the
// capability's generic want, and no descriptor restates it. Member faults
// are judged as where network namespaces are available.
func TestEveryInapplicableFaultHasItsKindsReason(t *testing.T) {
	for _, d := range backends.Descriptors() {
		b, err := bench.ParseBackend(d.Name)
		if err != nil {
			t.Fatal(err)
		}
		sh := bench.Shape(b)
		if sh.Has(nemesis.Election) {
			sh.Caps |= nemesis.PeerLinks
		}
		for _, class := range nemesis.Names() {
			s, err := nemesis.Lookup(class)
			if err != nil {
				t.Fatal(err)
			}
			na, ok := errors.AsType[*nemesis.Inapplicable](s.Fits(sh))
			if !ok {
				continue
			}
			if strings.TrimSpace(na.Reason) == "" || na.Reason == na.Missing.Takes() || sh.Why[na.Missing] != na.Reason {
				t.Errorf("%s under %s: lacks %v with %q: not a reason its kind or a mechanism gives", d.Name, class, na.Missing, na.Reason)
			}
		}
		if strings.TrimSpace(d.Doc) == "" {
			t.Errorf("%s: no Doc: the CLI's help says what each backend is", d.Name)
		}
	}
}
