package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/model/builtin"
)

func TestEvalScripted(t *testing.T) {
	dir := t.TempDir()
	args := []string{"eval", "--players", "scripted:strategic,scripted:random", "--opponents", "scripted:naive",
		"--env", "craigslist,casino", "--episodes", "8", "--bootstrap", "200", "--out", dir}
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The terminal gets a summary a person reads, the directory the full
	// report.
	for _, want := range []string{"mean reward (95% intervals):", "scripted:random − scripted:strategic, paired", "  all ",
		"full report: " + filepath.Join(dir, arena.MarkdownFile)} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "# Evaluation") || len(strings.Split(stdout, "\n")) > 20 {
		t.Errorf("the terminal got the full report:\n%s", stdout)
	}
	for _, name := range []string{arena.ResultsFile, arena.ConfigFile, arena.MarkdownFile, arena.JSONFile, arena.SVGFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("output: %v", err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, arena.MarkdownFile))
	for _, want := range []string{"# Evaluation", "## Mean reward", "## Paired differences", "## Ratings", "## Transfer", "## Outcomes", "## Behaviour: casino"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Again: everything is resumed, nothing played, the same table.
	again, stderr, code := runCLI(t, args...)
	if code != 0 || again != stdout || !strings.Contains(stderr, "resuming: 64 of 64") || !strings.Contains(stderr, "played 0 episodes") {
		t.Errorf("second run: exit %d, same table %v, stderr %q", code, again == stdout, stderr)
	}
}

func TestEvalConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "eval.yaml")
	os.WriteFile(cfg, []byte(`envs:
  - name: werewolf
    params: {players: 5}
episodes: 6
bootstrap: 200
players: [scripted:heuristic]
opponents: [scripted:random]
`), 0o644)
	stdout, stderr, code := runCLI(t, "eval", "--config", cfg, "--episodes", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "4 held-out episodes") || !strings.Contains(stdout, "| werewolf | villagers |") {
		t.Errorf("config not applied or flag not overriding it:\n%s", stdout)
	}
	os.WriteFile(cfg, []byte("episodes: 2\nepisdoes: 3\n"), 0o644)
	if _, stderr, code := runCLI(t, "eval", "--config", cfg); code == 0 || !strings.Contains(stderr, "episdoes") {
		t.Errorf("unknown key: exit %d, stderr %q", code, stderr)
	}
}

func TestEvalUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--players", "lora:x"}, "unknown kind"},
		{[]string{"--players", "adapter:", "--opponents", "scripted:naive"}, "needs a path"},
		{[]string{"--players", "scripted:naive", "--params", "{"}, "flag -params: want JSON"},
		{[]string{"--players", "scripted:naive", "--env", "chess"}, "unknown environment"},
		{[]string{"--players", "scripted:naive", "--episodes", "0"}, "episodes 0"},
		{[]string{"--players", "scripted:naive", "--judge-model", "j.gguf"}, "only sotopia"},
	}
	for _, tt := range tests {
		_, stderr, code := runCLI(t, append([]string{"eval"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// TestEvalModel: the base model and an adapter on it, against a script.
func TestEvalModel(t *testing.T) {
	if llamatest.LibDir() == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	dir := t.TempDir()
	mpath, apath := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "a.gguf")
	if err := model.WriteFile(mpath, model.Options{Arch: "llama", Preset: "tiny", Seed: 1, ContextLength: 8192}); err != nil {
		t.Fatal(err)
	}
	c, err := model.PresetConfig("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	l, err := llamatest.RandomLoRA(c, 4, 8, 0.3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.WriteLoRA(apath, l); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "eval")
	_, stderr, code := runCLI(t, "eval", "--model", mpath, "--llama-lib", llamatest.LibDir(), "--players", "base,adapter:"+apath,
		"--opponents", "scripted:naive", "--env", "craigslist", "--params", `{"rounds":2,"structured_only":true}`,
		"--episodes", "4", "--bootstrap", "200", "--ctx", "1024", "--max-tokens", "24", "--threads", "1", "--threads-batch", "1", "--kv", "f32", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "played 16 episodes") || !strings.Contains(stderr, "adapter switches") {
		t.Errorf("cost report missing: %s", stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, arena.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep arena.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 4 || rep.Reference != "base" || rep.Transfer == nil || rep.Transfer.Rows[0].Player != "adapter:"+apath {
		t.Errorf("report: %d cells, reference %q, transfer %+v", len(rep.Cells), rep.Reference, rep.Transfer)
	}
}

// TestEvalBuiltinParams: the built-in model, or a copy of it, plays a
// negotiation game named without params in the built-in parameters; explicit
// --params win.
func TestEvalBuiltinParams(t *testing.T) {
	if llamatest.LibDir() == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	dir := t.TempDir()
	mpath := filepath.Join(dir, "copy.gguf")
	if err := builtin.WriteFile(mpath); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		params []string
		want   map[string]any
	}{
		{"default", nil, loop.BuiltinParams()},
		{"explicit", []string{"--params", `{"rounds":2}`}, map[string]any{"rounds": 2.0}},
	} {
		out := filepath.Join(dir, c.name)
		args := append([]string{"eval", "--model", mpath, "--llama-lib", llamatest.LibDir(), "--players", "base",
			"--opponents", "scripted:naive", "--env", "craigslist", "--episodes", "1", "--bootstrap", "100",
			"--max-tokens", "24", "--threads", "1", "--threads-batch", "1", "--out", out}, c.params...)
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		b, err := os.ReadFile(filepath.Join(out, arena.ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Envs []struct {
				Params map[string]any `json:"params"`
			} `json:"envs"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c.want)
		got, _ := json.Marshal(cfg.Envs[0].Params)
		if len(cfg.Envs) != 1 || string(got) != string(want) {
			t.Errorf("%s: params %s, want %s", c.name, got, want)
		}
	}
}
