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
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/sotopia"
)

func TestJudgeNeedsModel(t *testing.T) {
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb}
	if err := runJudge(context.Background(), env, []string{"x.jsonl"}); !errors.Is(err, errUsage) {
		t.Errorf("got %v, want a usage error", err)
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
	recs, err := readRecords([]string{path})
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
	sum, err := rejudgeAll(context.Background(), j, recs, 2, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.judged != 2 || sum.skipped != 1 || sum.reward[0] != 2 || sum.reward[1] != 2*0.6 {
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
	cfg := llamatest.Tiny()
	cfg.Ctx = 8192
	model := filepath.Join(dir, "tiny.gguf")
	if err := llamatest.WriteModel(model, cfg); err != nil {
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
	err := runJudge(context.Background(), env, []string{"--model", model, "--llama-lib", lib, "--threads", "1",
		"--context", "6144", "--reasoning-chars", "12", "--retries", "0", "-o", out, in})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "judged 2 of 2 episodes (0 invalid") {
		t.Errorf("got summary %q, want 2 of 2 judged", stderr.String())
	}
	recs, err := readRecords([]string{out})
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
