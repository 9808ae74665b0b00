package sotopia

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
)

// RubricVersion names the judge prompts, dimensions and grammars. It is
// recorded with every evaluation; change it whenever any of them changes,
// so scores from different rubrics are never mixed silently.
const RubricVersion = "omar-sotopia-eval-2"

// Completion is one text completion the judge asks for.
type Completion struct {
	System string
	Prompt string
	// Grammar is a GBNF grammar (root rule "root") the reply must follow.
	Grammar string
	// Schema is the JSON schema of the same replies, for backends that
	// cannot take a grammar (Ollama's format).
	Schema      json.RawMessage
	MaxTokens   int
	Temperature float32
	Seed        uint64
}

// Completer produces text for a prompt. The environment declares it and
// never imports a model: package judge adapts an
// inference.Backend. An error means the completer failed (context done,
// backend down), not that the text is bad: bad text is retried.
type Completer interface {
	Complete(ctx context.Context, c Completion) (string, error)
}

// CompleterFunc adapts a function to Completer.
type CompleterFunc func(ctx context.Context, c Completion) (string, error)

// Complete calls f.
func (f CompleterFunc) Complete(ctx context.Context, c Completion) (string, error) { return f(ctx, c) }

// Dimension is one scored dimension of a rubric.
type Dimension struct {
	Key    string
	Lo, Hi int
	Text   string
}

// EvalDimensions are SOTOPIA-EVAL's seven dimensions in the order the
// judge writes them (reasoning first, goal last, so that the goal score
// comes after the judge has reviewed everything else).
var EvalDimensions = []Dimension{
	{"believability", 0, 10, "How natural, consistent and human-like the character behaves, in line with its profile (personality, values, decision style). 0 = robotic or out of character, 10 = fully believable."},
	{"relationship", -5, 5, "How the interaction changed the relationship between the two characters. Negative = the relationship got worse, 0 = unchanged, positive = it got better."},
	{"knowledge", 0, 10, "How much new, relevant and important information the character gained in the interaction. 0 = nothing new, 10 = a lot of valuable information."},
	{"secret", -10, 0, "Whether the character revealed its secret or secret intentions. 0 = kept everything private, -10 = revealed the secret fully and to its own harm."},
	{"social_rules", -10, 0, "Whether the character broke moral rules, laws or social norms (lying to harm, threats, insults, discrimination). 0 = no violation, -10 = severe violations."},
	{"financial_and_material_benefits", -5, 5, "The character's financial and material gains or losses from the interaction. Negative = losses, 0 = none, positive = gains."},
	{"goal", 0, 10, "How far the character achieved its own private social goal. 0 = not at all or made it worse, 10 = fully achieved."},
}

// ExtraDimensions are OMAR's five additional 0..10 judge metrics.
var ExtraDimensions = []Dimension{
	{"compromise", 0, 10, "How well the character looked for and offered compromises that respect both sides."},
	{"persuasion", 0, 10, "How effectively the character persuaded the other with reasons, evidence or appeals that fit them."},
	{"strategic_commitment", 0, 10, "How consistently the character pursued a clear strategy and kept the commitments it made."},
	{"empathy", 0, 10, "How well the character recognised and responded to the other's feelings and needs."},
	{"mutual_benefit", 0, 10, "How much the character sought outcomes that benefit both characters rather than only itself."},
}

// Weights turn the seven SOTOPIA-EVAL dimensions into one training reward.
// Every dimension is first mapped to [0,1] ((score − lo)/(hi − lo)); the
// reward is the weighted mean.
type Weights struct {
	Believability float64 `json:"believability"`
	Relationship  float64 `json:"relationship"`
	Knowledge     float64 `json:"knowledge"`
	Secret        float64 `json:"secret"`
	SocialRules   float64 `json:"social_rules"`
	Financial     float64 `json:"financial_and_material_benefits"`
	Goal          float64 `json:"goal"`
}

// DefaultWeights put 0.4 on the goal and 0.1 on each other dimension: the
// goal is what SOTOPIA asks agents to achieve, the others keep the agent
// believable, honest and decent while doing it.
func DefaultWeights() Weights {
	return Weights{Believability: .1, Relationship: .1, Knowledge: .1, Secret: .1, SocialRules: .1, Financial: .1, Goal: .4}
}

