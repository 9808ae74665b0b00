package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the longest a non-test function may be, counted from
// the line of `func` to the line of its closing brace. Past this a
// function stops fitting in one reading and its pieces deserve names.
const maxFuncLines = 120

// longFuncDirs are directories whose functions may be longer: game
// scripts read top to bottom as the rules of one game, and splitting a
// phase across helpers makes them harder to check against the rules.
var longFuncDirs = []string{"werewolf", "games"}

// longFuncAllowed are single functions let off for now, each with why.
// An entry matches a function (or method, by its name alone) in a
// package whose directory, or the last element of it, is one of pkgs;
// when file is set, only in the file of that base name.
var longFuncAllowed = []struct {
	pkgs  []string
	file  string
	names []string
	why   string
}{}

// longFunc is one function over the limit.
type longFunc struct {
	pos   string // path:line, relative to the module root
	pkg   string // package directory, relative to the module root
	file  string // base name
	name  string // Recv.Name for methods
	lines int
}

// funcName is the function's name with its receiver type, if any.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch r := t.(type) {
	case *ast.IndexExpr:
		t = r.X
	case *ast.IndexListExpr:
		t = r.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// longFuncs returns every function of a non-test .go file under root
// longer than limit lines, skipping the directories imports skips.
func longFuncs(t *testing.T, root string, limit int) []longFunc {
	t.Helper()
	var out []longFunc
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "lib" || name == "bin" || name == "runs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start := fset.Position(fn.Pos()).Line
			n := fset.Position(fn.End()).Line - start + 1
			if n <= limit {
				continue
			}
			out = append(out, longFunc{
				pos:   fmt.Sprintf("%s:%d", rel, start),
				pkg:   filepath.ToSlash(filepath.Dir(rel)),
				file:  name,
				name:  funcName(fn),
				lines: n,
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found %d .go files under %s; the walk is broken", files, root)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out
}

// longFuncExempt says whether a long function is let off, and why.
func longFuncExempt(f longFunc) (string, bool) {
	for _, dir := range longFuncDirs {
		if under(f.pkg, dir) {
			return "game script", true
		}
	}
	short := f.name[strings.LastIndex(f.name, ".")+1:]
	for _, a := range longFuncAllowed {
		if a.file != "" && a.file != f.file {
			continue
		}
		pkgOK, nameOK := false, false
		for _, p := range a.pkgs {
			pkgOK = pkgOK || f.pkg == p || path.Base(f.pkg) == p
		}
		for _, n := range a.names {
			nameOK = nameOK || n == short
		}
		if pkgOK && nameOK {
			return a.why, true
		}
	}
	return "", false
}

// TestFuncLength fails naming every function of a non-test file over
// maxFuncLines, outside the exemptions above.
func TestFuncLength(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	for _, f := range longFuncs(t, root, maxFuncLines) {
		if why, ok := longFuncExempt(f); ok {
			t.Logf("%s: %s is %d lines (exempt: %s)", f.pos, f.name, f.lines, why)
			continue
		}
		t.Errorf("%s: %s is %d lines, over %d: split it into named pieces", f.pos, f.name, f.lines, maxFuncLines)
	}
}

// TestLongFuncExempt checks what the exemptions let off, so that a
// temporary entry cannot quietly cover more than its function.
func TestLongFuncExempt(t *testing.T) {
	for _, tc := range []struct {
		pkg, file, name string
		want            bool
	}{
		{"games/negotiation", "table.go", "Play", true},
		{"werewolf", "episode.go", "episode.night", true},
		{"bc", "builtin.go", "Build", false},
		{"selfplay", "seat.go", "modelSeat.Act", false},
		{"selfplay", "rollout.go", "modelSeat.Act", false},
		{"loop", "run.go", "Run", false},
		{"gameserver", "x.go", "Play", false},
		{"arena", "evaluate.go", "play", false},
	} {
		_, got := longFuncExempt(longFunc{pkg: tc.pkg, file: tc.file, name: tc.name})
		if got != tc.want {
			t.Errorf("%s/%s %s: got exempt %v, want %v", tc.pkg, tc.file, tc.name, got, tc.want)
		}
	}
}
