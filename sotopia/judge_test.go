package sotopia

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
)

// scoreJSON writes a valid score reply with every dimension of agent i
// scored by f.
func scoreJSON(dims []Dimension, f func(agent int, d Dimension) int) string {
	var b strings.Builder
	b.WriteString("{")
	for a := range 2 {
		if a > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"agent_%d":{`, a+1)
		for i, d := range dims {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"%s":{"reasoning":"because \"%s\"","score":%d}`, d.Key, d.Key, f(a, d))
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return b.String()
}

func TestParseScores(t *testing.T) {
	hi := scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Hi })
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"all high", hi, ""},
		{"all low", scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Lo }), ""},
		{"above range", strings.Replace(hi, `"goal":{"reasoning":"because \"goal\"","score":10}`, `"goal":{"reasoning":"x","score":11}`, 1), "outside 0..10"},
		{"below range", scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Lo - 1 }), "outside"},
		{"fraction", strings.Replace(hi, `"score":10}`, `"score":9.5}`, 1), "cannot unmarshal"},
		{"unknown key", strings.Replace(hi, `"score":10}`, `"score":10,"x":1}`, 1), "unknown field"},
		{"missing reasoning", strings.Replace(hi, `"reasoning":"because \"goal\"",`, ``, 1), "want reasoning and score"},
		{"missing agent", `{"agent_1":{}}`, "1 agents"},
		{"wrong agent", strings.Replace(hi, "agent_2", "agent_3", 1), "missing agent_2"},
		{"trailing text", hi + " ok", "text after"},
		{"not json", "scores: 10", "not a JSON object"},
		{"missing dimension", strings.Replace(hi, `"goal"`, `"goals"`, 1), "missing goal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseScores(tt.in, EvalDimensions)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got[1]["goal"].Reasoning != `because "goal"` {
				t.Errorf("got reasoning %q, want %q", got[1]["goal"].Reasoning, `because "goal"`)
			}
		})
	}
}

