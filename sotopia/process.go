package sotopia

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ProcessDimensions are the six per-turn dimensions of the SocialRL-style
// process reward.
var ProcessDimensions = []Dimension{
	{"goal_advancement", 0, 1, "Did this turn move the acting agent closer to its private goal?"},
	{"strategic_positioning", 0, 1, "Did it improve the agent's position for what comes next (options, leverage, information)?"},
	{"relational_attunement", 0, 1, "Did it respond to the other person's feelings, needs and signals?"},
	{"persona_consistency", 0, 1, "Is it consistent with the agent's profile: personality, values, decision style, secret?"},
	{"contextual_coherence", 0, 1, "Does it follow from the scenario and what was just said or done?"},
	{"turn_quality", 0, 1, "Is it clear, natural and of an appropriate length?"},
}

// Stages of a conversation as the process judge infers them.
var Stages = []string{"early", "mid", "late"}

// StageWeights are the per-stage weights of ProcessDimensions (the fixed
// ablation weights of SocialRL-Sotopia), indexed like Stages.
var StageWeights = [3][6]float64{
	{.10, .10, .30, .15, .20, .15},
	{.20, .20, .20, .15, .15, .10},
	{.30, .25, .10, .15, .10, .10},
}

// Criterion is one binary check the process judge wrote for a turn.
type Criterion struct {
	Criterion string `json:"criterion"`
	Pass      bool   `json:"pass"`
}

// ProcessTurn is the process reward of one turn for the seat that acted.
type ProcessTurn struct {
	Turn  int    `json:"turn"`
	Seat  int    `json:"seat"`
	Valid bool   `json:"valid"`
	Stage string `json:"stage,omitempty"`
	// Criteria[d] are the criteria of ProcessDimensions[d]; PassRates[d]
	// their pass rate.
	Criteria  [][]Criterion `json:"criteria,omitempty"`
	PassRates []float64     `json:"pass_rates,omitempty"`
	// Proposed are the weights the judge proposed, as written; Weights[d]
	// the weight of ProcessDimensions[d] used (SanitizeWeights, or the
	// prior under StageWeightsFixed).
	Proposed map[string]float64 `json:"proposed,omitempty"`
	Weights  []float64          `json:"weights,omitempty"`
	// Fallback says the turn's reward rests on the prior: there was no
	// valid judgement (Process is then WeightPolicy.PriorPassRate), or the
	// proposal was missing or unusable (Weights are the stage's prior).
	Fallback bool `json:"fallback,omitempty"`
	// Process is R_process,t = Σ_d w_d · pass rate_d.
	Process float64 `json:"process"`
	// Shaped is Alpha·Process, plus Beta·R_outcome on the seat's last turn.
	Shaped   float64 `json:"shaped"`
	Attempts int     `json:"attempts"`
}

// TurnRewards returns each seat's shaped per-turn rewards in turn order
// (what a self-play runner credits to the seat's turns), or nil when the
// process pass did not run.
func (t Terms) TurnRewards() [][]float64 {
	if len(t.Process) == 0 {
		return nil
	}
	out := make([][]float64, 2)
	for _, p := range t.Process {
		out[p.Seat] = append(out[p.Seat], p.Shaped)
	}
	return out
}

// ProcessGrammar forces the process judge's JSON: the stage, the proposed
// weight of every dimension, then 2–4 criteria for each dimension.
func ProcessGrammar(reasoningChars int) string {
	return processGrammar(reasoningChars, true)
}

// FixedProcessGrammar is ProcessGrammar without the weights, for the
// fixed-weights ablation (StageWeightsFixed).
func FixedProcessGrammar(reasoningChars int) string {
	return processGrammar(reasoningChars, false)
}

