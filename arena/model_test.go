package arena

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/players"
)

// tinyFiles writes two tiny models and a random LoRA for the first.
func tinyFiles(t *testing.T) (base, other, adapter string) {
	t.Helper()
	dir := t.TempDir()
	base, other, adapter = filepath.Join(dir, "base.gguf"), filepath.Join(dir, "other.gguf"), filepath.Join(dir, "lora.gguf")
	if err := model.WriteFile(base, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := model.WriteFile(other, model.Options{Seed: 2}); err != nil {
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
	if err := gguf.WriteLoRA(adapter, l); err != nil {
		t.Fatal(err)
	}
	return base, other, adapter
}

func modelOptions() Options {
	o := Options{}.Defaults()
	o.Envs = []Env{{Name: "craigslist", Params: engine.Params{"rounds": 3, "structured_only": true}}}
	o.Episodes = 6
	o.Parallel = 6
	o.MaxTokens, o.Context, o.MinReplyTokens = 24, 1024, 8
	o.Bootstrap = 200
	o.MaxRetries = 1
	return o
}

func openTiny(t *testing.T, o Options, base, other, adapter string) *players.Lineup {
	t.Helper()
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	// F32 keys and values: what else a step decodes moves the logits by
	// about 1e-6 only, which has not flipped a token of these short
	// replies at either parallelism TestModelPlayers compares (two
	// backends, so no deterministic schedule; docs/evaluation.md).
	be := players.Backend{LlamaLib: lib, Threads: 1, KVCache: "f32"}
	slots, err := o.SeqSlots()
	if err != nil {
		t.Fatal(err)
	}
	ps := []players.Spec{{Kind: players.KindBase}, {Kind: players.KindAdapter, Arg: adapter}, {Kind: players.KindModel, Arg: other}}
	l, err := players.Open(context.Background(), ps, []players.Spec{{Kind: players.KindScripted, Arg: "naive"}, {Kind: players.KindBase}},
		players.OpenOptions{Backend: be, Model: base, Slots: slots, Context: o.Context})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestModelPlayers: base, an adapter on it and another model play on two
// backends (the base and its adapter share one, decoded together), the
// base also as an opponent; the same seed gives the same report at another
// parallelism.
func TestModelPlayers(t *testing.T) {
	base, other, adapter := tinyFiles(t)
	o := modelOptions()
	l := openTiny(t, o, base, other, adapter)
	if len(l.Llama) != 2 {
		t.Fatalf("%d llama backends, want 2 (base+adapter, other)", len(l.Llama))
	}
	if l.Opponents[1].Model != l.Players[0].Model {
		t.Errorf("base as player and as opponent are two players")
	}
	rep, err := Evaluate(context.Background(), o, "", l.Players, l.Opponents, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(base)
	shared := l.Llama[abs]
	st := shared.Stats()
	if shared.AdapterSwitches() == 0 {
		t.Errorf("the base and the adapter never shared a step (0 adapter switches)")
	}
	if perStep := float64(st.GeneratedTokens) / float64(st.Steps); perStep < 1.5 {
		t.Errorf("%.2f sequences sampled per decode step, want the pairings' seats batched (> 1.5)", perStep)
	}
	if len(rep.Cells) != 2*3*2 {
		t.Errorf("%d cells, want 12 (2 sides × 3 players × 2 opponents)", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Reward.N != o.Episodes {
			t.Errorf("%s %s %s vs %s: %d episodes, want %d", c.Env, c.Side, c.Player, c.Opponent, c.Reward.N, o.Episodes)
		}
	}
	for _, d := range rep.Differences {
		if d.Env == "" && d.Diff.N == 0 {
			t.Errorf("%s − %s: no paired episodes", d.Player, d.Than)
		}
	}
	if rep.Transfer == nil || len(rep.Transfer.Rows) != 1 || !strings.HasPrefix(rep.Transfer.Rows[0].Player, "adapter:") {
		t.Errorf("transfer rows %+v, want the adapter", rep.Transfer)
	}
	t.Logf("shared backend: %d steps, %.2f sequences per step, %d adapter switches", st.Steps, float64(st.GeneratedTokens)/float64(st.Steps), shared.AdapterSwitches())

	o2 := o
	o2.Parallel = 2
	l2 := openTiny(t, o2, base, other, adapter)
	rep2, err := Evaluate(context.Background(), o2, "", l2.Players, l2.Opponents, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(rep2)
	if !bytes.Equal(a, b) {
		t.Errorf("parallel 6 and 2 gave different reports")
	}
}

// walkAway is an Ollama model that walks away from every negotiation; a
// conversation that does not open with the system briefing is a reply the
// test would not accept.
func walkAway(c ollamatest.Call) ollamatest.Reply {
	if len(c.Messages) == 0 || c.Messages[0].Role != "system" {
		return ollamatest.Reply{Content: "no system briefing"}
	}
	return ollamatest.Reply{Content: "WALK"}
}

// TestOllamaPlayer: an ollama: player plays its seats at the message level,
// against ollamatest's protocol-faithful server, at most Slots requests at
// a time.
func TestOllamaPlayer(t *testing.T) {
	srv := ollamatest.New(t, ollamatest.Options{Models: []ollamatest.Model{{Name: "fake:1b"}}, Reply: walkAway})
	o := scriptedOptions(4, Env{Name: "craigslist"})
	l, err := players.Open(context.Background(), []players.Spec{{Kind: players.KindOllama, Arg: "fake:1b"}}, []players.Spec{{Kind: players.KindScripted, Arg: "naive"}},
		players.OpenOptions{Backend: players.Backend{OllamaHost: srv.URL}, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep := evaluate(t, o, "", l.Players, l.Opponents)
	for _, c := range rep.Cells {
		if c.Results["walk_away"] != 1 || c.Reward.Mean != 0 || c.InvalidRate != 0 {
			t.Errorf("%s: results %v, reward %v, invalid %v; want every episode walked away from", c.Side, c.Results, c.Reward, c.InvalidRate)
		}
	}
	if n, m := len(srv.ChatRequests()), srv.MaxInFlight(); n == 0 || m > 4 {
		t.Errorf("%d requests, %d at once; want some, at most 4 (Slots)", n, m)
	}
	// A model that is not pulled fails the evaluation, saying what to do.
	l2, err := players.Open(context.Background(), []players.Spec{{Kind: players.KindOllama, Arg: "absent:1b"}}, []players.Spec{{Kind: players.KindScripted, Arg: "naive"}},
		players.OpenOptions{Backend: players.Backend{OllamaHost: srv.URL}, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := Evaluate(context.Background(), o, "", l2.Players, l2.Opponents, Hooks{}); err == nil || !strings.Contains(err.Error(), "ollama pull absent:1b") {
		t.Errorf("model not pulled: got %v, want an error saying ollama pull absent:1b", err)
	}
	if _, err := players.Open(context.Background(), []players.Spec{{Kind: players.KindBase}}, []players.Spec{{Kind: players.KindScripted, Arg: "naive"}}, players.OpenOptions{}); err == nil {
		t.Errorf("base without a model file: got no error")
	}
}

// TestImportModel: what an adapter played alone, imported as a player that
// plays beside the base weights, is what that player plays when the
// evaluation is run in full (other sequences in its decode batches).
func TestImportModel(t *testing.T) {
	base, other, adapter := tinyFiles(t)
	o := modelOptions()
	o.Episodes = 3
	l := openTiny(t, o, base, other, adapter)
	naive := l.Opponents[:1]
	policy, trained := l.Players[1], l.Players[1]
	policy.Name, trained.Name = "policy", "trained"
	both := []Player{l.Players[0], trained}

	src, dst := t.TempDir(), t.TempDir()
	if _, err := Evaluate(context.Background(), o, src, []Player{policy}, naive, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if n, err := Import(dst, src, o, "policy", trained); err != nil || n != 2*o.Episodes {
		t.Fatalf("imported %d, err %v; want %d", n, err, 2*o.Episodes)
	}
	got, err := Evaluate(context.Background(), o, dst, both, naive, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Evaluate(context.Background(), o, "", both, naive, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if !bytes.Equal(a, b) {
		t.Errorf("the report with the imported episodes differs from the one played in full")
	}
}
