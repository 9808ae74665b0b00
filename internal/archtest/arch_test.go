// Package archtest holds the test of the repository's import direction,
// as docs/architecture.md states it: every package sits on a layer and
// imports only packages of lower layers (plus a few named exceptions,
// each with its reason). A new package must be given a layer here.
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/omar-selfplay/omar/"

// layers gives each package (by path prefix: the longest match wins) its
// layer. Keep it in step with docs/architecture.md.
var layers = map[string]int{
	// Leaves: no repository imports, or only other leaves.
	"seeds": 0, "gguf": 0, "internal": 0, "chart": 0, "model/builtin": 0,
	"llamacpp/cpuvariant": 0, "inference/gbnf": 0,
	"chattemplate": 0, "advantage": 0, "inference/ollama/ollamatest": 0,
	// The runtime, the bindings, the model writer; strict YAML (over
	// internal/errclip); a run directory's names and metrics lines (over
	// internal/jsonl).
	"engine": 1, "llamacpp": 1, "model": 1, "internal/strictyaml": 1, "runfiles": 1,
	"judge/judgetest": 1, // the judge's fake Ollama, over ollamatest
	// Option flags with --set over strict YAML.
	"internal/cliflag": 2,
	// Environments' shared parts and the inference seam.
	"engine/remote": 2, "engine/enginetest": 2, "games/negotiation": 2, "games/sealedbid": 2,
	"werewolf": 2, "sotopia": 2, "inference": 2, "llamacpp/llamatest": 2,
	"games/negotiation/negotiationtest": 3,
	// Games and backends.
	"games": 3, "inference/llama": 3, "inference/ollama": 3, "inference/scripted": 3,
	// The catalogue, seats and trajectories, the trainer.
	"envs": 4, "selfplay": 4, "train": 4,
	// What plays or reads trajectories: the judge, exports.
	"judge": 5, "export": 5, "players": 5,
	// Evaluation and the proxy.
	"arena": 6, "proxy": 6,
	// The training run.
	"loop": 7,
	// What is built on the run's parts: behaviour cloning and the
	// built-in model's build.
	"bc": 8,
	// What drives runs: the research recipes (a cascade's SFT stages are
	// bc's), the cluster, the web page.
	"recipes": 9, "cluster": 9, "web": 9,
	// Programs.
	"cmd": 10, "examples": 10,
}

// forbidden are imports the layers allow but the architecture does not:
// the direction the house is moving in (docs/architecture.md).
var forbidden = map[string][]string{
	// Evaluation plays players that are already open; the judge is its
	// own package, not part of the training run.
	"arena": {"loop"},
	// Environments know no model.
	"engine":   {"inference", "selfplay", "train", "llamacpp"},
	"games":    {"inference", "selfplay", "train", "llamacpp"},
	"werewolf": {"inference", "selfplay", "train", "llamacpp"},
	"sotopia":  {"inference", "selfplay", "train", "llamacpp"},
	// Only bindingUsers touch the bindings; the training run reaches
	// llama.cpp through inference/llama and train alone, and knows
	// nothing built on it.
	"selfplay": {"llamacpp"},
	"loop":     {"llamacpp", "bc", "recipes"},
	"export":   {"llamacpp", "train"},
	"proxy":    {"llamacpp", "train"},
	"players":  {"llamacpp", "train"},
}

// bindingUsers are the only packages outside llamacpp that import the
// bindings (package llamacpp itself; llamacpp/cpuvariant is a leaf that
// only finds files): the backend, the trainer, and bc, which loads a
// pinned CPU variant of the library before a build opens either.
var bindingUsers = []string{"inference/llama", "train", "bc"}

// unlinked are packages that must not link others even through the
// packages they import: what reads a run directory does not carry the
// trainer (or the llama backend) that wrote it.
var unlinked = map[string][]string{
	"web":      {"train", "loop"},
	"runfiles": {"train", "loop", "inference/llama", "llamacpp"},
}

// layer returns the layer of a package path (relative to the module).
func layer(pkg string) (int, bool) {
	best, l := "", 0
	for p, n := range layers {
		if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
			best, l = p, n
		}
	}
	return l, best != ""
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// imports returns each package directory's imports of module packages,
// from its non-test files.
func imports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(p, module) {
				continue
			}
			if out[pkg] == nil {
				out[pkg] = map[string]bool{}
			}
			out[pkg][strings.TrimPrefix(p, module)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// repoImports are the repository's import graph (imports).
func repoImports(t *testing.T) map[string]map[string]bool {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return imports(t, root)
}

func TestImportDirection(t *testing.T) {
	all := repoImports(t)
	pkgs := make([]string, 0, len(all))
	for p := range all {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	if len(pkgs) < 20 {
		t.Fatalf("found %d importing packages; the walk is broken", len(pkgs))
	}
	for _, from := range pkgs {
		lf, ok := layer(from)
		if !ok {
			t.Errorf("package %s has no layer: give it one in layers and docs/architecture.md", from)
			continue
		}
		for to := range all[from] {
			if under(to, from) && to != from {
				continue // a package may use its own subpackages (engine → engine/remote is not one)
			}
			lt, ok := layer(to)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no layer", from, to)
			case lt >= lf && !under(from, to):
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go to lower layers only", from, lf, to, lt)
			}
			if to == "llamacpp" && !under(from, "llamacpp") && !slices.ContainsFunc(bindingUsers, func(u string) bool { return under(from, u) }) {
				t.Errorf("%s imports %s: only %v touch llamacpp (docs/architecture.md)", from, to, bindingUsers)
			}
			for prefix, bans := range forbidden {
				if !under(from, prefix) {
					continue
				}
				for _, ban := range bans {
					if under(to, ban) {
						t.Errorf("%s imports %s: %s must not import %s (docs/architecture.md)", from, to, prefix, ban)
					}
				}
			}
		}
	}
}

// TestLinks follows every import of the packages in unlinked, through
// the packages in between, and fails on one they must not link.
func TestLinks(t *testing.T) {
	all := repoImports(t)
	for from, bans := range unlinked {
		// Every package under from, and every package those reach.
		linked, path := map[string]bool{}, map[string]string{}
		var queue []string
		for p := range all {
			if under(p, from) {
				linked[p], path[p] = true, p
				queue = append(queue, p)
			}
		}
		if len(queue) == 0 {
			t.Errorf("%s: no such importing package (is unlinked out of date?)", from)
		}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for to := range all[p] {
				if !linked[to] {
					linked[to], path[to] = true, path[p]+" → "+to
					queue = append(queue, to)
				}
			}
		}
		for to := range linked {
			for _, ban := range bans {
				if under(to, ban) {
					t.Errorf("%s links %s (%s): it must not link %s (docs/architecture.md)", from, to, path[to], ban)
				}
			}
		}
	}
}
