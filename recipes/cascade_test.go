package recipes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
)

// tinyOptions is a small sealed-bid run on the tiny llama model
// (generated once per test directory), 2 episodes per iteration: the run
// template of the recipes' tests, as in package loop's.
func tinyOptions(t *testing.T, dir string, iterations int) loop.Options {
	t.Helper()
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("the llama.cpp libraries are not installed (make deps)")
	}
	path := filepath.Join(dir, "tiny.gguf")
	if _, err := os.Stat(path); err != nil {
		if err := model.WriteFile(path, model.Options{Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	o := loop.Options{}.Defaults()
	o.Iterations = iterations
	o.Rollout.Env = "sealedbid"
	o.Rollout.Params = map[string]any{"rounds": 1, "bidders": 2}
	o.Rollout.Model = path
	o.Rollout.LlamaLib = lib
	o.Rollout.Episodes, o.Rollout.Parallel = 2, 2
	o.Rollout.MaxTokens, o.Rollout.Context = 8, 1024
	o.Estimator = "rae"
	o.Train.Epochs, o.Train.MiniBatch = 1, 2
	o.Train.LR, o.Train.ValueLR = 0.01, 0.01
	o.League.Enabled, o.Eval.Every = false, 0
	return o
}

// TestCascade runs a two-stage cascade on the tiny model, interrupted in
// the second stage and resumed: the second stage starts from the first's
// adapter, and every stage is evaluated on both environments.
func TestCascade(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model")
	}
	dir := t.TempDir()
	o := CascadeOptions{Run: tinyOptions(t, dir, 1), Episodes: 2, Opponents: []string{"scripted:random"}, EvalEvery: 1}
	o.Run.Rollout.MaxTokens, o.Run.Rollout.Context = 40, 2048
	params := map[string]any{"structured_only": true, "rounds": 2}
	o.Stages = []CascadeStage{{Env: "craigslist", Params: params, Iterations: 2}, {Env: "casino", Params: params, Iterations: 1}}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Cascade(ctx, o, filepath.Join(dir, "c"), func(r *loop.Run) {
		if r.Game().ID() == "casino_v1" {
			r.Hooks.Phase = func(int, string) { cancel() }
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted cascade: %v", err)
	}
	rs, err := Cascade(context.Background(), o, filepath.Join(dir, "c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Stage 1 is evaluated after its first iteration (inside the stage:
	// eval_every 1) and at its end, stage 2 at its end.
	if len(rs) != 3 || !rs[0].Partial || rs[0].Iteration != 1 || !rs[0].Best || rs[1].Partial || rs[2].Stage != 2 {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if len(r.Reward) != 2 {
			t.Errorf("evaluation %+v: want both environments", r)
		}
	}
	want := rs[0].Adapter
	if rs[1].Best {
		want = rs[1].Adapter
	}
	c2, err := loop.ReadConfig(filepath.Join(dir, "c", "stage-2"))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Rollout.Adapter != want || want == "" {
		t.Errorf("stage 2 starts from %q, want the best so far %q", c2.Rollout.Adapter, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "c", "stage-1", CascadeBestFile)); err != nil {
		t.Errorf("the best adapter inside stage 1 was not kept: %v", err)
	}
	var b strings.Builder
	CascadeTable(&b, rs)
	if !strings.Contains(b.String(), "| 1: craigslist, iteration 1 (best) |") || !strings.Contains(b.String(), "| 2: casino") {
		t.Errorf("table:\n%s", b.String())
	}
}
