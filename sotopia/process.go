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
	// Process is R_process,t = Σ_d w_stage,d · pass rate_d (0 when invalid).
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

// ProcessGrammar forces the process judge's JSON: the stage, then 2–4
// criteria for each dimension.
func ProcessGrammar(reasoningChars int) string {
	var b strings.Builder
	b.WriteString(`root ::= "{\"stage\":" stage`)
	for _, d := range ProcessDimensions {
		fmt.Fprintf(&b, ` ",\"%s\":" criteria`, d.Key)
	}
	b.WriteString(" \"}\"\n")
	b.WriteString(`stage ::= "\"early\"" | "\"mid\"" | "\"late\""` + "\n")
	b.WriteString(`criteria ::= "[" criterion "," criterion ("," criterion)? ("," criterion)? "]"` + "\n")
	b.WriteString(`criterion ::= "{\"criterion\":" text ",\"pass\":" ("true" | "false") "}"` + "\n")
	b.WriteString(stringRules("text", reasoningChars))
	return b.String()
}

func maxProcessBytes(reasoningChars int) int {
	n := len(`{"stage":"early"}`)
	for _, d := range ProcessDimensions {
		n += len(d.Key) + len(`,"":[]`) + 4*(len(`{"criterion":"","pass":false},`)+4*reasoningChars)
	}
	return n
}

// ParseProcess parses a reply of ProcessGrammar strictly.
func ParseProcess(text string) (stage string, criteria [][]Criterion, err error) {
	var wire map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&wire); err != nil {
		return "", nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", nil, errors.New("text after the JSON object")
	}
	if len(wire) != len(ProcessDimensions)+1 {
		return "", nil, fmt.Errorf("%d keys, want stage and %d dimensions", len(wire), len(ProcessDimensions))
	}
	if err := json.Unmarshal(wire["stage"], &stage); err != nil || !slices.Contains(Stages, stage) {
		return "", nil, fmt.Errorf("stage must be one of %v", Stages)
	}
	for _, d := range ProcessDimensions {
		raw, ok := wire[d.Key]
		if !ok {
			return "", nil, fmt.Errorf("missing %s", d.Key)
		}
		var cs []struct {
			Criterion *string `json:"criterion"`
			Pass      *bool   `json:"pass"`
		}
		cd := json.NewDecoder(bytes.NewReader(raw))
		cd.DisallowUnknownFields()
		if err := cd.Decode(&cs); err != nil {
			return "", nil, fmt.Errorf("%s: %w", d.Key, err)
		}
		if len(cs) < 2 || len(cs) > 4 {
			return "", nil, fmt.Errorf("%s has %d criteria, want 2..4", d.Key, len(cs))
		}
		var out []Criterion
		for i, c := range cs {
			if c.Criterion == nil || c.Pass == nil {
				return "", nil, fmt.Errorf("%s[%d]: want criterion and pass", d.Key, i)
			}
			out = append(out, Criterion{Criterion: *c.Criterion, Pass: *c.Pass})
		}
		criteria = append(criteria, out)
	}
	return stage, criteria, nil
}

// ProcessCompletion is the process-judge completion for turn (from 1).
func (j *Judge) ProcessCompletion(h History, turn int) Completion {
	t := h.Terms.Turns[turn-1]
	name := h.Setup.Characters[t.Seat].Name
	var b strings.Builder
	b.WriteString(h.context())
	b.WriteString("Transcript so far:\n")
	b.WriteString(h.Transcript(turn))
	fmt.Fprintf(&b, "\nEvaluate only the last turn (turn %d, by %s, agent_%d) against %s's private goal.\n", turn, name, t.Seat+1, name)
	b.WriteString("First say which stage the conversation is in (early, mid or late). Then, for each dimension below, write 2 to 4 specific yes/no criteria for this turn and whether the turn passes each:\n")
	for _, d := range ProcessDimensions {
		fmt.Fprintf(&b, "- %s: %s\n", d.Key, d.Text)
	}
	b.WriteString("\nReply with one JSON object and no spaces outside strings:\n")
	b.WriteString(`{"stage":"early|mid|late"`)
	for _, d := range ProcessDimensions {
		fmt.Fprintf(&b, `,"%s":[{"criterion":"...","pass":true},{"criterion":"...","pass":false}]`, d.Key)
	}
	fmt.Fprintf(&b, "}\nRubric version: %s\n", RubricVersion)
	return Completion{
		System:    judgeSystem,
		Prompt:    b.String(),
		Grammar:   ProcessGrammar(j.opts.ReasoningChars),
		Schema:    ProcessSchema(j.opts.ReasoningChars),
		MaxTokens: j.maxTokens(maxProcessBytes(j.opts.ReasoningChars)),
	}
}

// ProcessRewards runs the process judge on every turn. outcome holds each
// seat's terminal reward, added (times Beta) on the seat's last turn. A
// turn without a valid judgement gets process reward 0.
func (j *Judge) ProcessRewards(ctx context.Context, h History, outcome []float64) ([]ProcessTurn, error) {
	last := map[int]int{}
	for _, t := range h.Terms.Turns {
		last[t.Seat] = t.Turn
	}
	var out []ProcessTurn
	for _, t := range h.Terms.Turns {
		pt := ProcessTurn{Turn: t.Turn, Seat: t.Seat}
		var stage string
		var crit [][]Criterion
		n, err := j.complete(ctx, passProcess, uint64(t.Turn), j.ProcessCompletion(h, t.Turn), func(text string) (err error) {
			stage, crit, err = ParseProcess(text)
			return err
		})
		pt.Attempts = n
		switch {
		case errors.Is(err, ErrInvalidJudgement):
		case err != nil:
			return nil, err
		default:
			pt.Valid, pt.Stage, pt.Criteria = true, stage, crit
			w := StageWeights[slices.Index(Stages, stage)]
			for d, cs := range crit {
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
		}
		pt.Shaped = j.opts.Alpha * pt.Process
		if last[t.Seat] == t.Turn && t.Seat < len(outcome) {
			pt.Shaped += j.opts.Beta * outcome[t.Seat]
		}
		out = append(out, pt)
	}
	return out, nil
}
