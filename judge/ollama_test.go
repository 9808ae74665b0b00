package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/judge/judgetest"
	"github.com/omar-selfplay/omar/sotopia"
)

// TestOllamaJudge plays SOTOPIA episodes judged through the ollama backend
// against a fake server: every request carries its pass's JSON schema as
// the format and thinking off, and a model that first runs out of tokens
// before its JSON begins costs one retry per judgement, not the judgement.
// The server is ollamatest's, so every reply honours the protocol (a
// schema-valid complete reply, done_reason length when cut).
func TestOllamaJudge(t *testing.T) {
	for _, tt := range []struct {
		name         string
		garbageFirst bool
		wantAttempts int
	}{
		{"valid replies", false, 1},
		{"garbage first", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := judgetest.NewOllama(t, tt.garbageFirst)
			c, b, err := NewOllama(ollama.Options{Host: srv.URL, Model: srv.Model})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			o := sotopia.JudgeOptions{}.Defaults()
			o.Label, o.Extra, o.Process = "ollama:"+srv.Model, true, true
			j, err := sotopia.NewJudge(c, o)
			if err != nil {
				t.Fatal(err)
			}
			g := sotopia.New().WithJudge(j)
			cast, _ := engine.ScriptedCast(g, nil, 3)
			rec, err := engine.Play(context.Background(), g, 3, engine.Params{"max_turns": 3}, cast, engine.DefaultOptions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			tm := rec.Outcome.Terms.(sotopia.Terms)
			if rec.Outcome.Result != "judged" || tm.Evaluation.Attempts != tt.wantAttempts || tm.Extra == nil || tm.Extra.Attempts != tt.wantAttempts {
				t.Fatalf("got result %q (%s), evaluation %+v, extra %+v; want judged in %d attempts", rec.Outcome.Result, tm.JudgeError, tm.Evaluation, tm.Extra, tt.wantAttempts)
			}
			// The fake scores every dimension at its maximum: reward 1.
			for s, r := range rec.Outcome.Rewards {
				if r != 1 {
					t.Errorf("seat %d: got reward %v, want 1", s, r)
				}
			}
			if len(tm.Process) != len(tm.Turns) {
				t.Fatalf("got %d process turns, want %d", len(tm.Process), len(tm.Turns))
			}
			for _, p := range tm.Process {
				if !p.Valid || p.Attempts != tt.wantAttempts || p.Stage != "late" {
					t.Errorf("turn %d: got %+v, want valid late in %d attempts", p.Turn, p, tt.wantAttempts)
				}
				// The fake proposes weight 1 (the schema's maximum) for every
				// dimension: equal weights, no fallback.
				for _, w := range p.Weights {
					if p.Fallback || len(p.Weights) != len(sotopia.ProcessDimensions) || math.Abs(w-1.0/6) > 1e-12 {
						t.Errorf("turn %d: got weights %v (fallback %v), want 1/6 each", p.Turn, p.Weights, p.Fallback)
						break
					}
				}
			}
			if rec.Outcome.Metrics["process_fallbacks"] != 0 {
				t.Errorf("got process_fallbacks %v, want 0", rec.Outcome.Metrics["process_fallbacks"])
			}
			reqs := srv.Requests()
			if want := tt.wantAttempts * (2 + len(tm.Turns)); len(reqs) != want {
				t.Errorf("got %d requests, want %d", len(reqs), want)
			}
			schemas := map[string]bool{
				string(sotopia.ScoreSchema(sotopia.EvalDimensions, o.ReasoningChars)):  false,
				string(sotopia.ScoreSchema(sotopia.ExtraDimensions, o.ReasoningChars)): false,
				string(sotopia.ProcessSchema(o.ReasoningChars)):                        false,
			}
			for i, r := range reqs {
				if _, ok := schemas[string(r.Format)]; !ok {
					t.Fatalf("request %d: got format %.80s…, want one of the judge's schemas", i, r.Format)
				}
				schemas[string(r.Format)] = true
				if r.Think == nil || r.Think.Bool() {
					t.Errorf("request %d: got think %v, want false", i, r.Think)
				}
				if r.Options["temperature"] != float64(0) {
					t.Errorf("request %d: got temperature %v, want 0", i, r.Options["temperature"])
				}
			}
			for s, used := range schemas {
				if !used {
					t.Errorf("schema %.60s… never sent", s)
				}
			}
		})
	}
}

func TestOllamaJudgeFailures(t *testing.T) {
	srv := judgetest.NewOllama(t, false)
	h := sotopia.History{Setup: sotopia.Setup{Characters: [2]sotopia.Character{{Name: "A"}, {Name: "B"}},
		Scenario: sotopia.Scenario{Agents: []sotopia.AgentSpec{{}, {}}}}}
	t.Run("unknown model fails the judge", func(t *testing.T) {
		c, _, err := NewOllama(ollama.Options{Host: srv.URL, Model: "nope:1b"})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := sotopia.NewJudge(c, sotopia.JudgeOptions{}.Defaults())
		_, err = j.Evaluate(context.Background(), h)
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("got %v, want the server's not-found error", err)
		}
	})
	t.Run("thinking on spends the budget", func(t *testing.T) {
		on := true
		c, _, err := NewOllama(ollama.Options{Host: srv.URL, Model: srv.Model, Think: &on})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := sotopia.NewJudge(c, sotopia.JudgeOptions{}.Defaults())
		_, err = j.Evaluate(context.Background(), h)
		if !errors.Is(err, sotopia.ErrInvalidJudgement) {
			t.Errorf("got %v, want an invalid judgement: the model thought until num_predict", err)
		}
	})
	t.Run("format only for the judge's own requests", func(t *testing.T) {
		c, _, err := NewOllama(ollama.Options{Host: srv.URL, Model: srv.Model})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := sotopia.NewJudge(c, sotopia.JudgeOptions{}.Defaults())
		comp := j.EvalCompletion(h)
		req, err := c.Request(comp)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Format(req); !bytes.Equal(got, comp.Schema) || !json.Valid(got) {
			t.Errorf("got format %.60s…, want the completion's schema", got)
		}
		if got := c.Format(inference.Request{Grammar: "root ::= \"x\""}); got != nil {
			t.Errorf("got format %s for a foreign grammar, want none", got)
		}
	})
}
