// Package selfplay is OMAR's rollout half: one policy plays every seat of
// many concurrent episodes, each seat through its own append-only token
// stream rendered with the model's chat template, and every seat's stream
// becomes a Trajectory (token ids exactly as sampled, a mask over the
// generated tokens, behaviour log-probabilities, turn boundaries and
// rewards). Advantage estimators (hierarchical, gae, turn_gae, grpo, rae,
// reinforce) share one input type and a registry. A TurnGuard (the
// rule-based RuleGuard, or an LLM judge supplied by the caller) flags
// degenerate turns after each episode; the estimators zero their credit.
//
// The package imports engine and inference but no concrete backend: the
// caller supplies an inference.Backend and its inference.Tokenizer.
package selfplay
