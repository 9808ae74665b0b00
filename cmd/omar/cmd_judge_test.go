package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/judge"
	"github.com/omar-selfplay/omar/judge/judgetest"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/sotopia"
)

func TestJudgeNeedsOneBackend(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"none", []string{"x.jsonl"}},
		{"two", []string{"--model", "j.gguf", "--ollama-model", "qwen3:4b", "x.jsonl"}},
		{"server without model", []string{"--ollama", "http://127.0.0.1:11434", "x.jsonl"}},
		{"no episodes", []string{"--ollama-model", "qwen3:4b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb}
			if err := runJudge(context.Background(), env, tt.args); !errors.Is(err, cliflag.ErrUsage) {
				t.Errorf("got %v, want a usage error", err)
			}
		})
	}
}

// writeEpisodes plays n short scripted SOTOPIA episodes into a JSONL file.
func writeEpisodes(t *testing.T, dir string, n int) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for seed := range uint64(n) {
		cast, _ := engine.ScriptedCast(sotopia.New(), nil, seed)
		rec, err := engine.Play(context.Background(), sotopia.New(), seed, engine.Params{"max_turns": 3}, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		enc.Encode(rec)
	}
	path := filepath.Join(dir, "eps.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// judgedTerms are the parts of a judged record's terms the tests read.
type judgedTerms struct {
	Judge      string `json:"judge"`
	Evaluation struct {
		Attempts int `json:"attempts"`
	} `json:"evaluation"`
	Process []struct {
		Valid    bool `json:"valid"`
		Attempts int  `json:"attempts"`
	} `json:"process"`
}

func readJudged(t *testing.T, path string) []judgedTerms {
	t.Helper()
	recs, err := engine.LoadRecords(nil, path)
	if err != nil {
		t.Fatal(err)
	}
	var out []judgedTerms
	for _, r := range recs {
		if r.Outcome.Result != "judged" {
			t.Errorf("seed %d: got result %q, want judged", r.Seed, r.Outcome.Result)
		}
		b, _ := json.Marshal(r.Outcome.Terms)
		var jt judgedTerms
		if err := json.Unmarshal(b, &jt); err != nil {
			t.Fatal(err)
		}
		out = append(out, jt)
	}
	return out
}

// TestJudgeCommandOllama runs omar judge end to end against a fake Ollama
// server, once with valid replies and once with a model that ignores its
// format on the first try (every judgement then takes a retry).
func TestJudgeCommandOllama(t *testing.T) {
	for _, tt := range []struct {
		name         string
		garbageFirst bool
		wantAttempts int
	}{
		{"valid", false, 1},
		{"garbage first", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := judgetest.NewOllama(t, tt.garbageFirst)
			dir := t.TempDir()
			in, out := writeEpisodes(t, dir, 2), filepath.Join(dir, "judged.jsonl")
			_, stderr, code := runCLI(t, "judge", "--ollama", srv.URL, "--ollama-model", srv.Model, "--process", "-o", out, in)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, "judged 2 of 2 episodes (0 invalid") || !strings.Contains(stderr, "mean reward 1.000 / 1.000") {
				t.Errorf("got summary %q, want 2 of 2 judged with reward 1", stderr)
			}
			for i, jt := range readJudged(t, out) {
				if jt.Judge != "ollama:"+srv.Model || jt.Evaluation.Attempts != tt.wantAttempts || len(jt.Process) == 0 {
					t.Errorf("episode %d: got %+v, want judge ollama:%s in %d attempts with process rewards", i, jt, srv.Model, tt.wantAttempts)
				}
				for _, p := range jt.Process {
					if !p.Valid || p.Attempts != tt.wantAttempts {
						t.Errorf("episode %d: got process turn %+v", i, p)
					}
				}
			}
		})
	}
	t.Run("OLLAMA_HOST", func(t *testing.T) {
		srv := judgetest.NewOllama(t, false)
		t.Setenv("OLLAMA_HOST", strings.TrimPrefix(srv.URL, "http://"))
		dir := t.TempDir()
		in := writeEpisodes(t, dir, 1)
		if _, stderr, code := runCLI(t, "judge", "--ollama-model", srv.Model, "-o", filepath.Join(dir, "o.jsonl"), in); code != 0 || !strings.Contains(stderr, "judged 1 of 1") {
			t.Errorf("got exit %d, stderr %q; want 1 judged through OLLAMA_HOST", code, stderr)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		srv := judgetest.NewOllama(t, false)
		in := writeEpisodes(t, t.TempDir(), 1)
		if _, stderr, code := runCLI(t, "judge", "--ollama", srv.URL, "--ollama-model", "nope:1b", in); code == 0 || !strings.Contains(stderr, "not found") {
			t.Errorf("got exit %d, stderr %q; want the server's not-found error", code, stderr)
		}
	})
}

// TestRolloutJudgeConfig checks the judge section of a rollout config: an
// Ollama judge scores the episodes, and conflicting or incomplete
// sections are refused before anything runs.
func TestRolloutJudgeConfig(t *testing.T) {
	srv := judgetest.NewOllama(t, true)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	base := "env: sotopia\nepisodes: 2\nparams: {max_turns: 3}\nagents: {'*': scripted}\n"
	os.WriteFile(cfg, []byte(base+"judge: {ollama: "+srv.URL+", ollama_model: "+srv.Model+", process: true}\n"), 0o644)
	out := filepath.Join(dir, "traj")
	if _, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	terms := readJudged(t, filepath.Join(out, "episodes.jsonl"))
	if len(terms) != 2 {
		t.Fatalf("got %d episodes, want 2", len(terms))
	}
	for i, jt := range terms {
		if jt.Judge != "ollama:"+srv.Model || jt.Evaluation.Attempts != 2 || len(jt.Process) == 0 {
			t.Errorf("episode %d: got %+v, want the Ollama judge after one retry, with process rewards", i, jt)
		}
	}

	for _, tt := range []struct {
		name, judge, want string
	}{
		{"two backends", "judge: {model: j.gguf, ollama_model: qwen3:4b}", "exactly one backend"},
		{"no backend", "judge: {process: true}", "exactly one backend"},
		{"server without model", "judge: {ollama: http://127.0.0.1:11434}", "needs ollama_model"},
		{"old and new spelling", "judge_model: j.gguf\njudge: {model: j.gguf}", "older spelling"},
		{"policy without a model", "judge: {policy: true}", "needs a policy model"},
		{"unknown key", "judge: {ollama_modle: qwen3:4b}", "ollama_modle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.WriteFile(cfg, []byte(base+tt.judge+"\n"), 0o644)
			if _, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", filepath.Join(dir, "bad")); code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want an error with %q", code, stderr, tt.want)
			}
		})
	}
}

