package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("episodes: 3\nstages: [{env: casino, iterations: 2}]\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("episodse: 3\n"), 0o644)
	invalid := filepath.Join(dir, "invalid.yaml")
	os.WriteFile(invalid, []byte("stages: [{env: casino, iterations: 0}]\n"), 0o644)

	run := filepath.Join(dir, "run")
	o, err := Config(run, cfg, false, DefaultCascade())
	if err != nil {
		t.Fatal(err)
	}
	if o.Episodes != 3 || len(o.Stages) != 1 || o.Stages[0].Env != "casino" || o.Stages[0].Iterations != 2 {
		t.Fatalf("got episodes %d, stages %+v; want the file's 3 and one casino stage", o.Episodes, o.Stages)
	}
	back, err := Config(run, "", true, DefaultCascade())
	if err != nil || back.Episodes != 3 || len(back.Stages) != 1 || len(back.Opponents) != len(o.Opponents) {
		t.Fatalf("resume: got %+v, %v; want the recorded config", back, err)
	}
	for _, tc := range []struct {
		name, dir, path string
		resume          bool
		want            string
	}{
		{"fresh in a recipe's directory", run, "", false, "holds a recipe"},
		{"resume with a config", run, cfg, true, "no config file"},
		{"resume without a recipe", filepath.Join(dir, "none"), "", true, "resume"},
		{"unknown key", filepath.Join(dir, "other"), bad, false, "episodse"},
		{"invalid", filepath.Join(dir, "invalid"), invalid, false, "iterations 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Config(tc.dir, tc.path, tc.resume, DefaultCascade())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tc.want)
			}
			if _, serr := os.Stat(filepath.Join(tc.dir, ConfigFile)); tc.dir != run && serr == nil {
				t.Errorf("a refused config was recorded")
			}
		})
	}
}

// TestRecipeExamples: the example recipe configs decode strictly and are
// valid.
func TestRecipeExamples(t *testing.T) {
	for _, tc := range []struct {
		file  string
		check func(dir, path string) error
	}{
		{"recipe-cascade.yaml", func(dir, path string) error {
			_, err := Config(dir, path, false, DefaultCascade())
			return err
		}},
		{"recipe-distill.yaml", func(dir, path string) error {
			_, err := Config(dir, path, false, DefaultDistill())
			return err
		}},
	} {
		if err := tc.check(t.TempDir(), filepath.Join("..", "examples", tc.file)); err != nil {
			t.Errorf("%s: %v", tc.file, err)
		}
	}
}
