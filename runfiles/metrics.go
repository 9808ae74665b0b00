package runfiles

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/internal/jsonl"
)

// Metrics are one iteration of a run: one line of metrics.jsonl.
// Everything but Seconds, TokensPerSec and MeanBatch is reproducible from
// the seed.
type Metrics struct {
	Iteration int `json:"iteration"`
	Episodes  int `json:"episodes"`
	Cursor    int `json:"cursor"`
	// Staleness is the mean number of policy versions the episodes lagged
	// behind the policy they train (cluster runs with staleness > 0);
	// StalenessMax the largest lag.
	Staleness    float64 `json:"staleness,omitempty"`
	StalenessMax int     `json:"staleness_max,omitempty"`
	// Reward is the mean terminal reward per role; RewardMean over seats.
	Reward     map[string]float64 `json:"reward"`
	RewardMean float64            `json:"reward_mean"`
	// InvalidRate is the share of actions the engine rejected; DefaultRate
	// the share of decisions that fell back to the inert default.
	InvalidRate float64 `json:"invalid_rate"`
	DefaultRate float64 `json:"default_rate"`
	Turns       int64   `json:"turns"`
	// DegenerateRate is the share of the policy's turns the turn guard
	// flagged (their credit is zeroed); DegenerateTurns their number and
	// Degenerate the flags per reason. All 0 when the guard is off.
	DegenerateRate  float64        `json:"degenerate_rate"`
	DegenerateTurns int            `json:"degenerate_turns"`
	Degenerate      map[string]int `json:"degenerate,omitempty"`

	PolicyLoss float64 `json:"policy_loss"`
	ValueLoss  float64 `json:"value_loss"`
	KL         float64 `json:"kl"`
	Entropy    float64 `json:"entropy"`
	ClipFrac   float64 `json:"clip_frac"`
	GradNorm   float64 `json:"grad_norm"`
	// KLRef is the mean log π − log π_base over generated tokens before the
	// update (from the scoring pass).
	KLRef float64 `json:"kl_ref"`
	// LogprobGap is the mean |behaviour raw logprob − trainer logprob| over
	// generated tokens: how well inference and training agree.
	LogprobGap    float64 `json:"logprob_gap"`
	AdvantageMean float64 `json:"advantage_mean"`
	AdvantageStd  float64 `json:"advantage_std"`
	ValueMean     float64 `json:"value_mean"`

	GeneratedTokens int64 `json:"generated_tokens"`
	SequenceTokens  int   `json:"sequence_tokens"`
	TrainedTokens   int   `json:"trained_tokens"`
	OptimizerSteps  int   `json:"optimizer_steps"`

	// Eval is the held-out mean reward per side of the policy after this
	// iteration, EvalMean over every pairing (eval.jsonl has the
	// intervals); absent when no evaluation was due.
	Eval     map[string]float64 `json:"eval,omitempty"`
	EvalMean float64            `json:"eval_mean,omitempty"`

	// League is the policy's record against each opponent of the league
	// in this iteration ("self": the self-play episodes).
	League map[string]*LeagueStat `json:"league,omitempty"`

	// Seconds per phase and tokens/s per phase; they vary between runs.
	Seconds      map[string]float64 `json:"seconds"`
	TokensPerSec map[string]float64 `json:"tokens_per_s"`
	// MeanBatch is the mean number of sequences the policy backend
	// sampled per decode step during the rollout (its occupancy; it
	// depends on timing).
	MeanBatch float64 `json:"mean_batch"`
	// TrainThreads is the trainer's CPU thread count in this iteration
	// (train.threads, or with 0 the cores free during the rollout).
	TrainThreads int `json:"train_threads,omitempty"`
}

// ReadMetrics reads a run's metrics.jsonl. A torn last line (a kill
// mid-write; resume cuts it) is left out; any other bad line is an error
// naming it.
func ReadMetrics(path string) ([]Metrics, error) {
	var ms []Metrics
	_, err := jsonl.ReadFile(path, 0, func(l jsonl.Line) error {
		var m Metrics
		if err := json.Unmarshal(l.Bytes, &m); err != nil {
			return err
		}
		ms = append(ms, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Line is the one-line summary of an iteration of a run of total
// iterations: the reward per role, the drift and loss figures and the
// time it took (the staleness, when episodes lagged).
func (m *Metrics) Line(total int) string {
	roles := make([]string, 0, len(m.Reward))
	for r := range m.Reward {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = fmt.Sprintf("%s %.3f", r, m.Reward[r])
	}
	s := fmt.Sprintf("iteration %d/%d: reward %s; kl_ref %.3f, value loss %.4f, clip %.2f, degenerate %.2f; %.1fs",
		m.Iteration, total, strings.Join(parts, ", "), m.KLRef, m.ValueLoss, m.ClipFrac, m.DegenerateRate, m.Seconds["iteration"])
	if m.StalenessMax > 0 {
		s += fmt.Sprintf(" (staleness %.2f, max %d)", m.Staleness, m.StalenessMax)
	}
	return s
}

// LeagueStat is the policy's record against one opponent in an
// iteration.
type LeagueStat struct {
	Episodes int     `json:"episodes"`
	Reward   float64 `json:"reward"` // the policy's mean reward
}