// FuzzParseScores: the parser never panics, and whatever it accepts is
// complete and in range.
func FuzzParseScores(f *testing.F) {
	f.Add(scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Hi }))
	f.Add(scoreJSON(EvalDimensions, func(a int, d Dimension) int { return d.Lo + a }))
	f.Add(`{"agent_1":{},"agent_2":{}}`)
	f.Add(`{"agent_1":{"goal":{"reasoning":"","score":-0}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseScores(s, EvalDimensions)
		if err != nil {
			return
		}
		for a := range 2 {
			if len(got[a]) != len(EvalDimensions) {
				t.Fatalf("agent %d has %d scores", a, len(got[a]))
			}
			for _, d := range EvalDimensions {
				if v := got[a][d.Key].Score; v < d.Lo || v > d.Hi {
					t.Fatalf("agent %d %s = %d outside %d..%d", a, d.Key, v, d.Lo, d.Hi)
				}
			}
			if r := got[a].Reward(DefaultWeights()); r < 0 || r > 1 || math.IsNaN(r) {
				t.Fatalf("reward %v outside [0,1]", r)
			}
		}
	})
}

// processJSON writes a process reply without weights, as the fixed
// ablation's grammar asks.
func processJSON(stage string, pass func(d, i int) bool, n int) string {
	return processJSONWeights(stage, "", pass, n)
}

// processJSONWeights writes a process reply whose "weights" is the JSON
// text weights (none when empty).
func processJSONWeights(stage, weights string, pass func(d, i int) bool, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"stage":%q`, stage)
	if weights != "" {
		fmt.Fprintf(&b, `,"weights":%s`, weights)
	}
	for d, dim := range ProcessDimensions {
		fmt.Fprintf(&b, `,%q:[`, dim.Key)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"criterion":"c%d","pass":%v}`, i, pass(d, i))
		}
		b.WriteString("]")
	}
	b.WriteString("}")
	return b.String()
}

func TestParseProcess(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"two criteria", processJSON("early", func(d, i int) bool { return i == 0 }, 2), ""},
		{"four criteria", processJSON("late", func(d, i int) bool { return true }, 4), ""},
		{"one criterion", processJSON("mid", func(d, i int) bool { return true }, 1), "want 2..4"},
		{"five criteria", processJSON("mid", func(d, i int) bool { return true }, 5), "want 2..4"},
		{"bad stage", processJSON("middle", func(d, i int) bool { return true }, 2), "stage must be"},
		{"pass not bool", strings.Replace(processJSON("mid", func(d, i int) bool { return true }, 2), "true", `"yes"`, 1), "cannot unmarshal"},
		{"with weights", processJSONWeights("mid", `{"goal_advancement":0.5}`, func(d, i int) bool { return true }, 2), ""},
		{"unknown key", strings.Replace(processJSON("mid", func(d, i int) bool { return true }, 2), `{"stage"`, `{"mood":1,"stage"`, 1), "8 keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProcess(tt.in)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseProcess(f *testing.F) {
	f.Add(processJSON("early", func(d, i int) bool { return i == 0 }, 2))
	f.Add(processJSON("late", func(d, i int) bool { return true }, 4))
	f.Add(`{"stage":"mid"}`)
	f.Fuzz(func(t *testing.T, s string) {
		pj, err := ParseProcess(s)
		if err != nil {
			return
		}
		stage, crit := pj.Stage, pj.Criteria
		if len(crit) != len(ProcessDimensions) || !strings.Contains("early mid late", stage) {
			t.Fatalf("accepted stage %q with %d dimensions", stage, len(crit))
		}
		for _, cs := range crit {
			if len(cs) < 2 || len(cs) > 4 {
				t.Fatalf("accepted %d criteria", len(cs))
			}
		}
	})
}

func TestReward(t *testing.T) {
	tests := []struct {
		name    string
		score   func(d Dimension) int
		w       Weights
		want    float64
		overall float64
	}{
		{"all best", func(d Dimension) int { return d.Hi }, DefaultWeights(), 1, (10 + 5 + 10 + 0 + 0 + 5 + 10) / 7.0},
		{"all worst", func(d Dimension) int { return d.Lo }, DefaultWeights(), 0, (0 - 5 + 0 - 10 - 10 - 5 + 0) / 7.0},
		// goal 7 → .7·.4; the rest at their middle → .5·.6
		{"goal 7, rest middle", func(d Dimension) int {
			if d.Key == "goal" {
				return 7
			}
			return (d.Lo + d.Hi) / 2
		}, DefaultWeights(), .4*.7 + .6*.5, (7 + 0 + 5 - 5 - 5 + 0 + 5) / 7.0},
		{"goal only", func(d Dimension) int {
			if d.Key == "goal" {
				return 3
			}
			return d.Hi
		}, Weights{Goal: 2}, .3, (3 + 5 + 10 + 0 + 0 + 5 + 10) / 7.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := AgentScores{}
			for _, d := range EvalDimensions {
				a[d.Key] = Score{Score: tt.score(d)}
			}
			if got := a.Reward(tt.w); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("got reward %v, want %v", got, tt.want)
			}
			if got := a.Overall(); math.Abs(got-tt.overall) > 1e-12 {
				t.Errorf("got overall %v, want %v", got, tt.overall)
			}
		})
	}
}

// fakeCompleter answers from a list of replies in order (the last one
// repeats) and records the completions it got.
type fakeCompleter struct {
	replies []string
	got     []Completion
	err     error
}

func (f *fakeCompleter) Complete(_ context.Context, c Completion) (string, error) {
	f.got = append(f.got, c)
	if f.err != nil {
		return "", f.err
	}
	r := f.replies[min(len(f.got), len(f.replies))-1]
	return r, nil
}

func judgeOpts() JudgeOptions {
	o := JudgeOptions{}.Defaults()
	o.Label = "fake"
	return o
}

func TestJudgeScoresEpisode(t *testing.T) {
	valid := scoreJSON(EvalDimensions, func(a int, d Dimension) int {
		if d.Key == "goal" {
			return 8 - 5*a // agent_1 8, agent_2 3
		}
		return d.Hi
	})
	tests := []struct {
		name        string
		replies     []string
		wantResult  string
		wantRewards []float64
		wantCalls   int
	}{
		{"valid first time", []string{valid}, "judged", []float64{.6 + .4*.8, .6 + .4*.3}, 1},
		{"retried after invalid output", []string{"garbage", `{"agent_1":{}}`, valid}, "judged", []float64{.6 + .4*.8, .6 + .4*.3}, 3},
		{"invalid after every retry", []string{"garbage"}, "judge_invalid", []float64{0, 0}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &fakeCompleter{replies: tt.replies}
			j, err := NewJudge(fc, judgeOpts())
			if err != nil {
				t.Fatal(err)
			}
			rec := enginetest.PlayScripted(t, New().WithJudge(j), 9, nil, "scripted")
			out := rec.Outcome
			if out.Result != tt.wantResult || len(fc.got) != tt.wantCalls {
				t.Fatalf("got result %q after %d completions, want %q after %d", out.Result, len(fc.got), tt.wantResult, tt.wantCalls)
			}
			for i := range 2 {
				if math.Abs(out.Rewards[i]-tt.wantRewards[i]) > 1e-12 {
					t.Errorf("seat %d: got reward %v, want %v", i, out.Rewards[i], tt.wantRewards[i])
				}
			}
			tm := terms(t, rec)
			if tm.Judge != "fake" {
				t.Errorf("got judge %q, want fake", tm.Judge)
			}
			if tt.wantResult == "judged" {
				if tm.Evaluation.Rubric != RubricVersion || out.Metrics["agent_1/goal_success"] != 1 || out.Metrics["agent_2/goal_success"] != 0 {
					t.Errorf("got rubric %q metrics %v", tm.Evaluation.Rubric, out.Metrics)
				}
			} else if !strings.Contains(tm.JudgeError, "no valid judgement after 4 attempts") {
				t.Errorf("got judge error %q", tm.JudgeError)
			}
			seeds := map[uint64]bool{}
			for _, c := range fc.got {
				if c.Temperature != 0 || c.Grammar != ScoreGrammar(EvalDimensions, 300) || seeds[c.Seed] {
					t.Errorf("completion: temperature %v, seed %d repeated %v, grammar matches %v", c.Temperature, c.Seed, seeds[c.Seed], c.Grammar == ScoreGrammar(EvalDimensions, 300))
				}
				seeds[c.Seed] = true
			}
		})
	}
	t.Run("completer failure is an error", func(t *testing.T) {
		j, _ := NewJudge(&fakeCompleter{err: errors.New("backend down")}, judgeOpts())
		cast, _ := engine.ScriptedCast(New(), nil, 1)
		_, err := engine.Play(context.Background(), New().WithJudge(j), 1, nil, cast, engine.DefaultOptions(), nil)
		if err == nil || !strings.Contains(err.Error(), "backend down") {
			t.Errorf("got %v, want the completer's error", err)
		}
	})
}

func TestJudgeDeterministicSeeds(t *testing.T) {
	a, b := &fakeCompleter{replies: []string{"x"}}, &fakeCompleter{replies: []string{"x"}}
	ja, _ := NewJudge(a, judgeOpts())
	jb, _ := NewJudge(b, judgeOpts())
	enginetest.PlayScripted(t, New().WithJudge(ja), 3, nil)
	enginetest.PlayScripted(t, New().WithJudge(jb), 3, nil)
	for i := range a.got {
		if a.got[i].Seed != b.got[i].Seed || a.got[i].Prompt != b.got[i].Prompt {
			t.Fatalf("completion %d differs between two runs", i)
		}
	}
}

func TestExtraAndProcess(t *testing.T) {
	eval := scoreJSON(EvalDimensions, func(a int, d Dimension) int { return d.Hi })
	extra := scoreJSON(ExtraDimensions, func(a int, d Dimension) int { return 4 + a })
	// early stage; dimension d passes its first criterion only (pass rate .5)
	proc := processJSON("early", func(d, i int) bool { return i == 0 }, 2)
	c := CompleterFunc(func(_ context.Context, c Completion) (string, error) {
		switch {
		case strings.Contains(c.Prompt, "compromise ("):
			return extra, nil
		case strings.Contains(c.Prompt, "Evaluate only the last turn"):
			return proc, nil
		default:
			return eval, nil
		}
	})
	o := judgeOpts()
	o.Extra, o.Process = true, true
	j, _ := NewJudge(c, o)
	rec := enginetest.PlayScripted(t, New().WithJudge(j), 2, engine.Params{"max_turns": 5})
	tm := terms(t, rec)
	if tm.Extra == nil || rec.Outcome.Metrics["agent_2/empathy"] != 5 || rec.Outcome.Metrics["agent_1/mutual_benefit"] != 4 {
		t.Fatalf("extra metrics missing: %v", rec.Outcome.Metrics)
	}
	if len(tm.Process) != 5 {
		t.Fatalf("got %d process turns, want 5", len(tm.Process))
	}
	// No weights proposed: the early prior, which adds up to 1; every
	// pass rate .5 → R_process = .5, and every turn fell back.
	for _, p := range tm.Process {
		want := 0.3 * 0.5
		if p.Turn == 4 || p.Turn == 5 { // last turns of seat 1 and seat 0
			want += 1.0 * rec.Outcome.Rewards[p.Seat]
		}
		if !p.Valid || !p.Fallback || math.Abs(p.Process-.5) > 1e-12 || math.Abs(p.Shaped-want) > 1e-12 {
			t.Errorf("turn %d: got valid %v fallback %v process %v shaped %v, want .5 and %v", p.Turn, p.Valid, p.Fallback, p.Process, p.Shaped, want)
		}
	}
	if m := rec.Outcome.Metrics; m["process_fallbacks"] != 5 || m["process_invalid"] != 0 {
		t.Errorf("got process_fallbacks %v, process_invalid %v; want 5 and 0", m["process_fallbacks"], m["process_invalid"])
	}
	tr := tm.TurnRewards()
	if len(tr[0]) != 3 || len(tr[1]) != 2 {
		t.Errorf("got per-seat turn rewards %v, want 3 and 2 turns", tr)
	}
}

// processJudge judges every turn with reply and returns the process
// turns and the outcome's metrics of one 4-turn episode.
func processJudge(t *testing.T, o JudgeOptions, reply func(Completion) string) ([]ProcessTurn, map[string]float64, []Completion) {
	t.Helper()
	eval := scoreJSON(EvalDimensions, func(a int, d Dimension) int { return d.Hi })
	var got []Completion
	c := CompleterFunc(func(_ context.Context, c Completion) (string, error) {
		if !strings.Contains(c.Prompt, "Evaluate only the last turn") {
			return eval, nil
		}
		got = append(got, c)
		return reply(c), nil
	})
	o.Process = true
	j, err := NewJudge(c, o)
	if err != nil {
		t.Fatal(err)
	}
	rec := enginetest.PlayScripted(t, New().WithJudge(j), 2, engine.Params{"max_turns": 4})
	return terms(t, rec).Process, rec.Outcome.Metrics, got
}

// TestProcessStageWeights: the judge's proposal, sanitised, weighs the
// pass rates; the fixed ablation neither asks for weights nor uses them.
func TestProcessStageWeights(t *testing.T) {
	// goal_advancement passes both criteria, every other dimension one.
	pass := func(d, i int) bool { return d == 0 || i == 0 }
	allOnGoal := `{"goal_advancement":1,"strategic_positioning":0,"relational_attunement":0,"persona_consistency":0,"contextual_coherence":0,"turn_quality":0}`
	tests := []struct {
		name      string
		mode      string
		reply     string
		wantW0    float64 // weight of goal_advancement
		want      float64
		fallbacks float64
	}{
		// capped at .5, the other .5 shared equally: .5·1 + .5·.5
		{"proposed, capped", StageWeightsProposed, processJSONWeights("early", allOnGoal, pass, 2), .5, .75, 0},
		// the early prior: .10·1 + .90·.5
		{"proposed, all zero", StageWeightsProposed, processJSONWeights("early", strings.Replace(allOnGoal, ":1,", ":0,", 1), pass, 2), .1, .55, 4},
		{"proposed, none", StageWeightsProposed, processJSON("early", pass, 2), .1, .55, 4},
		{"proposed, not numbers", StageWeightsProposed, processJSONWeights("early", `"high"`, pass, 2), .1, .55, 4},
		{"fixed ignores a proposal", StageWeightsFixed, processJSONWeights("early", allOnGoal, pass, 2), .1, .55, 0},
		{"fixed, late", StageWeightsFixed, processJSON("late", pass, 2), .3, .3 + .7*.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := judgeOpts()
			o.StageWeights = tt.mode
			pts, m, got := processJudge(t, o, func(Completion) string { return tt.reply })
			for _, p := range pts {
				if !p.Valid || math.Abs(p.Weights[0]-tt.wantW0) > 1e-12 || math.Abs(p.Process-tt.want) > 1e-12 {
					t.Errorf("turn %d: got valid %v weights %v process %v, want goal weight %v, process %v", p.Turn, p.Valid, p.Weights, p.Process, tt.wantW0, tt.want)
				}
			}
			if m["process_fallbacks"] != tt.fallbacks {
				t.Errorf("got process_fallbacks %v, want %v", m["process_fallbacks"], tt.fallbacks)
			}
			asks := strings.Contains(got[0].Grammar, `\"weights\"`) && strings.Contains(string(got[0].Schema), `"weights"`) && strings.Contains(got[0].Prompt, `"weights":{`)
			if asks != (tt.mode == StageWeightsProposed) {
				t.Errorf("stage weights %s: got weights asked for %v", tt.mode, asks)
			}
		})
	}
}