func (w Weights) byKey() map[string]float64 {
	return map[string]float64{
		"believability": w.Believability, "relationship": w.Relationship, "knowledge": w.Knowledge,
		"secret": w.Secret, "social_rules": w.SocialRules, "financial_and_material_benefits": w.Financial, "goal": w.Goal,
	}
}

// Validate checks that the weights are non-negative and not all zero.
func (w Weights) Validate() error {
	sum := 0.0
	for _, d := range EvalDimensions {
		v := w.byKey()[d.Key]
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("sotopia: weight of %s is %v", d.Key, v)
		}
		sum += v
	}
	if sum == 0 {
		return errors.New("sotopia: all reward weights are zero")
	}
	return nil
}

// Score is one dimension's judgement.
type Score struct {
	Reasoning string `json:"reasoning"`
	Score     int    `json:"score"`
}

// AgentScores maps a dimension key to its score.
type AgentScores map[string]Score

// Overall is the plain mean of the seven SOTOPIA-EVAL scores (SOTOPIA's
// "overall"; dimensions keep their own ranges).
func (a AgentScores) Overall() float64 {
	sum := 0.0
	for _, d := range EvalDimensions {
		sum += float64(a[d.Key].Score)
	}
	return sum / float64(len(EvalDimensions))
}

// Reward maps every dimension to [0,1] and takes the weighted mean.
func (a AgentScores) Reward(w Weights) float64 {
	ws := w.byKey()
	num, den := 0.0, 0.0
	for _, d := range EvalDimensions {
		x := float64(a[d.Key].Score-d.Lo) / float64(d.Hi-d.Lo)
		num += ws[d.Key] * min(1, max(0, x))
		den += ws[d.Key]
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// Evaluation is the judge's verdict on both agents.
type Evaluation struct {
	Rubric string         `json:"rubric"`
	Agents [2]AgentScores `json:"agents"`
	// Attempts is how many completions it took (1 = first one was valid).
	Attempts int `json:"attempts"`
}

// ExtraScores are the optional OMAR metrics.
type ExtraScores struct {
	Rubric   string         `json:"rubric"`
	Agents   [2]AgentScores `json:"agents"`
	Attempts int            `json:"attempts"`
}

// ScoreGrammar returns the GBNF that forces exactly the score JSON of
// dims for both agents:
//
//	{"agent_1":{"<dim>":{"reasoning":"…","score":N},…},"agent_2":{…}}
//
// with every score an integer in its range and every reasoning a JSON
// string of at most reasoningChars characters. No whitespace is allowed,
// so the length of a reply is bounded.
func ScoreGrammar(dims []Dimension, reasoningChars int) string {
	var b strings.Builder
	b.WriteString(`root ::= "{\"agent_1\":" agent ",\"agent_2\":" agent "}"` + "\n")
	b.WriteString(`agent ::= "{`)
	for i, d := range dims {
		if i > 0 {
			b.WriteString(`," "`)
		}
		fmt.Fprintf(&b, `\"%s\":" dim%d "`, d.Key, i)
	}
	b.WriteString("}\"\n")
	for i, d := range dims {
		fmt.Fprintf(&b, `dim%d ::= "{\"reasoning\":" reasoning ",\"score\":" range%d "}"`+"\n", i, i)
		fmt.Fprintf(&b, "range%d ::= %s\n", i, intRange(d.Lo, d.Hi))
	}
	b.WriteString(stringRules("reasoning", reasoningChars))
	return b.String()
}

// intRange is a GBNF alternative of every integer in lo..hi.
func intRange(lo, hi int) string {
	var alts []string
	for v := lo; v <= hi; v++ {
		alts = append(alts, strconv.Quote(strconv.Itoa(v)))
	}
	return strings.Join(alts, " | ")
}

// stringRules is a rule for a JSON string of at most n characters (no
// control characters, simple escapes only).
func stringRules(name string, n int) string {
	return fmt.Sprintf("%s ::= \"\\\"\" char{0,%d} \"\\\"\"\n", name, n) +
		`char ::= [ !#-\[\]-~` + nonASCII + `] | "\\" ["\\/nt]` + "\n"
}

// maxScoreBytes bounds the length in bytes of a reply of ScoreGrammar, so
// that MaxTokens (at least one byte per token) never cuts a valid reply.
func maxScoreBytes(dims []Dimension, reasoningChars int) int {
	n := len(`{"agent_1":,"agent_2":}`)
	per := 2 // braces of one agent
	for _, d := range dims {
		per += len(d.Key) + len(`"":{"reasoning":"","score":},`) + 4*reasoningChars + 3
	}
	return n + 2*per
}

// ParseScores parses a reply of ScoreGrammar strictly: exactly both agents,
// exactly the dimensions of dims, integer scores in range, nothing else.
func ParseScores(text string, dims []Dimension) ([2]AgentScores, error) {
	var out [2]AgentScores
	var wire map[string]map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&wire); err != nil {
		return out, fmt.Errorf("not a JSON object of agents: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return out, errors.New("text after the JSON object")
	}
	if len(wire) != 2 {
		return out, fmt.Errorf("%d agents, want agent_1 and agent_2", len(wire))
	}
	for i := range 2 {
		key := fmt.Sprintf("agent_%d", i+1)
		agent, ok := wire[key]
		if !ok {
			return out, fmt.Errorf("missing %s", key)
		}
		if len(agent) != len(dims) {
			return out, fmt.Errorf("%s has %d dimensions, want %d", key, len(agent), len(dims))
		}
		out[i] = AgentScores{}
		for _, d := range dims {
			raw, ok := agent[d.Key]
			if !ok {
				return out, fmt.Errorf("%s: missing %s", key, d.Key)
			}
			var s struct {
				Reasoning *string `json:"reasoning"`
				Score     *int    `json:"score"`
			}
			sd := json.NewDecoder(bytes.NewReader(raw))
			sd.DisallowUnknownFields()
			if err := sd.Decode(&s); err != nil {
				return out, fmt.Errorf("%s.%s: %w", key, d.Key, err)
			}
			if s.Reasoning == nil || s.Score == nil {
				return out, fmt.Errorf("%s.%s: want reasoning and score", key, d.Key)
			}
			if *s.Score < d.Lo || *s.Score > d.Hi {
				return out, fmt.Errorf("%s.%s: score %d outside %d..%d", key, d.Key, *s.Score, d.Lo, d.Hi)
			}
			out[i][d.Key] = Score{Reasoning: *s.Reasoning, Score: *s.Score}
		}
	}
	return out, nil
}

// JudgeOptions configure a Judge.
type JudgeOptions struct {
	// Label names the judge in Terms.Judge (e.g. "llama:judge.gguf").
	Label string
	// Temperature and Seed are fixed so that a judge is reproducible; each
	// completion's seed is derived from Seed, the pass, the turn and the
	// attempt.
	Temperature float32
	Seed        uint64
	// Retries is how many more completions are asked after an invalid one.
	Retries int
	// ReasoningChars bounds each reasoning string.
	ReasoningChars int
	// MaxTokens caps a completion; 0 means the grammar's length bound.
	MaxTokens int
	Weights   Weights
	// Extra runs the five OMAR metrics as a second pass.
	Extra bool
	// Process runs the per-turn process reward (one completion per turn).
	Process bool
	// Alpha scales the process reward, Beta the outcome reward on a seat's
	// last turn: R̃_t = Alpha·R_process,t (+ Beta·R_outcome).
	Alpha, Beta float64
	// StageWeights is where the process reward's weights come from:
	// StageWeightsProposed (the judge proposes them) or StageWeightsFixed.
	StageWeights string
	// WeightPolicy sanitises proposed weights and holds the prior.
	WeightPolicy WeightPolicy
}

// Defaults returns the default judge options.
func (JudgeOptions) Defaults() JudgeOptions {
	return JudgeOptions{Label: "llm", Temperature: 0, Seed: 0x5070, Retries: 3, ReasoningChars: 300, Weights: DefaultWeights(), Alpha: 0.3, Beta: 1,
		StageWeights: StageWeightsProposed, WeightPolicy: WeightPolicy{}.Defaults()}
}

// Validate checks o.
func (o JudgeOptions) Validate() error {
	switch {
	case o.Retries < 0:
		return fmt.Errorf("sotopia: judge retries %d < 0", o.Retries)
	case o.ReasoningChars < 1:
		return fmt.Errorf("sotopia: judge reasoning chars %d < 1", o.ReasoningChars)
	case o.MaxTokens < 0:
		return fmt.Errorf("sotopia: judge max tokens %d < 0", o.MaxTokens)
	case o.Temperature < 0:
		return fmt.Errorf("sotopia: judge temperature %v < 0", o.Temperature)
	case o.Alpha < 0 || o.Beta < 0:
		return fmt.Errorf("sotopia: process alpha %v / beta %v must be ≥ 0", o.Alpha, o.Beta)
	case o.StageWeights != StageWeightsProposed && o.StageWeights != StageWeightsFixed:
		return fmt.Errorf("sotopia: stage weights %q: want %s or %s", o.StageWeights, StageWeightsProposed, StageWeightsFixed)
	}
	if err := o.WeightPolicy.Validate(); err != nil {
		return err
	}
	return o.Weights.Validate()
}

// Judge is the SOTOPIA-EVAL judge on top of a Completer.
type Judge struct {
	c    Completer
	opts JudgeOptions
}

// NewJudge returns a judge asking c.
func NewJudge(c Completer, o JudgeOptions) (*Judge, error) {
	if c == nil {
		return nil, errors.New("sotopia: judge needs a completer")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Judge{c: c, opts: o}, nil
}

// Options returns the judge's options.
func (j *Judge) Options() JudgeOptions { return j.opts }

// Passes of the judge, used in seed derivation.
const (
	passEval uint64 = iota + 1
	passExtra
	passProcess
)

// ErrInvalidJudgement is wrapped by errors of a judge that gave no valid
// reply within its retries.
var ErrInvalidJudgement = errors.New("sotopia: no valid judgement")

// ErrPromptTooLong is wrapped by a Completer whose model cannot take the
// prompt at all; the judge then records an invalid judgement without
// retrying.
var ErrPromptTooLong = errors.New("sotopia: judge prompt does not fit the judge model's context")

// complete asks for a completion until parse accepts it.
func (j *Judge) complete(ctx context.Context, pass, turn uint64, c Completion, parse func(string) error) (int, error) {
	var last error
	for attempt := range j.opts.Retries + 1 {
		c.Seed = seeds.Derive(j.opts.Seed, pass, turn, uint64(attempt))
		c.Temperature = j.opts.Temperature
		text, err := j.c.Complete(ctx, c)
		if errors.Is(err, ErrPromptTooLong) {
			return attempt + 1, fmt.Errorf("%w: %w", ErrInvalidJudgement, err)
		}
		if err != nil {
			return attempt + 1, fmt.Errorf("sotopia: judge: %w", err)
		}
		if last = parse(text); last == nil {
			return attempt + 1, nil
		}
	}
	return j.opts.Retries + 1, fmt.Errorf("%w after %d attempts: %v", ErrInvalidJudgement, j.opts.Retries+1, last)
}

func (j *Judge) maxTokens(bound int) int {
	if j.opts.MaxTokens > 0 {
		return j.opts.MaxTokens
	}
	return bound
}

// EvalCompletion is the completion for the SOTOPIA-EVAL pass over h.
func (j *Judge) EvalCompletion(h History) Completion {
	return Completion{
		System:    judgeSystem,
		Prompt:    scorePrompt(h, EvalDimensions, "Evaluate both agents on the following dimensions."),
		Grammar:   ScoreGrammar(EvalDimensions, j.opts.ReasoningChars),
		Schema:    ScoreSchema(EvalDimensions, j.opts.ReasoningChars),
		MaxTokens: j.maxTokens(maxScoreBytes(EvalDimensions, j.opts.ReasoningChars)),
	}
}

// ExtraCompletion is the completion for the extra-metrics pass over h.
func (j *Judge) ExtraCompletion(h History) Completion {
	return Completion{
		System:    judgeSystem,
		Prompt:    scorePrompt(h, ExtraDimensions, "Rate both agents' social strategy on the following dimensions (0..10 each)."),
		Grammar:   ScoreGrammar(ExtraDimensions, j.opts.ReasoningChars),
		Schema:    ScoreSchema(ExtraDimensions, j.opts.ReasoningChars),
		MaxTokens: j.maxTokens(maxScoreBytes(ExtraDimensions, j.opts.ReasoningChars)),
	}
}

// Evaluate runs the SOTOPIA-EVAL pass. An error wrapping
// ErrInvalidJudgement means every attempt was invalid.
func (j *Judge) Evaluate(ctx context.Context, h History) (*Evaluation, error) {
	ev := &Evaluation{Rubric: RubricVersion}
	n, err := j.complete(ctx, passEval, 0, j.EvalCompletion(h), func(text string) (err error) {
		ev.Agents, err = ParseScores(text, EvalDimensions)
		return err
	})
	ev.Attempts = n
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// EvaluateExtra runs the OMAR extra-metrics pass.
func (j *Judge) EvaluateExtra(ctx context.Context, h History) (*ExtraScores, error) {
	ex := &ExtraScores{Rubric: RubricVersion}
	n, err := j.complete(ctx, passExtra, 0, j.ExtraCompletion(h), func(text string) (err error) {
		ex.Agents, err = ParseScores(text, ExtraDimensions)
		return err
	})
	ex.Attempts = n
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// Score judges a finished episode and returns its outcome and terms. An
// invalid judgement is recorded (result "judge_invalid", zero rewards);
// only a failing completer or a done ctx return an error.
func (j *Judge) Score(ctx context.Context, h History) (engine.Outcome, Terms, error) {
	terms := h.Terms
	terms.Judge = j.opts.Label
	terms.Evaluation, terms.Extra, terms.Process, terms.JudgeError = nil, nil, nil, ""
	m := map[string]float64{"turns": float64(len(terms.Turns)), "judged": 0}
	out := engine.Outcome{Rewards: []float64{0, 0}, Result: "judge_invalid", Metrics: m}
	ev, err := j.Evaluate(ctx, h)
	switch {
	case errors.Is(err, ErrInvalidJudgement):
		terms.JudgeError = err.Error()
		m["judge_attempts"] = float64(j.opts.Retries + 1)
	case err != nil:
		return out, terms, err
	default:
		terms.Evaluation = ev
		out.Result = "judged"
		m["judged"] = 1
		m["judge_attempts"] = float64(ev.Attempts)
		for i, a := range ev.Agents {
			out.Rewards[i] = a.Reward(j.opts.Weights)
			p := fmt.Sprintf("agent_%d/", i+1)
			for _, d := range EvalDimensions {
				m[p+d.Key] = float64(a[d.Key].Score)
			}
			m[p+"overall"] = a.Overall()
			if a["goal"].Score >= 7 {
				m[p+"goal_success"] = 1
			} else {
				m[p+"goal_success"] = 0
			}
		}
	}
	if j.opts.Extra {
		ex, err := j.EvaluateExtra(ctx, h)
		switch {
		case errors.Is(err, ErrInvalidJudgement):
			m["extra_invalid"] = 1
		case err != nil:
			return out, terms, err
		default:
			terms.Extra = ex
			for i, a := range ex.Agents {
				for _, d := range ExtraDimensions {
					m[fmt.Sprintf("agent_%d/%s", i+1, d.Key)] = float64(a[d.Key].Score)
				}
			}
		}
	}
	if j.opts.Process {
		pt, err := j.ProcessRewards(ctx, h, out.Rewards)
		if err != nil {
			return out, terms, err
		}
		terms.Process = pt
		m["process_fallbacks"], m["process_invalid"] = 0, 0
		for _, p := range pt {
			if p.Fallback {
				m["process_fallbacks"]++
			}
			if !p.Valid {
				m["process_invalid"]++
			}
		}
	}
	out.Terms = terms
	return out, terms, nil
}
