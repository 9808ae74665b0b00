package strictyaml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type inner struct {
	Threads  int            `yaml:"threads"`
	Episodes int            `yaml:"episodes"`
	Params   map[string]any `yaml:"params"`
}

type shared struct {
	Seed uint64 `yaml:"seed"`
}

type config struct {
	Iterations int     `yaml:"iterations"`
	LR         float32 `yaml:"lr"`
	Rollout    inner   `yaml:"rollout"`
	Train      struct {
		Epochs int `yaml:"epochs"`
		Rank   int `yaml:"rank"`
	} `yaml:"train"`
	Counts []int  `yaml:"counts"`
	Shared shared `yaml:",inline"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown key", "rollout:\n  envv: x\n", `line 2: unknown key "envv"`},
		{"wrong type", "iterations: many\n", `"many" is not an integer`},
		{"a section where a number goes", "rollout: 3\n", "is not a section"},
		{"fraction", "iterations: 3.5\n", `line 1: iterations: "3.5" is not an integer`},
		{"nested fraction", "rollout:\n  episodes: 4\n  threads: 1.5\n", `line 3: rollout.threads: "1.5" is not an integer`},
		{"fraction in a flow map", "train: {rank: 8, epochs: 2.25}\n", `train.epochs: "2.25" is not an integer`},
		{"fraction in a list", "counts: [1, 2.5]\n", `counts[1]: "2.5" is not an integer`},
		{"fraction merged in", "rollout:\n  <<: [{threads: 1}, {episodes: 2.5}]\n", `rollout.episodes: "2.5" is not an integer`},
		{"fraction inline", "seed: 1.5\n", `seed: "1.5" is not an integer`},
		{"whole number as a float", "iterations: 3.0\nrollout: {episodes: 1e1}\n", ""},
		{"float where a float goes", "lr: 1.5e-3\nrollout: {params: {price: 2.5}}\n", ""},
		{"two documents", "iterations: 2\n---\niterations: 3\n", "second YAML document"},
		{"empty", "", ""},
		{"ok", "iterations: 3\nrollout: {episodes: 4}\nseed: 7\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			err := Decode(strings.NewReader(tc.in), &c)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "strictyaml."):
				t.Errorf("error names a Go type: %v", err)
			}
		})
	}
}

// TestDecodeKeepsDefaults: keys the file leaves out keep the values v held.
func TestDecodeKeepsDefaults(t *testing.T) {
	c := config{Iterations: 5}
	c.Rollout.Threads = 2
	if err := Decode(strings.NewReader("rollout: {episodes: 4}\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Iterations != 5 || c.Rollout.Threads != 2 || c.Rollout.Episodes != 4 {
		t.Errorf("got %+v, want iterations 5, threads 2 and episodes 4", c)
	}
}

func TestDecodeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("iterations: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c config
	if err := DecodeFile(path, &c); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("got %v, want an error starting with the path", err)
	}
	if err := DecodeFile(filepath.Join(t.TempDir(), "none.yaml"), &c); err == nil {
		t.Error("a missing file decoded")
	}
}
