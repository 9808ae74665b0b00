package loop

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/sotopia"
)

// TestSelfplayPolicyJudgeIsFrozen: when the policy is trained, policy:
// true loads the policy's model file on a backend of its own (without the
// adapter), so the judge never grades with the weights being updated.
func TestSelfplayPolicyJudgeIsFrozen(t *testing.T) {
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Arch: "llama", Preset: "tiny", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name        string
		train       bool
		wantLabel   string
		wantClosers int
	}{
		{"rollout shares the policy backend", false, "policy:tiny.gguf", 1},
		{"selfplay loads its own", true, "policy-base:tiny.gguf", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := RolloutOptions{}.Defaults()
			c.Env, c.Model, c.Parallel, c.Context, c.LlamaLib = "sotopia", modelPath, 1, 1024, llamatest.LibDir()
			c.Judge = &JudgeOptions{Policy: true, Context: 1024}
			p, err := OpenPlayers(&c, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			g, err := AttachJudge(sotopia.New(), &c, p, tt.train)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.closers) != tt.wantClosers {
				t.Errorf("got %d backends, want %d", len(p.closers), tt.wantClosers)
			}
			cast, _ := engine.ScriptedCast(g, nil, 1)
			rec, err := engine.Play(context.Background(), g, 1, engine.Params{"max_turns": 2}, cast, engine.DefaultOptions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Outcome.Terms.(sotopia.Terms).Judge; got != tt.wantLabel {
				t.Errorf("got judge %q, want %q", got, tt.wantLabel)
			}
		})
	}
}