// TestProcessInvalidFallsBack: a turn without a valid judgement gets the
// prior pass rate, not 0, and is counted.
func TestProcessInvalidFallsBack(t *testing.T) {
	valid := processJSONWeights("mid", uniformWeights, func(d, i int) bool { return true }, 2)
	o := judgeOpts()
	o.Retries = 0
	o.WeightPolicy.PriorPassRate = .4
	pts, m, _ := processJudge(t, o, func(c Completion) string {
		if strings.Contains(c.Prompt, "Evaluate only the last turn (turn 2,") {
			return "no idea"
		}
		return valid
	})
	for _, p := range pts {
		want, invalid := 1.0, p.Turn == 2
		if invalid {
			want = .4
		}
		if p.Valid == invalid || p.Fallback != invalid || math.Abs(p.Process-want) > 1e-12 {
			t.Errorf("turn %d: got valid %v fallback %v process %v, want process %v", p.Turn, p.Valid, p.Fallback, p.Process, want)
		}
	}
	if m["process_fallbacks"] != 1 || m["process_invalid"] != 1 {
		t.Errorf("got process_fallbacks %v, process_invalid %v; want 1 and 1", m["process_fallbacks"], m["process_invalid"])
	}
}

func TestJudgeOptionsStageWeights(t *testing.T) {
	o := judgeOpts()
	if o.StageWeights != StageWeightsProposed {
		t.Errorf("got default stage weights %q, want %q", o.StageWeights, StageWeightsProposed)
	}
	o.StageWeights = "learned"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "want proposed or fixed") {
		t.Errorf("got %v, want an error naming proposed and fixed", err)
	}
	o = judgeOpts()
	o.WeightPolicy.Cap = .1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "add up to") {
		t.Errorf("got %v, want infeasible caps refused", err)
	}
}

