package judge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/sotopia"
)

// TestTinyModelJudgeAlwaysValid runs every judge pass with a tiny
// random-weight model through the llama backend's grammar sampler: the
// content is noise, but every reply must parse and be in range on the
// first attempt (no retries allowed).
func TestTinyModelJudgeAlwaysValid(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	if testing.Short() {
		t.Skip("decodes a few thousand tokens")
	}
	modelPath := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Arch: "llama", Preset: "tiny", Seed: 1, ContextLength: 8192}); err != nil {
		t.Fatal(err)
	}
	o := llama.Options{}.Defaults()
	o.LibDir, o.Model = lib, modelPath
	o.Parallel, o.Context = 4, 6144
	// One thread: ggml's worker threads spin-wait, and on a busy 2-core
	// machine two of them make decoding more than ten times slower.
	o.Threads, o.ThreadsBatch = 1, 1
	b, err := llama.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	jo := sotopia.JudgeOptions{}.Defaults()
	jo.Label = "llama:tiny"
	jo.Retries = 0
	jo.ReasoningChars = envInt("SOTOPIA_TINY_REASONING", 12)
	jo.Temperature = 1 // varied noise exercises more of the grammar than greedy decoding
	jo.Extra, jo.Process = true, true
	j, err := NewJudge(b, jo)
	if err != nil {
		t.Fatal(err)
	}
	// SOTOPIA_TINY_EPISODES=N measures a bigger sample (see docs/sotopia.md).
	episodes := envInt("SOTOPIA_TINY_EPISODES", 3)
	// The seats are played by the same tiny model under the move grammar,
	// so the transcripts are noise too, and every move must parse.
	player := func(seat engine.Seat) (engine.Agent, string, error) {
		return engine.AgentFunc(func(ctx context.Context, tn engine.Turn) (engine.Action, error) {
			var view strings.Builder
			for _, e := range tn.View[1:] {
				view.WriteString(e.Text + "\n")
			}
			msgs := []inference.Message{{Role: "system", Content: tn.View[0].Text}, {Role: "user", Content: view.String()}}
			text, err := b.ChatTemplate(msgs, true)
			// The view holds this seat's own raw replies, which may be
			// invalid UTF-8; llama.cpp's tokenizer aborts on those.
			text = strings.ToValidUTF8(text, "\uFFFD")
			if err != nil {
				return engine.Action{}, err
			}
			ids, err := b.Tokenize(text, true, true)
			if err != nil {
				return engine.Action{}, err
			}
			resp, err := b.Generate(ctx, []inference.Request{{
				Key: fmt.Sprintf("seat/%s/%d", seat.Name, len(tn.View)), Prompt: ids, MaxTokens: len("non-verbal: ") + 4*40, // the grammar's bound in bytes
				Grammar: tn.Notification.Grammar, Sampling: inference.Sampling{Temperature: 1, Seed: uint64(len(tn.View))},
			}})
			if err != nil {
				return engine.Action{}, err
			}
			return engine.Action{NotificationID: tn.Notification.ID, Text: resp[0].Text}, nil
		}), "llama:tiny", nil
	}
	recs := make([]*engine.Record, episodes)
	errs := make([]error, episodes)
	var wg sync.WaitGroup
	for i := range episodes {
		wg.Go(func() {
			g := sotopia.New().WithJudge(j)
			recs[i], errs[i] = engine.Play(context.Background(), g, uint64(100+i), engine.Params{"max_turns": 2, "max_chars": 40}, player, engine.DefaultOptions(), nil)
		})
	}
	wg.Wait()
	completions, valid := 0, 0
	for i, rec := range recs {
		if errs[i] != nil {
			t.Fatalf("episode %d: %v", i, errs[i])
		}
		tm := rec.Outcome.Terms.(sotopia.Terms)
		for _, e := range rec.Events {
			if e.Kind == engine.KindValidationError {
				t.Errorf("episode %d: a grammar-constrained move was rejected: %s (reply %q)", i, e.Text, rec.Events[e.Seq-2].Text)
			}
		}
		completions += 2
		if rec.Outcome.Result == "judged" && tm.Evaluation.Attempts == 1 {
			valid++
		} else {
			t.Errorf("episode %d: result %q, judge error %q", i, rec.Outcome.Result, tm.JudgeError)
		}
		if tm.Extra != nil && tm.Extra.Attempts == 1 {
			valid++
		} else {
			t.Errorf("episode %d: extra metrics invalid", i)
		}
		for _, p := range tm.Process {
			completions++
			if p.Valid && p.Attempts == 1 {
				valid++
			} else {
				t.Errorf("episode %d turn %d: process judgement invalid", i, p.Turn)
			}
		}
		for s, r := range rec.Outcome.Rewards {
			if r < 0 || r > 1 {
				t.Errorf("episode %d seat %d: reward %v outside [0,1]", i, s, r)
			}
		}
	}
	t.Logf("%d of %d tiny-model judge completions valid on the first attempt", valid, completions)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
