package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

// llamaCLI runs the CLI for the llama.cpp commands, or skips when the
// libraries are not installed.
func llamaCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	var out, errb bytes.Buffer
	code := runMain(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, append(args, "--llama-lib", lib, "--threads", "1", "--threads-batch", "1"))
	return out.String(), errb.String(), code
}

func tinyGGUF(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := model.WriteFile(p, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGenerateCommand(t *testing.T) {
	m := tinyGGUF(t)
	run := func(args ...string) inference.Response {
		t.Helper()
		out, stderr, code := llamaCLI(t, append([]string{"generate", "--model", m, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var r inference.Response
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		return r
	}
	a := run("--prompt", "hello", "-n", "8", "--seed", "3")
	b := run("--prompt", "hello", "-n", "8", "--seed", "3")
	if len(a.Tokens) == 0 || len(a.Tokens) != len(b.Tokens) || len(a.Logprobs) != len(a.Tokens) {
		t.Fatalf("got %v and %v", a, b)
	}
	for i := range a.Tokens {
		if a.Tokens[i] != b.Tokens[i] {
			t.Fatalf("same seed, different tokens: %v vs %v", a.Tokens, b.Tokens)
		}
	}
	g := run("--prompt", "vote", "-n", "16", "--grammar", `root ::= "vote " [0-9]`)
	if !strings.HasPrefix(g.Text, "vote ") || len(g.Text) != 6 {
		t.Errorf("grammar reply %q, want \"vote <digit>\"", g.Text)
	}
	// An adapter changes the distribution the same tokens are drawn from.
	cfg, err := model.PresetConfig("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	lora, err := llamatest.RandomLoRA(cfg, 4, 8, 0.5, 7)
	if err != nil {
		t.Fatal(err)
	}
	adapter := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := gguf.WriteLoRA(adapter, lora); err != nil {
		t.Fatal(err)
	}
	withA := run("--prompt", "hello", "-n", "8", "--seed", "3", "--temp", "0", "--adapter", adapter)
	plain := run("--prompt", "hello", "-n", "8", "--seed", "3", "--temp", "0")
	if slices.Equal(withA.RawLogprobs, plain.RawLogprobs) {
		t.Errorf("--adapter changed nothing: raw logprobs %v", plain.RawLogprobs)
	}
	_, stderr, code := llamaCLI(t, "generate", "--prompt", "x")
	if code != 2 || !strings.Contains(stderr, "--model is required") {
		t.Errorf("no model: exit %d, stderr %q", code, stderr)
	}
}

func TestBenchCommand(t *testing.T) {
	m := tinyGGUF(t)
	out, stderr, code := llamaCLI(t, "bench", "decode", "--model", m, "--parallel", "1,2", "-n", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "ratio") {
		t.Fatalf("output %q: want a header and 2 rows", out)
	}
	for i, want := range []string{"1", "2"} {
		f := strings.Fields(lines[i+1])
		if len(f) != 7 || f[0] != want || f[4] != f[5] {
			t.Errorf("row %q: want parallel %s and equal token counts", lines[i+1], want)
		}
	}
	out, stderr, code = llamaCLI(t, "bench", "decode", "--parallel", "2", "-n", "3")
	if code != 0 || !strings.Contains(stderr, "built-in tiny model") || len(strings.Split(strings.TrimSpace(out), "\n")) != 2 {
		t.Errorf("without --model: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, _, code := llamaCLI(t, "bench", "encode"); code != 2 {
		t.Errorf("bench encode: exit %d, want 2", code)
	}
}

// TestGenerateRefusesDeepGrammar: a grammar beyond the limits is refused
// before the model loads (18,000 nested groups killed llama.cpp).
func TestGenerateRefusesDeepGrammar(t *testing.T) {
	m := tinyGGUF(t)
	g := filepath.Join(t.TempDir(), "deep.gbnf")
	if err := os.WriteFile(g, []byte("root ::= "+strings.Repeat("(", 18000)+`"a"`+strings.Repeat(")", 18000)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := llamaCLI(t, "generate", "--model", m, "--prompt", "hi", "--grammar", "@"+g)
	if code == 0 || !strings.Contains(stderr, "nested more than 64") {
		t.Errorf("exit %d, stderr %q: want a refusal naming the nesting limit", code, stderr)
	}
}
