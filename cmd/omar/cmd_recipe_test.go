package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecipeErrors: the recipe command refuses what it cannot run before
// any model is loaded, with exit status 2 and a message naming the fix.
func TestRecipeErrors(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "taken")
	os.MkdirAll(taken, 0o755)
	os.WriteFile(filepath.Join(taken, "recipe.yaml"), []byte("steps: 1\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("stepz: 1\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no recipe", []string{"recipe"}, "cascade|distill"},
		{"unknown recipe", []string{"recipe", "league"}, "cascade|distill"},
		{"no directory", []string{"recipe", "cascade"}, "--out"},
		{"resume elsewhere", []string{"recipe", "distill", "--resume", taken, "--out", dir}, "no --out"},
		{"taken directory", []string{"recipe", "distill", "--out", taken}, "holds a recipe"},
		{"unknown key", []string{"recipe", "distill", "--config", bad, "--out", filepath.Join(dir, "d")}, "stepz"},
		{"nothing to resume", []string{"recipe", "cascade", "--resume", filepath.Join(dir, "none")}, "resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and a message mentioning %q", code, stderr, tc.want)
			}
		})
	}
}
