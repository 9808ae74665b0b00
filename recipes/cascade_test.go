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
// names. Under encountered each game's PPO stage comes after an SFT stage
// of it (the second SFT stage starts from an adapter).
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
	craigslist, casino := CascadeStage{Env: "craigslist", Params: params, Iterations: 2}, CascadeStage{Env: "casino", Params: params, Iterations: 1}
	o.Stages = []CascadeStage{craigslist, casino}
	if rule == SelectEncountered {
		sft := func(env string) CascadeStage {
			return CascadeStage{Env: env, Params: params, Kind: StageSFT, Episodes: 2, Iterations: 1}
		}
		o.Stages = []CascadeStage{sft("craigslist"), craigslist, sft("casino"), casino}
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
	// (inside the stage: eval_every 1) and at its end, every other stage
	// at its end.
	if len(rs) != len(o.Stages)+1 {
		t.Fatalf("results %+v", rs)
	}
	var ppo []CascadeStageResult // craigslist's two, casino's
	for _, r := range rs {
		if r.Kind == StageSFT {
			if r.SFTTrajectories == 0 || !r.Best {
				t.Errorf("sft stage %+v", r)
			}
			continue
		}
		ppo = append(ppo, r)
	}
	last := len(o.Stages)
	if len(ppo) != 3 || !ppo[0].Partial || ppo[0].Iteration != 1 || ppo[1].Partial || ppo[2].Stage != last {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		want := 2 // global_best: every environment
		if rule == SelectEncountered && r.Stage <= 2 {
			want = 1 // casino not met yet
		}
		if len(r.Reward) != want || r.Selection != rule {
			t.Errorf("evaluation %+v: want %d environments under %s", r, want, rule)
		}
	}
	for k := 1; k <= last; k++ {
		// Each stage starts from the checkpoint the rule picks from the
		// evaluations before it: under encountered, from the stage
		// before's best evaluation.
		want := cascadeStart(rs, k, rule, filepath.Join(dir, "c"))
		if rule == SelectEncountered && k > 1 {
			var best CascadeStageResult
			for _, r := range rs {
				if r.Stage == k-1 && r.Best {
					best = r
				}
			}
			if want.adapter != best.Adapter || want.label != best.checkpointName() {
				t.Errorf("stage %d's start %+v, want stage %d's best %+v", k, want, k-1, best)
			}
		}
		for _, r := range rs {
			if r.Stage == k && (r.From != want.label || r.FromAdapter != want.adapter) {
				t.Errorf("evaluation %+v: want from %q (%s)", r, want.label, want.adapter)
			}
		}
		if o.Stages[k-1].Kind == StageSFT {
			continue
		}
		c, err := loop.ReadConfig(filepath.Join(dir, "c", "stage-"+strconv.Itoa(k)))
		if err != nil {
			t.Fatal(err)
		}
		if c.Rollout.Adapter != want.adapter || k > 1 && want.adapter == "" {
			t.Errorf("stage %d's run starts from %q, want %q", k, c.Rollout.Adapter, want.adapter)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "c", "stage-"+strconv.Itoa(ppo[0].Stage), CascadeBestFile)); ppo[0].Best && err != nil {
		t.Errorf("the best adapter inside craigslist's stage was not kept: %v", err)
	}
	var b strings.Builder
	CascadeTable(&b, rs)
	if !strings.Contains(b.String(), ": craigslist, iteration 1") || !strings.Contains(b.String(), "| "+strconv.Itoa(last)+": casino") {
		t.Errorf("table:\n%s", b.String())
	}
	t.Logf("table:\n%s", b.String())
}