func TestJudgePromptsGolden(t *testing.T) {
	j, _ := NewJudge(&fakeCompleter{replies: []string{"x"}}, judgeOpts())
	fo := judgeOpts()
	fo.StageWeights = StageWeightsFixed
	fixed, _ := NewJudge(&fakeCompleter{replies: []string{"x"}}, fo)
	rec := enginetest.PlayScripted(t, New(), 4, engine.Params{"scenario": "conf-borrowed-money", "pair": 1, "max_turns": 6})
	var setup Setup
	b, _ := json.Marshal(rec.Scenario)
	json.Unmarshal(b, &setup)
	h := History{Setup: setup, Terms: terms(t, rec)}
	for name, c := range map[string]Completion{
		"judge_eval":          j.EvalCompletion(h),
		"judge_extra":         j.ExtraCompletion(h),
		"judge_process":       j.ProcessCompletion(h, 3),
		"judge_process_fixed": fixed.ProcessCompletion(h, 3),
	} {
		golden(t, name+"_prompt.txt", c.System+"\n---\n"+c.Prompt)
		golden(t, name+".gbnf", c.Grammar)
	}
}

func TestRejudgeRecord(t *testing.T) {
	rec := enginetest.PlayScripted(t, New(), 6, nil)
	b, _ := json.Marshal(rec)
	var back engine.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	valid := scoreJSON(EvalDimensions, func(a int, d Dimension) int { return d.Hi })
	j, _ := NewJudge(&fakeCompleter{replies: []string{valid}}, judgeOpts())
	if err := Rejudge(context.Background(), j, &back); err != nil {
		t.Fatal(err)
	}
	if back.Outcome.Result != "judged" || back.Outcome.Rewards[0] != 1 || back.Outcome.Metrics["turns"] != 20 {
		t.Errorf("got outcome %+v, want judged with reward 1 after 20 turns", back.Outcome)
	}
	last := back.Events[len(back.Events)-1]
	if last.Kind != engine.KindOutcome || last.Text != "The episode is over: judged" {
		t.Errorf("got last event %v %q, want the new outcome", last.Kind, last.Text)
	}
	other := back
	other.Env = "werewolf_v1"
	if err := Rejudge(context.Background(), j, &other); err == nil {
		t.Error("a werewolf record was rejudged")
	}
}

