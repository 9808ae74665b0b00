package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop/learning"
)

// TestBenchLearning runs the smallest benchmark (one iteration of two
// episodes of two test beds) and checks the table row and the JSON
// result of each.
func TestBenchLearning(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "results.jsonl")
	var out, errb bytes.Buffer
	code := runMain(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, []string{"bench", "learning",
		"--env", "testbed_bandit,testbed_rps", "--estimator", "reinforce", "--model", "tiny", "--seeds", "1",
		"--iterations", "1", "--episodes", "2", "--llama-lib", lib, "--dir", filepath.Join(dir, "runs"), "--json", js})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"testbed_bandit   reinforce    tiny        1  fraction", "testbed_rps      reinforce    tiny        1  exploit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d JSON results, want 2", len(lines))
	}
	for i, l := range lines {
		var r learning.Result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Points) != 1 {
			t.Errorf("result %d: got %d points, want 1", i, len(r.Points))
		}
		if rps := r.Options.Env == "testbed_rps"; rps != (r.Points[0].Moves != nil) {
			t.Errorf("result %d (%s): moves %v", i, r.Options.Env, r.Points[0].Moves)
		}
	}
}