// processGrammar puts the weights right after the stage: the judge then
// weighs the dimensions for the stage before it writes the criteria, so
// the weights cannot follow the pass flags it has just written.
func processGrammar(reasoningChars int, weights bool) string {
	var b strings.Builder
	b.WriteString(`root ::= "{\"stage\":" stage`)
	if weights {
		b.WriteString(` ",\"weights\":{"`)
		for i, d := range ProcessDimensions {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, ` "%s\"%s\":" weight`, sep, d.Key)
		}
		b.WriteString(` "}"`)
	}
	for _, d := range ProcessDimensions {
		fmt.Fprintf(&b, ` ",\"%s\":" criteria`, d.Key)
	}
	b.WriteString(" \"}\"\n")
	b.WriteString(`stage ::= "\"early\"" | "\"mid\"" | "\"late\""` + "\n")
	if weights {
		b.WriteString(`weight ::= "0" ("." [0-9] [0-9]?)? | "1" (".0" "0"?)?` + "\n")
	}
	b.WriteString(`criteria ::= "[" criterion "," criterion ("," criterion)? ("," criterion)? "]"` + "\n")
	b.WriteString(`criterion ::= "{\"criterion\":" text ",\"pass\":" ("true" | "false") "}"` + "\n")
	b.WriteString(stringRules("text", reasoningChars))
	return b.String()
}

func maxProcessBytes(reasoningChars int, weights bool) int {
	n := len(`{"stage":"early"}`)
	if weights {
		n += len(`,"weights":{}`)
		for _, d := range ProcessDimensions {
			n += len(d.Key) + len(`"":1.00,`)
		}
	}
	for _, d := range ProcessDimensions {
		n += len(d.Key) + len(`,"":[]`) + 4*(len(`{"criterion":"","pass":false},`)+4*reasoningChars)
	}
	return n
}

// ProcessJudgement is one parsed reply of the process judge.
type ProcessJudgement struct {
	Stage string
	// Weights are the proposed weights as written, unknown keys included
	// (SanitizeWeights drops them); nil when the reply proposes none or
	// its "weights" is not an object of numbers.
	Weights map[string]float64
	// Criteria[d] are the criteria of ProcessDimensions[d].
	Criteria [][]Criterion
}

// ParseProcess parses a reply of ProcessGrammar or FixedProcessGrammar
// strictly, except for the weights: a missing or unreadable proposal is
// not a reason to ask again, since SanitizeWeights falls back to the
// prior for it.
func ParseProcess(text string) (ProcessJudgement, error) {
	var out ProcessJudgement
	var wire map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&wire); err != nil {
		return out, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return out, errors.New("text after the JSON object")
	}
	want := len(ProcessDimensions) + 1
	if raw, ok := wire["weights"]; ok {
		want++
		if json.Unmarshal(raw, &out.Weights) != nil {
			out.Weights = nil
		}
	}
	if len(wire) != want {
		return out, fmt.Errorf("%d keys, want stage, optional weights and %d dimensions", len(wire), len(ProcessDimensions))
	}
	if err := json.Unmarshal(wire["stage"], &out.Stage); err != nil || !slices.Contains(Stages, out.Stage) {
		return out, fmt.Errorf("stage must be one of %v", Stages)
	}
	for _, d := range ProcessDimensions {
		raw, ok := wire[d.Key]
		if !ok {
			return out, fmt.Errorf("missing %s", d.Key)
		}
		var cs []struct {
			Criterion *string `json:"criterion"`
			Pass      *bool   `json:"pass"`
		}
		cd := json.NewDecoder(bytes.NewReader(raw))
		cd.DisallowUnknownFields()
		if err := cd.Decode(&cs); err != nil {
			return out, fmt.Errorf("%s: %w", d.Key, err)
		}
		if len(cs) < 2 || len(cs) > 4 {
			return out, fmt.Errorf("%s has %d criteria, want 2..4", d.Key, len(cs))
		}
		var crit []Criterion
		for i, c := range cs {
			if c.Criterion == nil || c.Pass == nil {
				return out, fmt.Errorf("%s[%d]: want criterion and pass", d.Key, i)
			}
			crit = append(crit, Criterion{Criterion: *c.Criterion, Pass: *c.Pass})
		}
		out.Criteria = append(out.Criteria, crit)
	}
	return out, nil
}