// hashCompleter answers every pass with valid JSON whose scores depend
// only on the prompt, so judged episodes stay deterministic.
func hashCompleter() Completer {
	return CompleterFunc(func(_ context.Context, c Completion) (string, error) {
		h := uint64(0)
		for _, r := range c.Prompt {
			h = h*31 + uint64(r)
		}
		if strings.Contains(c.Prompt, "Evaluate only the last turn") {
			return processJSON(Stages[h%3], func(d, i int) bool { return (h>>uint(d+i))&1 == 1 }, 2+int(h%3)), nil
		}
		dims := EvalDimensions
		if strings.Contains(c.Prompt, "compromise (") {
			dims = ExtraDimensions
		}
		return scoreJSON(dims, func(a int, d Dimension) int { return d.Lo + int((h>>uint(a+len(d.Key)))%uint64(d.Hi-d.Lo+1)) }), nil
	})
}

func TestConformanceJudged(t *testing.T) {
	o := judgeOpts()
	o.Extra, o.Process = true, true
	j, _ := NewJudge(hashCompleter(), o)
	enginetest.Conformance(t, New().WithJudge(j), enginetest.Options{Seeds: 10})
}

func BenchmarkEpisodeScripted(b *testing.B) {
	g := New()
	cast, _ := engine.ScriptedCast(g, nil, 1)
	for b.Loop() {
		if _, err := engine.Play(context.Background(), g, 1, nil, cast, engine.DefaultOptions(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseScores(b *testing.B) {
	s := scoreJSON(EvalDimensions, func(_ int, d Dimension) int { return d.Hi })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseScores(s, EvalDimensions); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadEmbedded(b *testing.B) {
	for b.Loop() {
		if _, err := LoadEmbedded(); err != nil {
			b.Fatal(err)
		}
	}
}
