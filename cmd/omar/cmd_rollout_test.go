package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/omar-selfplay/omar/envs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// withGame checks that g is in the catalogue the commands find games in.
func withGame(t *testing.T, g engine.Game) {
	t.Helper()
	if _, err := envs.Find(g.ID()); err != nil {
		t.Fatalf("%s is not in the catalogue: %v", g.ID(), err)
	}
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, args)
	return out.String(), errb.String(), code
}

func TestRolloutConfigStrict(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("env: sealedbid\nepisodes: 2\nepisdoes: 3\n"), 0o644)
	_, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", dir)
	if code == 0 || !strings.Contains(stderr, "line 3") || !strings.Contains(stderr, "episdoes") {
		t.Errorf("unknown key: got code %d, stderr %q; want an error naming line 3 and the key", code, stderr)
	}
}

func TestRolloutScripted(t *testing.T) {
	withGame(t, sealedbid.New())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("env: sealedbid\nepisodes: 2\nagents: {'*': scripted}\n"), 0o644)
	out := filepath.Join(dir, "traj")
	stdout, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", out, "--episodes", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "episodes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 3 {
		t.Errorf("episodes: got %d lines, want 3 (the flag overrides the config)", n)
	}
	if !strings.Contains(stdout, "3 episodes of sealedbid_v1") {
		t.Errorf("stdout %q", stdout)
	}
}

// TestRolloutLlama runs the tiny llama model on every seat and checks the
// written trajectories against the written episode records (decoded
// replies are the actions the engine received) and against a
// recomputation: the trainer's graph, whose logits equal llama_decode's,
// scores every stream in one pass, and its logprobs of the sampled tokens
// must equal the raw logprobs the backend reported while sampling.
func TestRolloutLlama(t *testing.T) {
	withGame(t, sealedbid.New())
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "traj")
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("env: sealedbid\nparams: {rounds: 1}\nmax_tokens: 8\ncontext: 1024\nkv_cache: f32\n"), 0o644)
	_, stderr, code := runCLI(t, "rollout", "--config", cfg, "--model", modelPath, "--episodes", "3", "--parallel", "3", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tf, err := os.Open(filepath.Join(out, "trajectories.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	trajs, err := selfplay.ReadTrajectories(tf)
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := os.ReadFile(filepath.Join(out, "episodes.jsonl"))
	var recs []engine.Record
	for line := range bytes.SplitSeq(bytes.TrimSpace(eb), []byte("\n")) {
		var r engine.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 3 || len(trajs) != 3*3 {
		t.Fatalf("got %d records and %d trajectories, want 3 and 9", len(recs), len(trajs))
	}
	if trajs[0].Generated() == 0 {
		t.Errorf("no generated tokens")
	}
	lo := llama.Options{}.Defaults()
	lo.Model, lo.Parallel, lo.Context = modelPath, 1, 64
	tok, err := llama.New(lo)
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	to := train.Options{}.Defaults()
	to.Threads = 1
	trainer, err := train.New(modelPath, to)
	if err != nil {
		t.Fatal(err)
	}
	defer trainer.Close()
	seqs := make([]train.Sequence, len(trajs))
	for i, tj := range trajs {
		seqs[i] = train.Sequence{Tokens: tj.Tokens, Mask: tj.Mask}
	}
	scores, err := trainer.EvaluatePolicy(context.Background(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, tj := range trajs {
		for k, on := range tj.Mask {
			if on {
				worst = max(worst, math.Abs(float64(tj.RawLogprobs[k]-scores[i].Logprobs[k])))
			}
		}
	}
	t.Logf("largest |raw logprob − trainer logprob| over generated tokens: %.2g", worst)
	if worst > 1e-3 {
		t.Errorf("behaviour raw logprobs differ from the recomputation by up to %g", worst)
	}
	for _, tr := range trajs {
		var acts []string
		for _, e := range recs[tr.Episode].Events {
			if e.Kind == engine.KindAction && e.Seat == tr.Seat {
				acts = append(acts, e.Text)
			}
		}
		if len(acts) != len(tr.TurnEnds) {
			t.Fatalf("episode %d seat %d: %d turns, %d actions", tr.Episode, tr.Seat, len(tr.TurnEnds), len(acts))
		}
		for k, span := range tr.TurnSpans() {
			reply := tr.Tokens[span[0] : span[1]+1]
			if tok.EOG(reply[len(reply)-1]) {
				reply = reply[:len(reply)-1]
			}
			if text, _ := tok.Detokenize(reply); text != acts[k] {
				t.Errorf("episode %d seat %d turn %d: reply decodes to %q, engine received %q", tr.Episode, tr.Seat, k, text, acts[k])
			}
			if !strings.HasPrefix(acts[k], "BID ") {
				t.Errorf("episode %d seat %d turn %d: action %q does not follow the grammar", tr.Episode, tr.Seat, k, acts[k])
			}
		}
	}
}

// TestRolloutJudge wires an LLM judge (the tiny model, on its own
// backend) into SOTOPIA episodes played by scripted agents, and refuses a
// judge for an environment that takes none.
func TestRolloutJudge(t *testing.T) {
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "traj")
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("env: sotopia\nepisodes: 1\nagents: {'*': scripted}\ncontext: 1024\njudge_context: 1024\njudge_model: "+modelPath+"\n"), 0o644)
	_, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(filepath.Join(out, "episodes.jsonl"))
	var rec struct {
		Outcome struct {
			Terms struct {
				Judge string `json:"judge"`
			} `json:"terms"`
		} `json:"outcome"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Outcome.Terms.Judge != "llama:tiny.gguf" {
		t.Errorf("judge: got %q, want llama:tiny.gguf", rec.Outcome.Terms.Judge)
	}

	withGame(t, sealedbid.New())
	os.WriteFile(cfg, []byte("env: sealedbid\nepisodes: 1\nagents: {'*': scripted}\njudge_model: "+modelPath+"\n"), 0o644)
	if _, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", out); code == 0 || !strings.Contains(stderr, "takes no judge") {
		t.Errorf("judge for sealedbid: got exit %d, stderr %q", code, stderr)
	}
}
