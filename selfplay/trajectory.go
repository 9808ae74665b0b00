package selfplay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/seeds"
)

// Trajectory is one seat's token stream of one episode (one segment of it
// when the stream had to be restarted), with everything a trainer needs.
//
// Tokens is the whole stream: rendered prompts and observations
// interleaved with the model's replies. Mask is true only on the tokens the
// policy sampled (including the end-of-turn token when generation stopped
// there); those ids are exactly the sampled ids, never a re-tokenisation of
// decoded text.
type Trajectory struct {
	Env      string     `json:"env"`
	Episode  int        `json:"episode"`  // index of the episode in the run
	Seed     seeds.JSON `json:"seed"`     // the episode's seed, a decimal string in JSON (exact in JavaScript; numbers still read)
	Scenario string     `json:"scenario"` // scenario id: env + seed, the GRPO group key with Role
	Seat     int        `json:"seat"`
	SeatName string     `json:"seat_name"`
	Role     string     `json:"role"`
	Team     string     `json:"team,omitempty"`
	Agent    string     `json:"agent"`   // the label of the policy that played the seat
	Segment  int        `json:"segment"` // 0 unless the stream was restarted

	Tokens []int32 `json:"tokens"`
	Mask   Mask    `json:"mask"`
	// Logprobs are the behaviour log-probabilities (under the distribution
	// the token was sampled from), 0 off the mask.
	Logprobs []float32 `json:"logprobs"`
	// RawLogprobs are the untempered model log-probabilities, 0 off the mask.
	RawLogprobs []float32 `json:"raw_logprobs"`
	// Allowed are the sets of tokens the reply's grammar allowed, by index
	// in Tokens, at the generated positions where the backend recorded
	// one (inference.Response.Allowed: small sets only). With the
	// trainer's logprobs over "grammar" they are the distribution the
	// token is trained under (docs/learning.md#grammar-logprobs).
	Allowed map[int]inference.AllowedTokens `json:"allowed,omitempty"`
	// TurnEnds[k] is the index in Tokens of the last generated token of
	// turn k (the end-of-turn token when generation stopped there).
	TurnEnds []int `json:"turn_ends"`
	// TurnRewards[k] is an optional per-turn reward (process reward); zero
	// for games without shaping.
	TurnRewards []float64 `json:"turn_rewards"`
	// Reward is the seat's terminal reward.
	Reward float64 `json:"reward"`
	// ShapedTurns reports that TurnRewards are the environment's shaped
	// per-turn rewards that already include the terminal reward on the
	// seat's last turn (SOTOPIA's R̃_t = α·R_process,t + β·R_outcome); the
	// estimators then do not add Reward again.
	ShapedTurns bool `json:"shaped_turns,omitempty"`
	// InferAccuracy is the seat's INFER accuracy (InferAccuracy) when it
	// played the theory-of-mind trace in a game that knows the
	// counterpart's preferences, nil otherwise; with Options.InferReward
	// Reward includes its bonus.
	InferAccuracy *float64 `json:"infer_accuracy,omitempty"`
	// InferExact, AnticipateAccuracy and AnticipateExact are the seat's
	// other theory-of-mind trace scores (ToMScores: InferExact,
	// Anticipate, AnticipateExact), measured only; nil where not
	// measured.
	InferExact         *float64 `json:"infer_exact,omitempty"`
	AnticipateAccuracy *float64 `json:"anticipate_accuracy,omitempty"`
	AnticipateExact    *float64 `json:"anticipate_exact,omitempty"`
	// PolicyVersions[k] is the policy version that produced turn k.
	PolicyVersions []int `json:"policy_versions"`
	// TurnFlags[k] are the reasons a turn guard flagged turn k as
	// degenerate (empty for a sound turn); nil when no guard ran. The
	// estimators zero the credit of flagged turns (advantage.Sample.Flagged).
	TurnFlags [][]string `json:"turn_flags,omitempty"`

	// meta is what the guard needs of each turn; the runner drops it
	// before the trajectory leaves it.
	meta []turnMeta
}

// turnMeta is the part of a turn that is not in the token stream.
type turnMeta struct {
	notification engine.Notification
	text         string
	stop         inference.StopReason
	maxTokens    int
	eog          bool // the turn's last token is the end-of-turn token
}

// Flagged reports whether turn k was flagged by a guard.
func (t *Trajectory) Flagged(k int) bool { return k < len(t.TurnFlags) && len(t.TurnFlags[k]) > 0 }

