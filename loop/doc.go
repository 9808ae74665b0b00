// Package loop owns a training run: the one path from a sampled token to
// the PPO loss. It joins rollouts (package selfplay) and updates (package
// train), so neither imports the other, and it is what the command line,
// and any Go program, drives:
//
//	Options (YAML: config.yaml)            Hooks (progress, logs, plots)
//	      │                                      ▲
//	      ▼                                      │
//	Open ─► Run.Step, once per iteration:
//	  1. rollout   selfplay.Runner plays rollout.episodes episodes with the
//	               policy on its seats; the llama backend batches every
//	               seat of every episode in flight. Each policy seat yields
//	               a Trajectory: its exact token ids, the mask of the ids
//	               it sampled and their behaviour logprobs.
//	  2. score     Sequences (the one trajectory → train.Sequence bridge,
//	               also used by bc) → Trainer.Evaluate: values, current
//	               and reference (adapter-off) logprobs per sequence.
//	  3. estimate  the advantage estimator (hierarchical by default) turns
//	               rewards and values into per-token advantages and returns.
//	  4. update    Trainer.Step: PPO epochs over the sequences, whose
//	               RefLogprobs come from step 2 (no second reference pass).
//	  5. swap      the adapter is written as a LoRA GGUF and hot-swapped
//	               into the sampling backend (a new policy version).
//	  6. metrics   one line of metrics.jsonl; a checkpoint (trainer state,
//	               optimizer moments, RNG, estimator baselines, scenario
//	               cursor, output file lengths) every checkpoint_every
//	               iterations, at the end and on interrupt.
//
// A run directory holds config.yaml, model.gguf (generated when no model
// is given), metrics.jsonl, episodes.jsonl, trajectories.jsonl (with
// save_trajectories), adapter.gguf and checkpoint/. Resume reads
// config.yaml back (ReadConfig) and continues bit-identically: the same
// seed gives the same metrics (timings aside) and the same adapter bytes
// whether or not the run was interrupted.
//
// Rollout (no training) is here too, on the same options. Built on these
// parts, and never imported by this package: behaviour cloning, SFT and
// the built-in model's build (package bc); Cascade RL and distillation,
// loops over runs (package recipes). The SOTOPIA judge's adapter over a
// backend is package judge; the names of a run directory's files and its
// metrics lines are package runfiles.
package loop
