package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/selfplay"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/runfiles"
)

// tinyOptions is a small sealed-bid run on the tiny llama model
// (generated once per test directory), 2 episodes per iteration.
func tinyOptions(t *testing.T, dir string, iterations int) Options {
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
	o := Options{}.Defaults()
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

// TestResume runs 2 iterations straight, and again interrupted (a
// cancelled context, as on SIGINT) in the rollout of iteration 2 and
// resumed in a new Run: metrics (timings aside) and adapter bytes must be
// identical. The rollout decodes on two llama contexts (AutoContexts' choice
// for the tiny model, recorded in config.yaml), so the episodes' routing to
// them is part of what must repeat.
func TestResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model for 4 iterations")
	}
	dir := t.TempDir()
	straight := filepath.Join(dir, "straight")
	opts := tinyOptions(t, dir, 2)
	r, err := Open(straight, opts, Fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := ReadConfig(straight); err != nil || o.Rollout.Contexts != 2 {
		t.Fatalf("config.yaml: contexts %d (%v), want 2", o.Rollout.Contexts, err)
	}
	err = r.Train(context.Background())
	r.Close()
	if err != nil {
		t.Fatal(err)
	}

	broken := filepath.Join(dir, "broken")
	r, err = Open(broken, opts, Fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Hooks.Phase = func(it int, phase string) {
		if it == 2 && phase == "rollout" {
			cancel()
		}
	}
	err = r.Train(ctx)
	r.Close()
	if !errors.Is(err, context.Canceled) || r.State().Iteration != 1 {
		t.Fatalf("interrupted run: got %v after iteration %d, want context.Canceled after 1", err, r.State().Iteration)
	}
	o, err := ReadConfig(broken)
	if err != nil {
		t.Fatal(err)
	}
	r, err = Open(broken, o, Resume, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Train(context.Background())
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := stable(t, filepath.Join(straight, runfiles.MetricsFile)), stable(t, filepath.Join(broken, runfiles.MetricsFile)); a != b {
		t.Errorf("metrics after resume:\n%s\nwant\n%s", b, a)
	}
	a, _ := os.ReadFile(filepath.Join(straight, runfiles.AdapterFile))
	b, _ := os.ReadFile(filepath.Join(broken, runfiles.AdapterFile))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("adapter bytes differ after resume (%d and %d bytes)", len(a), len(b))
	}
}

// TestInterruptCheckpointFails: when the checkpoint written on an
// interrupt fails, the run must not report a plain interrupt (a caller
// would then point at a checkpoint that is not there).
func TestInterruptCheckpointFails(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	r, err := Open(out, fakeOptions(2), Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Hooks.Phase = func(it int, phase string) {
		if it == 2 && phase == "rollout" {
			// The checkpoint directory cannot be written any more.
			ckpt := filepath.Join(out, runfiles.CheckpointDir)
			if err := os.RemoveAll(ckpt); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ckpt, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
	}
	if err := r.Train(ctx); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want the checkpoint's failure, not an interrupt", err)
	}
}

// TestLeagueLlama: a league run on the tiny model: the base model and the
// policy's snapshots play from the policy's own backend as named adapters.
func TestLeagueLlama(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the tiny model")
	}
	dir := t.TempDir()
	o := tinyOptions(t, dir, 3)
	o.Rollout.Episodes = 4
	o.League = DefaultLeague()
	o.League.Enabled, o.League.SnapshotEvery = true, 1
	o.League.Scripted = []string{"shading"}
	r, err := Open(filepath.Join(dir, "run"), o, Fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms, err := runfiles.ReadMetrics(r.Path(runfiles.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	met := map[string]bool{}
	for _, m := range ms {
		for name := range m.League {
			met[name] = true
		}
	}
	if !met["base"] && !met["iter-1"] && !met["iter-2"] {
		t.Errorf("no model opponent was met: %v", met)
	}
	if got := r.State().League.Snapshots; len(got) != 3 {
		t.Errorf("snapshots %v, want one per iteration", got)
	}
}

// TestTraceLlama: llama.cpp takes the theory-of-mind trace grammar
// wrapped around a game's move grammar; the moves that reach Craigslist
// are valid and the streams hold the traces.
func TestTraceLlama(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(t, dir, 1).Rollout
	o.Env, o.Params = "craigslist", map[string]any{"structured_only": true, "rounds": 2}
	o.Trace, o.MaxTokens, o.Episodes = "tom", 400, 2 // room for two 160-character lines and the move
	o.Context = 4096
	rep, err := Rollout(context.Background(), o, filepath.Join(dir, "out"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Episodes != 2 || rep.Trajectories == 0 {
		t.Fatalf("report %+v", rep)
	}
	recs, err := engine.LoadRecords(nil, filepath.Join(dir, "out", runfiles.EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		for _, e := range rec.Events {
			if e.Kind == engine.KindAction && strings.Contains(e.Text, "INFER") {
				t.Errorf("a trace reached the engine: %q", e.Text)
			}
		}
	}
	f, err := os.Open(filepath.Join(dir, "out", runfiles.TrajectoriesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	trajs, err := selfplay.ReadTrajectories(f)
	if err != nil || len(trajs) == 0 {
		t.Fatalf("%d trajectories, %v", len(trajs), err)
	}
	// The tiny model's vocabulary is the scripted backend's default.
	tok, _ := scripted.New(scripted.Options{Rule: func(inference.Request) string { return "" }})
	for _, tr := range trajs {
		text, _ := tok.Detokenize(tr.Tokens)
		if !strings.Contains(text, "INFER: ") || !strings.Contains(text, "\nANTICIPATE: ") {
			t.Errorf("seat %d's stream holds no trace:\n%s", tr.Seat, text)
		}
	}
}

// TestRolloutReproducible: with several episodes in flight and
// simultaneous moves (Werewolf's votes and night actions), two rollouts of
// one seed write the same trajectories to the byte, logprobs included (the
// llama backend's deterministic schedule: selfplay/lanes.go).
func TestRolloutReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("plays Werewolf on the tiny model")
	}
	dir := t.TempDir()
	var got [2][]byte
	for k := range got {
		o := tinyOptions(t, dir, 1).Rollout
		o.Env, o.Params, o.Episodes, o.Parallel, o.MaxTokens = "werewolf", nil, 3, 3, 16
		o.Context = 4096
		out := filepath.Join(dir, fmt.Sprintf("out%d", k))
		rep, err := Rollout(context.Background(), o, out, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Episodes != 3 || rep.Trajectories == 0 {
			t.Fatalf("report %+v", rep)
		}
		if got[k], err = os.ReadFile(filepath.Join(out, runfiles.TrajectoriesFile)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Error("two rollouts of one seed wrote different trajectories")
	}
}