// flags returns advantage.Sample.Flagged: nil when no guard ran.
func (t *Trajectory) flags() []bool {
	if t.TurnFlags == nil {
		return nil
	}
	out := make([]bool, len(t.TurnEnds))
	for k := range out {
		out[k] = t.Flagged(k)
	}
	return out
}

// SampleOf turns a trajectory (and the critic's values for it, or nil)
// into an estimator sample.
func SampleOf(t *Trajectory, values []float32) advantage.Sample {
	return advantage.Sample{
		Mask: t.Mask, Values: values, TurnEnds: t.TurnEnds, TurnRewards: t.TurnRewards,
		Reward: t.Reward, ShapedTurns: t.ShapedTurns, Group: t.Group(), Env: t.Env, Role: t.Role,
		Flagged: t.flags(),
	}
}

// Group is the GRPO group of the trajectory: same scenario and role.
func (t *Trajectory) Group() string { return t.Scenario + "/" + t.Role }

// Generated returns the number of tokens on the mask.
func (t *Trajectory) Generated() int {
	n := 0
	for _, m := range t.Mask {
		if m {
			n++
		}
	}
	return n
}

// Validate checks the invariants a trainer relies on.
func (t *Trajectory) Validate() error {
	n := len(t.Tokens)
	if len(t.Mask) != n || len(t.Logprobs) != n || len(t.RawLogprobs) != n {
		return fmt.Errorf("selfplay: trajectory %s seat %d: tokens %d, mask %d, logprobs %d, raw logprobs %d",
			t.Scenario, t.Seat, n, len(t.Mask), len(t.Logprobs), len(t.RawLogprobs))
	}
	if len(t.TurnRewards) != len(t.TurnEnds) || len(t.PolicyVersions) != len(t.TurnEnds) {
		return fmt.Errorf("selfplay: trajectory %s seat %d: %d turns, %d turn rewards, %d policy versions",
			t.Scenario, t.Seat, len(t.TurnEnds), len(t.TurnRewards), len(t.PolicyVersions))
	}
	if t.TurnFlags != nil && len(t.TurnFlags) != len(t.TurnEnds) {
		return fmt.Errorf("selfplay: trajectory %s seat %d: %d turns, %d turn flags", t.Scenario, t.Seat, len(t.TurnEnds), len(t.TurnFlags))
	}
	for k, fl := range t.TurnFlags {
		for _, r := range fl {
			if r == "" {
				return fmt.Errorf("selfplay: trajectory %s seat %d: turn %d has an empty flag", t.Scenario, t.Seat, k)
			}
		}
	}
	for i, id := range t.Tokens {
		// A negative id would index before a model's embedding table.
		if id < 0 {
			return fmt.Errorf("selfplay: trajectory %s seat %d: token %d has id %d < 0", t.Scenario, t.Seat, i, id)
		}
	}
	prev := -1
	for k, e := range t.TurnEnds {
		if e <= prev || e >= n {
			return fmt.Errorf("selfplay: trajectory %s seat %d: turn %d ends at %d (previous %d, %d tokens)",
				t.Scenario, t.Seat, k, e, prev, n)
		}
		if !t.Mask[e] {
			return fmt.Errorf("selfplay: trajectory %s seat %d: turn %d ends on an unmasked token", t.Scenario, t.Seat, k)
		}
		prev = e
	}
	for i, m := range t.Mask {
		if !m && (t.Logprobs[i] != 0 || t.RawLogprobs[i] != 0) {
			return fmt.Errorf("selfplay: trajectory %s seat %d: logprob at unmasked token %d", t.Scenario, t.Seat, i)
		}
		if m && i > prev {
			return fmt.Errorf("selfplay: trajectory %s seat %d: masked token %d after the last turn end", t.Scenario, t.Seat, i)
		}
	}
	return t.validateAllowed()
}

// validateAllowed checks that every recorded grammar set is at a generated
// position, increasing, and holds the token sampled there: a trainer
// renormalising over a set without it would train on a token of
// probability 0.
func (t *Trajectory) validateAllowed() error {
	for i, a := range t.Allowed {
		if i < 0 || i >= len(t.Tokens) || !t.Mask[i] {
			return fmt.Errorf("selfplay: trajectory %s seat %d: a grammar set at %d, not a generated token", t.Scenario, t.Seat, i)
		}
		if len(a.IDs) == 0 || !slices.IsSorted(a.IDs) {
			return fmt.Errorf("selfplay: trajectory %s seat %d: the grammar set at %d is empty or unsorted", t.Scenario, t.Seat, i)
		}
		if _, ok := slices.BinarySearch(a.IDs, t.Tokens[i]); !ok {
			return fmt.Errorf("selfplay: trajectory %s seat %d: token %d (id %d) is not in its grammar set", t.Scenario, t.Seat, i, t.Tokens[i])
		}
	}
	return nil
}