// TestRolloutPolicyJudge: policy: true judges with the policy's own
// backend in a rollout.
func TestRolloutPolicyJudge(t *testing.T) {
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Arch: "llama", Preset: "tiny", Seed: 1, ContextLength: 8192}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	// The judge shares the policy's sequences, so they must hold its
	// prompt: context 6144.
	os.WriteFile(cfg, []byte("env: sotopia\nepisodes: 1\nparallel: 1\nparams: {max_turns: 2, max_chars: 40}\nmodel: "+modelPath+"\nagents: {'*': scripted}\ncontext: 6144\njudge: {policy: true}\n"), 0o644)
	out := filepath.Join(dir, "traj")
	if _, stderr, code := runCLI(t, "rollout", "--config", cfg, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs, err := engine.LoadRecords(nil, filepath.Join(out, "episodes.jsonl"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
	terms := recs[0].Outcome.Terms.(map[string]any)
	if recs[0].Outcome.Result != "judged" || terms["judge"] != "policy:tiny.gguf" {
		t.Errorf("got result %q (%v) by judge %v, want judged by policy:tiny.gguf", recs[0].Outcome.Result, terms["judge_error"], terms["judge"])
	}
}

func TestRejudgeAll(t *testing.T) {
	// Two sotopia episodes and one of another environment, as JSONL.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for seed := range uint64(2) {
		cast, _ := engine.ScriptedCast(sotopia.New(), nil, seed)
		rec, err := engine.Play(context.Background(), sotopia.New(), seed, engine.Params{"max_turns": 4}, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		enc.Encode(rec)
		if seed == 0 {
			other := *rec
			other.Env = "other_v1"
			enc.Encode(&other)
		}
	}
	path := filepath.Join(t.TempDir(), "eps.jsonl")
	os.WriteFile(path, buf.Bytes(), 0o644)
	recs, err := engine.LoadRecords(nil, path)
	if err != nil || len(recs) != 3 {
		t.Fatalf("got %d records, %v; want 3", len(recs), err)
	}
	// The fake judge gives agent_1 goal 10 and agent_2 goal 0, every other
	// dimension its best score.
	reply := func() string {
		var b strings.Builder
		b.WriteString("{")
		for a := range 2 {
			if a > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"agent_` + string(rune('1'+a)) + `":{`)
			for i, d := range sotopia.EvalDimensions {
				if i > 0 {
					b.WriteString(",")
				}
				s := d.Hi
				if d.Key == "goal" && a == 1 {
					s = 0
				}
				b.WriteString(`"` + d.Key + `":{"reasoning":"r","score":` + itoa(s) + `}`)
			}
			b.WriteString("}")
		}
		return b.String() + "}"
	}()
	j, _ := sotopia.NewJudge(sotopia.CompleterFunc(func(context.Context, sotopia.Completion) (string, error) { return reply, nil }), sotopia.JudgeOptions{}.Defaults())
	var out bytes.Buffer
	sum, err := judge.Rescore(context.Background(), j, recs, 2, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Judged != 2 || sum.Skipped != 1 || sum.Reward[0] != 2 || sum.Reward[1] != 2*0.6 {
		t.Errorf("got summary %+v (%s)", sum, sum)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], `"env":"other_v1"`) || !strings.Contains(lines[2], `"result":"judged"`) {
		t.Errorf("got %d lines, want 3 in input order with the new outcomes", len(lines))
	}
}

func itoa(v int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestJudgeCommandTinyModel runs omar judge end to end with the tiny
// random-weight model: every episode must come back judged.
func TestJudgeCommandTinyModel(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteFile(modelPath, model.Options{Arch: "llama", Preset: "tiny", Seed: 1, ContextLength: 8192}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for seed := range uint64(2) {
		cast, _ := engine.ScriptedCast(sotopia.New(), nil, seed)
		rec, err := engine.Play(context.Background(), sotopia.New(), seed, engine.Params{"max_turns": 2}, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		enc.Encode(rec)
	}
	in, out := filepath.Join(dir, "eps.jsonl"), filepath.Join(dir, "judged.jsonl")
	os.WriteFile(in, buf.Bytes(), 0o644)
	var stdout, stderr bytes.Buffer
	env := &cliEnv{stdout: &stdout, stderr: &stderr}
	err := runJudge(context.Background(), env, []string{"--model", modelPath, "--llama-lib", lib, "--threads", "1",
		"--context", "6144", "--reasoning-chars", "12", "--retries", "0", "-o", out, in})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "judged 2 of 2 episodes (0 invalid") {
		t.Errorf("got summary %q, want 2 of 2 judged", stderr.String())
	}
	recs, err := engine.LoadRecords(nil, out)
	if err != nil || len(recs) != 2 {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		terms := r.Outcome.Terms.(map[string]any)
		if r.Outcome.Result != "judged" || terms["judge"] != "llama:tiny.gguf" {
			t.Errorf("got result %q judge %v", r.Outcome.Result, terms["judge"])
		}
	}
}

// TestJudgeContext: the judge's default context shrinks to the judge
// model's training context.
func TestJudgeContext(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.gguf")
	if err := model.WriteFile(short, model.Options{Arch: "llama", Preset: "tiny", Seed: 1, ContextLength: 1024}); err != nil {
		t.Fatal(err)
	}
	if got := model.TrainingContext(short); got != 1024 {
		t.Errorf("trainingContext = %d, want 1024", got)
	}
	if got := model.TrainingContext(filepath.Join(dir, "missing.gguf")); got != 0 {
		t.Errorf("trainingContext of a missing file = %d, want 0", got)
	}
}
