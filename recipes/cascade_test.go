package recipes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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

// TestCascade runs a cascade on the tiny model under each selection rule,
// interrupted in its last stage and resumed: each stage starts from the
// checkpoint the rule picks, and is evaluated on the environments the rule
// names. Under encountered the cascade opens with an SFT stage.
func TestCascade(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model")
	}
	for _, rule := range []string{SelectGlobalBest, SelectEncountered} {
		t.Run(rule, func(t *testing.T) { testCascade(t, rule) })
	}
}

func testCascade(t *testing.T, rule string) {
	dir := t.TempDir()
	o := CascadeOptions{Run: tinyOptions(t, dir, 1), Episodes: 2, Opponents: []string{"scripted:random"}, EvalEvery: 1, Selection: rule}
	o.Run.Rollout.MaxTokens, o.Run.Rollout.Context = 40, 2048
	params := map[string]any{"structured_only": true, "rounds": 2}
	o.Stages = []CascadeStage{{Env: "craigslist", Params: params, Iterations: 2}, {Env: "casino", Params: params, Iterations: 1}}
	first := 0 // the stage of craigslist's PPO, from 0
	if rule == SelectEncountered {
		o.Stages = append([]CascadeStage{{Env: "craigslist", Params: params, Kind: StageSFT, Episodes: 2, Iterations: 1}}, o.Stages...)
		first = 1
	}
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
	// Craigslist's PPO stage is evaluated after its first iteration
	// (inside the stage: eval_every 1) and at its end, casino's at its end.
	if len(rs) != first+3 {
		t.Fatalf("results %+v", rs)
	}
	if rule == SelectEncountered && (rs[0].Kind != StageSFT || rs[0].From != "base" || !rs[0].Best || rs[0].SFTTrajectories == 0) {
		t.Errorf("sft stage %+v", rs[0])
	}
	ppo := rs[first:]
	if !ppo[0].Partial || ppo[0].Iteration != 1 || ppo[1].Partial || ppo[2].Stage != first+2 {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		want := 2 // global_best: every environment
		if rule == SelectEncountered && r.Env == "craigslist" {
			want = 1 // casino not met yet
		}
		if len(r.Reward) != want || r.Selection != rule {
			t.Errorf("evaluation %+v: want %d environments under %s", r, want, rule)
		}
	}
	// Casino's stage starts from craigslist's PPO stage's best evaluation
	// (encountered), or from the best of all so far (global_best).
	want := cascadeStart(rs, first+2, rule, filepath.Join(dir, "c"))
	if rule == SelectEncountered {
		wantAdapter := ppo[0].Adapter
		if ppo[1].Best {
			wantAdapter = ppo[1].Adapter
		}
		if want.adapter != wantAdapter || wantAdapter == "" {
			t.Errorf("encountered: stage %d's start %q, want stage %d's best %q", first+2, want.adapter, first+1, wantAdapter)
		}
	}
	c2, err := loop.ReadConfig(filepath.Join(dir, "c", "stage-"+strconv.Itoa(first+2)))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Rollout.Adapter != want.adapter || want.adapter == "" || ppo[2].From != want.label || ppo[2].FromAdapter != want.adapter {
		t.Errorf("casino's stage starts from %q (from %q), want %q (%q)", c2.Rollout.Adapter, ppo[2].From, want.adapter, want.label)
	}
	if _, err := os.Stat(filepath.Join(dir, "c", "stage-"+strconv.Itoa(first+1), CascadeBestFile)); ppo[0].Best && err != nil {
		t.Errorf("the best adapter inside craigslist's stage was not kept: %v", err)
	}
	var b strings.Builder
	CascadeTable(&b, rs)
	if !strings.Contains(b.String(), ": craigslist, iteration 1") || !strings.Contains(b.String(), "| "+strconv.Itoa(first+2)+": casino") || !strings.Contains(b.String(), " | "+want.label+" | ") {
		t.Errorf("table:\n%s", b.String())
	}
}