// AllowedIDs returns the recorded grammar sets by position, nil without
// any: train.Sequence.Allowed.
func (t *Trajectory) AllowedIDs() map[int][]int32 {
	if len(t.Allowed) == 0 {
		return nil
	}
	out := make(map[int][]int32, len(t.Allowed))
	for i, a := range t.Allowed {
		out[i] = a.IDs
	}
	return out
}

// SampledLogprobs returns the sampler's untempered log-probabilities of the
// generated tokens: RawLogprobs, or with overGrammar each renormalised
// over its recorded grammar set (RawLogprobs − LogMass), what a trainer
// computing logprobs over the grammar's sets recomputes.
func (t *Trajectory) SampledLogprobs(overGrammar bool) []float32 {
	if !overGrammar || len(t.Allowed) == 0 {
		return t.RawLogprobs
	}
	out := slices.Clone(t.RawLogprobs)
	for i, a := range t.Allowed {
		if i >= 0 && i < len(out) {
			out[i] -= a.LogMass
		}
	}
	return out
}

// TurnSpans returns [start, end] (inclusive) of the generated tokens of
// each turn: the masked tokens after the previous turn's end up to and
// including TurnEnds[k].
func (t *Trajectory) TurnSpans() [][2]int {
	spans := make([][2]int, len(t.TurnEnds))
	prev := -1
	for k, e := range t.TurnEnds {
		s := e
		for s-1 > prev && t.Mask[s-1] {
			s--
		}
		spans[k] = [2]int{s, e}
		prev = e
	}
	return spans
}

// Mask marks the generated tokens of a stream. It is encoded in JSON as a
// string of '0' and '1', one character per token, which keeps trajectory
// files readable and small.
type Mask []bool

// MarshalJSON encodes m as a 0/1 string.
func (m Mask) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(m)+2)
	b = append(b, '"')
	for _, v := range m {
		if v {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	return append(b, '"'), nil
}

// UnmarshalJSON decodes a 0/1 string.
func (m *Mask) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("selfplay: mask: %w", err)
	}
	out := make(Mask, len(s))
	for i := range len(s) {
		switch s[i] {
		case '0':
		case '1':
			out[i] = true
		default:
			return fmt.Errorf("selfplay: mask: character %q at %d, want 0 or 1", s[i], i)
		}
	}
	*m = out
	return nil
}

// TrajectoryWriter writes trajectories as JSONL, one per line, through a
// jsonl.Writer: over a file, a failed write is cut back to the last whole
// line.
type TrajectoryWriter struct {
	w *jsonl.Writer
}

// NewTrajectoryWriter returns a writer on w. Call Flush at the end.
func NewTrajectoryWriter(w io.Writer) *TrajectoryWriter {
	return &TrajectoryWriter{w: jsonl.NewWriter(w)}
}

// Write appends one trajectory.
func (tw *TrajectoryWriter) Write(t *Trajectory) error {
	if err := tw.w.Write(t); err != nil {
		return fmt.Errorf("selfplay: write trajectory: %w", err)
	}
	return nil
}

// Flush writes buffered lines.
func (tw *TrajectoryWriter) Flush() error { return tw.w.Flush() }

// ReadTrajectories reads a JSONL file of trajectories, one per line, and
// validates each. An unterminated last line that is not JSON is what a
// killed writer leaves: it is skipped, as the trajectories before it are
// whole (jsonl.Read); a bad line anywhere else is an error naming it.
func ReadTrajectories(r io.Reader) ([]Trajectory, error) {
	var out []Trajectory
	_, err := jsonl.Read(r, "trajectories", 0, func(l jsonl.Line) error {
		dec := json.NewDecoder(bytes.NewReader(l.Bytes))
		dec.DisallowUnknownFields()
		var t Trajectory
		if err := dec.Decode(&t); err != nil {
			return err
		}
		if dec.More() {
			return errors.New("more than one JSON value on the line")
		}
		if err := t.Validate(); err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("selfplay: %w", err)
	}
	return out, nil
}

// setToM records the seat's theory-of-mind trace scores; each trajectory
// gets its own copies, as the scores' pointers are shared otherwise.
func (t *Trajectory) setToM(s ToMScores) {
	t.InferAccuracy = cloneScore(s.Infer)
	t.InferExact = cloneScore(s.InferExact)
	t.AnticipateAccuracy = cloneScore(s.Anticipate)
	t.AnticipateExact = cloneScore(s.AnticipateExact)
}

func cloneScore(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