// ProcessCompletion is the process-judge completion for turn (from 1).
func (j *Judge) ProcessCompletion(h History, turn int) Completion {
	propose := j.opts.StageWeights != StageWeightsFixed
	t := h.Terms.Turns[turn-1]
	name := h.Setup.Characters[t.Seat].Name
	var b strings.Builder
	b.WriteString(h.context())
	b.WriteString("Transcript so far:\n")
	b.WriteString(h.Transcript(turn))
	fmt.Fprintf(&b, "\nEvaluate only the last turn (turn %d, by %s, agent_%d) against %s's private goal.\n", turn, name, t.Seat+1, name)
	b.WriteString("First say which stage the conversation is in (early, mid or late). ")
	if propose {
		b.WriteString("Then say how much each dimension below should count at this stage: a weight from 0 to 1 for each, the weights adding up to 1. ")
	}
	b.WriteString("Then, for each dimension below, write 2 to 4 specific yes/no criteria for this turn and whether the turn passes each:\n")
	for _, d := range ProcessDimensions {
		fmt.Fprintf(&b, "- %s: %s\n", d.Key, d.Text)
	}
	b.WriteString("\nReply with one JSON object and no spaces outside strings:\n")
	b.WriteString(`{"stage":"early|mid|late"`)
	if propose {
		b.WriteString(`,"weights":{`)
		for i, d := range ProcessDimensions {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"%s":0.xx`, d.Key)
		}
		b.WriteString("}")
	}
	for _, d := range ProcessDimensions {
		fmt.Fprintf(&b, `,"%s":[{"criterion":"...","pass":true},{"criterion":"...","pass":false}]`, d.Key)
	}
	fmt.Fprintf(&b, "}\nRubric version: %s\n", RubricVersion)
	return Completion{
		System:    judgeSystem,
		Prompt:    b.String(),
		Grammar:   processGrammar(j.opts.ReasoningChars, propose),
		Schema:    processSchema(j.opts.ReasoningChars, propose),
		MaxTokens: j.maxTokens(maxProcessBytes(j.opts.ReasoningChars, propose)),
	}
}

// ProcessRewards runs the process judge on every turn. outcome holds each
// seat's terminal reward, added (times Beta) on the seat's last turn. A
// turn without a valid judgement gets the prior's process reward (see
// ProcessTurn.Fallback), not 0: most such turns fail for the judge's
// sake, not the policy's, and a 0 would punish them.
func (j *Judge) ProcessRewards(ctx context.Context, h History, outcome []float64) ([]ProcessTurn, error) {
	last := map[int]int{}
	for _, t := range h.Terms.Turns {
		last[t.Seat] = t.Turn
	}
	var out []ProcessTurn
	for _, t := range h.Terms.Turns {
		pt, err := j.processTurn(ctx, h, t)
		if err != nil {
			return nil, err
		}
		pt.Shaped = j.opts.Alpha * pt.Process
		if last[t.Seat] == t.Turn && t.Seat < len(outcome) {
			pt.Shaped += j.opts.Beta * outcome[t.Seat]
		}
		out = append(out, pt)
	}
	return out, nil
}

// processTurn judges one turn and computes its process reward.
func (j *Judge) processTurn(ctx context.Context, h History, t TurnRecord) (ProcessTurn, error) {
	pt := ProcessTurn{Turn: t.Turn, Seat: t.Seat}
	var pj ProcessJudgement
	n, err := j.complete(ctx, passProcess, uint64(t.Turn), j.ProcessCompletion(h, t.Turn), func(text string) (err error) {
		pj, err = ParseProcess(text)
		return err
	})
	pt.Attempts = n
	switch {
	case errors.Is(err, ErrInvalidJudgement):
		// Whatever the stage, the prior's weights add up to 1, so the
		// prior pass rate is the process reward.
		pt.Fallback = true
		pt.Process = j.opts.WeightPolicy.PriorPassRate
		return pt, nil
	case err != nil:
		return pt, err
	}
	pt.Valid, pt.Stage, pt.Criteria, pt.Proposed = true, pj.Stage, pj.Criteria, pj.Weights
	proposed := pj.Weights
	if j.opts.StageWeights == StageWeightsFixed {
		// The ablation never asks for weights; the prior is the table.
		proposed = nil
	}
	w, fellBack, err := SanitizeWeights(proposed, pj.Stage, j.opts.WeightPolicy)
	if err != nil {
		return pt, err
	}
	pt.Weights = w
	pt.Fallback = fellBack && j.opts.StageWeights != StageWeightsFixed
	for d, cs := range pj.Criteria {
		pass := 0
		for _, c := range cs {
			if c.Pass {
				pass++
			}
		}
		r := float64(pass) / float64(len(cs))
		pt.PassRates = append(pt.PassRates, r)
		pt.Process += w[d] * r
	}
	return pt, nil
}
