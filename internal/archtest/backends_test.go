package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// openers are the constructors of backends and the only packages that may
// call them: every backend is opened by players (its Backend settings), so
// that each command and config opens them the same way. The judge opens
// its own Ollama client because the client carries the judge's reply
// format (a JSON schema per request).
var openers = map[string][]string{
	module + "inference/llama.New":  {"players", "inference/llama"},
	module + "inference/ollama.New": {"players", "inference/ollama", "judge"},
}

// TestBackendsOpenedInOnePlace fails naming each non-test call of a
// backend constructor outside the packages openers allows.
func TestBackendsOpenedInOnePlace(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "lib" || name == "bin" || name == "runs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		// Local names of the imported packages.
		local := map[string]string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			n := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || local[id.Name] == "" {
				return true
			}
			fn := local[id.Name] + "." + sel.Sel.Name
			allowed, watched := openers[fn]
			if !watched {
				return true
			}
			calls++
			for _, a := range allowed {
				if under(pkg, a) {
					return true
				}
			}
			t.Errorf("%s: %s.%s opens a backend outside %v: open it with players.Backend", fset.Position(sel.Pos()), id.Name, sel.Sel.Name, allowed)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 {
		t.Fatalf("found %d backend constructor uses; the walk is broken", calls)
	}
}
