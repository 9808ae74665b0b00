package loop

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/internal/errclip"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/model/builtin"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/sotopia"
	"github.com/omar-selfplay/omar/train"
)

// Options configure a training run. They are the YAML of
// `omar selfplay --config` and of a run directory's config.yaml; a config
// file is decoded onto Defaults(), so a key left out keeps its default.
type Options struct {
	// Iterations of rollout → score → estimate → update → swap.
	Iterations int `yaml:"iterations"`
	// Rollout configures the episodes of one iteration (episodes is per
	// iteration; first_episode is ignored: the run keeps a cursor).
	Rollout RolloutOptions `yaml:"rollout"`
	// ModelPreset and ModelArch name the model written into the run
	// directory when rollout.model is empty: "builtin" (the built-in
	// model, package model/builtin) or a random model of package model
	// ("tiny", "base", "small").
	ModelPreset string `yaml:"model_preset"`
	ModelArch   string `yaml:"model_arch"`
	// Estimator names an advantage estimator; EstimatorParams tune it.
	Estimator       string           `yaml:"estimator"`
	EstimatorParams advantage.Params `yaml:"estimator_params"`
	Train           train.Options    `yaml:"train"`
	// CheckpointEvery writes a checkpoint every n iterations (and always
	// at the end and on interrupt).
	CheckpointEvery int `yaml:"checkpoint_every"`
	// SaveTrajectories appends every iteration's trajectories to
	// trajectories.jsonl in the run directory.
	SaveTrajectories bool `yaml:"save_trajectories"`
	// EarlyStop ends the run when the policy drifts (a reward-hacking
	// guard); zero thresholds are off.
	EarlyStop EarlyStop `yaml:"early_stop"`
	// Eval is the held-out evaluation every eval.every iterations (off
	// by default); the best adapter by it is kept in best/.
	Eval EvalOptions `yaml:"eval"`
	// League draws the policy's opponents from a pool (off by default:
	// the policy plays every seat).
	League LeagueOptions `yaml:"league"`
	// Cluster plays the rollouts on workers that take their work from a
	// NATS server (off by default: this process plays them).
	Cluster ClusterOptions `yaml:"cluster"`
	// Logging writes the metrics in other formats too (TensorBoard).
	Logging LoggingOptions `yaml:"logging"`
}

// EarlyStop are the drift thresholds of a run.
type EarlyStop struct {
	// MaxKLRef stops when kl_ref (log π − log π_base on the generated
	// tokens) exceeds it.
	MaxKLRef float64 `yaml:"max_kl_ref"`
	// MinEntropyRatio stops when the update's entropy falls below this
	// fraction of the first iteration's.
	MinEntropyRatio float64 `yaml:"min_entropy_ratio"`
}

// reason returns why the run should stop after metrics m, or "".
func (c EarlyStop) reason(firstEntropy float64, m *runfiles.Metrics) string {
	if c.MaxKLRef > 0 && m.KLRef > c.MaxKLRef {
		return fmt.Sprintf("kl_ref %.3f > max_kl_ref %.3f", m.KLRef, c.MaxKLRef)
	}
	if c.MinEntropyRatio > 0 && firstEntropy > 0 && m.Entropy < c.MinEntropyRatio*firstEntropy {
		return fmt.Sprintf("entropy %.3f < %.2f × the first iteration's %.3f", m.Entropy, c.MinEntropyRatio, firstEntropy)
	}
	return ""
}

// DefaultEnv is the environment of the built-in run: Job Interview, the
// game where league self-play from the built-in model gains on held-out
// deals at every seed measured (CaSiNo, the default with the previous
// built-in model, gains more than +0.003 at two seeds of five from this
// one; docs/selfplay.md).
const DefaultEnv = "jobinterview"

// BuiltinPreset is the model_preset of the built-in model (package
// model/builtin); the other presets generate random models (package
// model).
const BuiltinPreset = "builtin"

// Defaults returns the built-in run (`make run`): the built-in model
// (trained from scratch on the scripted policies' play, written into the
// run directory), 30 iterations of Job Interview in structured-move mode with 4
// turns per seat, the compact texts with hints and grammar-constrained
// replies (a few minutes on 2 idle cores, docs/selfplay.md), a league (the policy against the
// naive and strategic scripts, the frozen base and its own snapshots, 20%
// pure self-play), a held-out evaluation before the first iteration and
// after every tenth, the hierarchical estimator, LoRA rank 8.
func (Options) Defaults() Options {
	r := RolloutOptions{}.Defaults()
	r.Env = DefaultEnv
	r.Episodes, r.Parallel = 16, 8
	// The corpus the built-in model learnt from was rendered with these
	// (bc.DefaultBuild).
	r.MaxTokens, r.Context = 64, 4096
	retries := 1
	r.MaxRetries = &retries
	r.KVCache = "f32"
	t := train.Options{}.Defaults()
	t.LR, t.ValueLR = 1e-3, 1e-3
	t.Threads = 0 // the cores free during the rollout (TrainThreads)
	league := DefaultLeague()
	league.Enabled = true
	eval := DefaultEval()
	// Each evaluation costs about a training iteration and a half: every
	// tenth keeps make run within 10 minutes on a slow 2-core machine and
	// leaves the training itself unchanged (docs/selfplay.md).
	eval.Every = 10
	return Options{
		Iterations:      30,
		Rollout:         r,
		ModelPreset:     BuiltinPreset,
		ModelArch:       "llama",
		Estimator:       advantage.Default,
		EstimatorParams: advantage.Params{}.Defaults(),
		Train:           t,
		CheckpointEvery: 1,
		Eval:            eval,
		League:          league,
		Cluster:         DefaultCluster(),
	}
}

// applyEnvDefaults gives the rollout environment, when a config names it
// without parameters, the built-in model's (BuiltinParams): for the
// default environment, and for every negotiation game the built-in model
// plays, since it learnt them in that mode (a YAML map would merge into a
// default map, so they are applied after decoding).
//
// The league's scripted opponents and the evaluation's opponents, when
// they are the defaults (the negotiation games' naive and strategic
// scripts) and the environment has no such scripts, become the
// environment's own (arena.DefaultScripts): `omar selfplay --env werewolf`
// plays the heuristic Werewolf policy instead of failing to find "naive".
func (o *Options) applyEnvDefaults() {
	builtin := o.Rollout.Model == "" && o.ModelPreset == BuiltinPreset
	if o.Rollout.Params == nil && (o.Rollout.Env == DefaultEnv || builtin) {
		o.Rollout.Params = BuiltinEnvParams(o.Rollout.Env)
	}
	g, err := envs.Find(o.Rollout.Env)
	if err != nil {
		return // Validate names the unknown environment
	}
	if slices.Equal(o.League.Scripted, DefaultLeague().Scripted) && !arena.HasScripts(g, o.League.Scripted...) {
		o.League.Scripted = arena.DefaultScripts(g)
	}
	if slices.Equal(o.Eval.Opponents, DefaultEval().Opponents) {
		o.Eval.Opponents = arena.DefaultOpponents([]string{o.Rollout.Env})
	}
}

// BuiltinParams are the negotiation games' parameters the built-in model
// is trained and played with: structured moves only (no free-text SAY
// lines), 4 turns per seat, short enough for a small model, and the
// compact texts (a seat stream about a third as long, so the corpus, the
// rollouts and the PPO passes cost less) with their hints (the standing
// offer's worth to the seat, preferences best first), which raised the
// held-out reward over the same recipe without them (docs/models.md, the
// built-in model).
func BuiltinParams() map[string]any {
	return map[string]any{"structured_only": true, "rounds": 4, "compact": true, "hints": true}
}

// BuiltinEnvParams are the parameters the built-in model plays env with
// when none are given: BuiltinParams for a negotiation game (env with or
// without its version), nil for the others.
func BuiltinEnvParams(env string) map[string]any {
	if name, _ := engine.SplitID(env); slices.Contains(envs.Negotiation, name) {
		return BuiltinParams()
	}
	return nil
}

// WithBuiltinParams gives the environments of an evaluation of model
// that have no parameters the built-in model's (BuiltinEnvParams) when
// model is the built-in model or a run directory's copy of it: it plays
// the negotiation games in the mode it learnt them in.
func WithBuiltinParams(model string, envs []arena.Env) {
	if model == "" || !builtin.Is(model) {
		return
	}
	for i := range envs {
		if envs[i].Params == nil {
			envs[i].Params = BuiltinEnvParams(envs[i].Name)
		}
	}
}

// BuiltinParamsByGame are the parameters the built-in model learnt each
// game of catalog in (BuiltinEnvParams), by the game's name without its
// version, for the games that have them, when model is the built-in model
// or a run directory's copy of it; nil for another model.
func BuiltinParamsByGame(model string, catalog []engine.Game) map[string]engine.Params {
	if model == "" || !builtin.Is(model) {
		return nil
	}
	out := map[string]engine.Params{}
	for _, g := range catalog {
		if p := BuiltinEnvParams(g.ID()); p != nil {
			name, _ := engine.SplitID(g.ID())
			out[name] = p
		}
	}
	return out
}

// MaxCount bounds a run's iterations and episodes, and the counts of the
// corpora and recipes built on runs, so that cursors and counters never
// overflow (a config's 9e18 is a typo, not a plan).
const MaxCount = 1 << 31

// Validate reports the first invalid field, by its YAML name.
func (o *Options) Validate() error { return errclip.Clip(o.validate()) }

// validate is Validate before its message is bounded (a config value
// echoed in it may be megabytes).
func (o *Options) validate() error {
	switch {
	case o.Iterations < 1 || o.Iterations > MaxCount:
		return fmt.Errorf("iterations %d: want 1..%d", o.Iterations, MaxCount)
	case o.CheckpointEvery < 1 || o.CheckpointEvery > MaxCount:
		return fmt.Errorf("checkpoint_every %d: want 1..%d", o.CheckpointEvery, MaxCount)
	case o.Rollout.Env == "":
		return errors.New("no environment (rollout.env)")
	case o.Rollout.Model == "" && o.ModelPreset != BuiltinPreset && !slices.Contains(model.Presets, o.ModelPreset):
		return fmt.Errorf("model_preset %q: want %s or one of %v", o.ModelPreset, BuiltinPreset, model.Presets)
	}
	if err := o.Rollout.Validate(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	if err := o.EstimatorParams.Validate(); err != nil {
		return fmt.Errorf("estimator_params: %w", err)
	}
	if _, err := advantage.New(o.Estimator, o.EstimatorParams); err != nil {
		return fmt.Errorf("estimator: %w", err)
	}
	if g := o.Rollout.GroupSize; g > 1 && o.Rollout.Episodes%g != 0 {
		// A group split across iterations would be scored in parts (a
		// part of one gets no GRPO advantage at all).
		return fmt.Errorf("rollout.episodes %d is not a multiple of rollout.group_size %d", o.Rollout.Episodes, g)
	}
	if o.Iterations*o.Rollout.Episodes > MaxCount || o.Iterations*o.Rollout.Episodes < 0 {
		return fmt.Errorf("iterations × rollout.episodes = %d × %d: more than %d episodes", o.Iterations, o.Rollout.Episodes, MaxCount)
	}
	if !finite(o.EarlyStop.MaxKLRef) || !finite(o.EarlyStop.MinEntropyRatio) || o.EarlyStop.MaxKLRef < 0 || o.EarlyStop.MinEntropyRatio < 0 || o.EarlyStop.MinEntropyRatio >= 1 {
		return fmt.Errorf("early_stop: max_kl_ref %v must be ≥ 0 and min_entropy_ratio %v in [0, 1)", o.EarlyStop.MaxKLRef, o.EarlyStop.MinEntropyRatio)
	}
	if err := ValidateTrain(o.Train); err != nil {
		return err
	}
	if err := o.Eval.Validate(); err != nil {
		return err
	}
	if err := o.Cluster.Validate(); err != nil {
		return err
	}
	return o.League.Validate()
}

// ValidateTrain adds the checks train.Options.Validate leaves to its
// callers' configs (non-finite numbers) and prefixes the section name:
// the train section of a run, of SFT and of the built-in model's build.
func ValidateTrain(t train.Options) error {
	for _, f := range []struct {
		name string
		v    float32
	}{
		{"lora_alpha", t.LoRAAlpha}, {"lr", t.LR}, {"value_lr", t.ValueLR}, {"weight_decay", t.WeightDecay},
		{"clip_eps", t.ClipEps}, {"value_clip", t.ValueClip}, {"value_coef", t.ValueCoef}, {"kl_coef", t.KLCoef},
		{"entropy_coef", t.EntropyCoef}, {"target_kl", t.TargetKL}, {"max_grad_norm", t.MaxGradNorm},
	} {
		if !finite(float64(f.v)) {
			return fmt.Errorf("train.%s %v: want a finite number", f.name, f.v)
		}
	}
	if t.Threads == 0 { // a run's default: sized to the free cores
		t.Threads = 1
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// RolloutOptions are the YAML form of a rollout: `omar rollout --config`
// and the rollout section of a run.
type RolloutOptions struct {
	Env          string         `yaml:"env"`
	Params       map[string]any `yaml:"params"`
	Episodes     int            `yaml:"episodes"`
	FirstEpisode int            `yaml:"first_episode"`
	Parallel     int            `yaml:"parallel"`
	GroupSize    int            `yaml:"group_size"`
	Seed         uint64         `yaml:"seed"`

	// Model is the policy's GGUF file; empty when every seat is scripted
	// (a run generates one).
	Model       string `yaml:"model"`
	Adapter     string `yaml:"adapter"`
	FrozenModel string `yaml:"frozen_model"`
	// Agents maps a seat name, "seat<N>", a role or "*" to a player spec
	// (players.Parse): policy (trained), frozen, scripted[:NAME], or a
	// player that plays but is never trained: base, adapter:PATH,
	// model:PATH, ollama:MODEL (an Ollama model at ollama_host, played at
	// the message level).
	Agents map[string]string `yaml:"agents"`

	// Reply is how model seats reply (max_tokens, context,
	// min_reply_tokens, temperature, top_k, top_p, min_p, grammar,
	// max_legal, trace): the evaluations play the policy with it too.
	selfplay.Reply `yaml:",inline"`

	BatchWindowMS float64 `yaml:"batch_window_ms"`
	// FreeSchedule lets the llama backend decode requests as they arrive
	// instead of on the deterministic schedule (selfplay.Options).
	FreeSchedule bool `yaml:"free_schedule"`
	MaxRetries   *int `yaml:"max_retries"`
	// InferReward, with trace: tom, adds infer_reward × the seat's INFER
	// accuracy (selfplay.InferAccuracy: how well the INFER line names the
	// counterpart's private preferences) to its reward in the negotiation
	// games that know them; 0 (the default) is off.
	InferReward float64 `yaml:"infer_reward"`

	// Guard flags degenerate turns (a reward-hacking guard: the
	// estimators zero their credit); guard: {enabled: false} turns it off.
	// Keys left out of a guard section keep their defaults.
	Guard *selfplay.GuardOptions `yaml:"guard"`

	// Judge gives environments that take one (SOTOPIA) an LLM judge.
	Judge *JudgeOptions `yaml:"judge,omitempty"`
	// JudgeModel, JudgeProcess and JudgeContext are the older spelling of
	// judge: {model, process, context}, still read.
	JudgeModel   string `yaml:"judge_model,omitempty"`
	JudgeProcess bool   `yaml:"judge_process,omitempty"`
	JudgeContext int    `yaml:"judge_context,omitempty"`

	// Backend opens the rollout's backends: threads, contexts, gpu_layers,
	// kv_cache, llama_lib (machine-specific; the CLI fills it from
	// --llama-lib or OMAR_LLAMA_LIB), ollama_host. Contexts is the number
	// of llama contexts over the model, each decoding its share of the
	// episodes on threads threads: 0 (the default) lets a run choose
	// (AutoContexts) and record the choice in its config.yaml; elsewhere
	// it is 1. The transcripts depend on it, not on the machine.
	players.Backend `yaml:",inline"`
}

// Defaults returns the rollout defaults: 16 episodes, selfplay.Options'
// runner defaults, one thread (on a busy 2-core machine llama.cpp's second
// thread spin-waits for a core, and a rollout of the tiny model ran 25×
// slower with 2 threads than with 1: 17.8 s against 0.7 s), an F16 KV
// cache and the rule-based turn guard.
func (RolloutOptions) Defaults() RolloutOptions {
	d := selfplay.Options{}.Defaults()
	retries := d.Engine.MaxRetries
	guard := selfplay.GuardOptions{}.Defaults()
	return RolloutOptions{
		Episodes: 16, Parallel: d.Parallel, GroupSize: d.GroupSize, Seed: d.Seed,
		Reply: d.Reply, MaxRetries: &retries,
		Guard: &guard, Backend: players.Backend{Threads: 1, KVCache: "f16"},
	}
}

// Validate reports the first invalid field, by its YAML name.
func (c *RolloutOptions) Validate() error { return errclip.Clip(c.validate()) }

func (c *RolloutOptions) validate() error {
	switch {
	case c.Episodes < 1 || c.Episodes > MaxCount:
		return fmt.Errorf("episodes %d: want 1..%d", c.Episodes, MaxCount)
	case c.FirstEpisode < 0 || c.FirstEpisode > MaxCount:
		return fmt.Errorf("first_episode %d: want 0..%d", c.FirstEpisode, MaxCount)
	case c.Parallel < 1 || c.Parallel > 4096:
		return fmt.Errorf("parallel %d: want 1..4096", c.Parallel)
	case c.GroupSize < 1 || c.GroupSize > MaxCount:
		return fmt.Errorf("group_size %d: want ≥ 1", c.GroupSize)
	case c.MaxTokens < 1 || c.MaxTokens > 1<<20:
		return fmt.Errorf("max_tokens %d: want 1..%d", c.MaxTokens, 1<<20)
	case c.Context < 1 || c.Context > 1<<24:
		return fmt.Errorf("context %d: want 1..%d", c.Context, 1<<24)
	case c.MinReplyTokens < 1:
		return fmt.Errorf("min_reply_tokens %d < 1", c.MinReplyTokens)
	case c.MinReplyTokens > c.MaxTokens && c.MinReplyTokens != selfplay.DefaultMinReplyTokens:
		// The default stays clamped to max_tokens (RunnerOptions): saved
		// configs hold it beside max_tokens: 8.
		return fmt.Errorf("min_reply_tokens %d > max_tokens %d: a reply never gets more than max_tokens; set it to at most %d", c.MinReplyTokens, c.MaxTokens, c.MaxTokens)
	case c.Threads < 1 || c.Threads > cpuuse.MaxThreads():
		return fmt.Errorf("threads %d: want 1..%d (%d per core of this machine)", c.Threads, cpuuse.MaxThreads(), cpuuse.ThreadsPerCore)
	case c.Contexts < 0 || c.Contexts > c.Parallel:
		return fmt.Errorf("contexts %d: want 0 (automatic) .. parallel (%d)", c.Contexts, c.Parallel)
	case c.GPULayers < -1:
		return fmt.Errorf("gpu_layers %d: want -1 (all), 0 (none) or a layer count", c.GPULayers)
	case !finite(c.BatchWindowMS) || c.BatchWindowMS < 0 || c.BatchWindowMS > 60_000:
		return fmt.Errorf("batch_window_ms %v: want 0..60000", c.BatchWindowMS)
	case c.MaxRetries != nil && (*c.MaxRetries < 0 || *c.MaxRetries > 1000):
		return fmt.Errorf("max_retries %d: want 0..1000", *c.MaxRetries)
	case c.JudgeContext < 0:
		return fmt.Errorf("judge_context %d < 0", c.JudgeContext)
	case c.Trace != "" && !slices.Contains(selfplay.Traces, c.Trace):
		return fmt.Errorf("trace %q: want one of %v (or none)", c.Trace, selfplay.Traces)
	case c.MaxLegal < -1:
		return fmt.Errorf("max_legal %d: want -1 (never), 0 (the default) or a count", c.MaxLegal)
	case !finite(c.InferReward) || c.InferReward < 0 || c.InferReward > 0 && c.Trace != selfplay.TraceToM:
		return fmt.Errorf("infer_reward %v: want a number ≥ 0, and not 0 only with trace: %s", c.InferReward, selfplay.TraceToM)
	}
	for _, k := range engine.SortedKeys(c.Agents) {
		if _, err := players.Parse(c.Agents[k]); err != nil {
			return fmt.Errorf("agents: %s: %w", k, err)
		}
	}
	if _, err := c.ThinkingSettings(); err != nil {
		return err
	}
	if _, err := c.ChatTemplateSource(); err != nil {
		return err
	}
	// llama.cpp aborts on some sampler settings (an infinite temperature
	// with a grammar): refuse them before any backend sees them.
	if err := c.Sampling.Validate(); err != nil {
		return err
	}
	if _, err := llama.ParseKVType(c.KVCache); err != nil {
		return fmt.Errorf("kv_cache %w", err)
	}
	if c.Guard != nil {
		if err := c.Guard.Validate(); err != nil {
			return fmt.Errorf("guard: %w", err)
		}
	}
	if _, err := c.JudgeOptions(); err != nil {
		return err
	}
	return nil
}

// AbsPaths makes the options' file paths absolute (relative to the
// working directory), so that a saved config means the same files from
// anywhere.
func (c *RolloutOptions) AbsPaths() error {
	paths := []*string{&c.Model, &c.Adapter, &c.FrozenModel, &c.LlamaLib, &c.JudgeModel}
	if c.Judge != nil {
		paths = append(paths, &c.Judge.Model)
	}
	if t := c.ChatTemplate; t != "" && !strings.Contains(t, "{{") && !strings.Contains(t, "{%") {
		paths = append(paths, &c.ChatTemplate)
	}
	for _, p := range paths {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// RunnerOptions converts the rollout options into the runner's; named
// are the players of agents that are neither the policy, the frozen
// model nor a script (Players.Named: ollama:MODEL seats).
func (c *RolloutOptions) RunnerOptions(named map[string]*selfplay.Player) (selfplay.Options, error) {
	o := selfplay.Options{}.Defaults()
	o.Seed, o.Parallel, o.GroupSize = c.Seed, c.Parallel, c.GroupSize
	o.Params = engine.Params(c.Params)
	if c.MaxRetries != nil {
		o.Engine.MaxRetries = *c.MaxRetries
	}
	o.Reply = c.Reply
	// A reply budget above max_tokens would never fit: clamp it.
	o.MinReplyTokens = min(c.MinReplyTokens, c.MaxTokens)
	o.BatchWindow = time.Duration(c.BatchWindowMS * float64(time.Millisecond))
	o.FreeSchedule = c.FreeSchedule
	o.Agents, o.Players = c.Agents, named
	o.InferReward = c.InferReward
	if c.Guard != nil && c.Guard.Enabled {
		g, err := selfplay.NewRuleGuard(*c.Guard)
		if err != nil {
			return o, fmt.Errorf("guard: %w", err)
		}
		o.Guard = g
	}
	return o, o.Validate()
}

// JudgeOptions say where a SOTOPIA judge runs: exactly one of a GGUF file
// on a llama backend of its own, an Ollama model, or the policy model.
type JudgeOptions struct {
	// Model is a GGUF file.
	Model string `yaml:"model,omitempty"`
	// Ollama is the server URL (the CLI defaults it to $OLLAMA_HOST, else
	// http://127.0.0.1:11434); OllamaModel the model name, e.g. qwen3:4b.
	Ollama      string `yaml:"ollama,omitempty"`
	OllamaModel string `yaml:"ollama_model,omitempty"`
	// Policy judges with the policy model: in a rollout the policy's own
	// backend, in a training run the policy's model file loaded again
	// without the adapter (a judge that is the policy being trained would
	// grade its own updates).
	Policy bool `yaml:"policy,omitempty"`
	// Context is the tokens per judge sequence of a GGUF judge (8192).
	Context int `yaml:"context,omitempty"`
	// Process also asks for per-turn process rewards; Extra for the five
	// OMAR metrics.
	Process bool `yaml:"process,omitempty"`
	Extra   bool `yaml:"extra,omitempty"`
	// StageWeights is where the process reward's weights come from:
	// "proposed" (the judge proposes them, the default) or "fixed" (the
	// fixed stage table, the ablation).
	StageWeights string `yaml:"stage_weights,omitempty"`
}

// DefaultJudgeContext is a GGUF judge's context when none is given.
const DefaultJudgeContext = 8192

// Validate checks that exactly one backend is named.
func (c JudgeOptions) Validate() error {
	n := 0
	for _, set := range []bool{c.Model != "", c.OllamaModel != "", c.Policy} {
		if set {
			n++
		}
	}
	switch {
	case c.Ollama != "" && c.OllamaModel == "":
		return errors.New("judge: ollama needs ollama_model (the model name, e.g. qwen3:4b)")
	case n != 1:
		return errors.New("judge: name exactly one backend: model (a GGUF file), ollama_model (with ollama, the server URL) or policy: true")
	case c.Context < 0 || c.Context > 1<<24:
		return fmt.Errorf("judge: context %d: want 0..%d", c.Context, 1<<24)
	case c.StageWeights != "" && c.StageWeights != sotopia.StageWeightsProposed && c.StageWeights != sotopia.StageWeightsFixed:
		return fmt.Errorf("judge: stage_weights %q: want %s or %s", c.StageWeights, sotopia.StageWeightsProposed, sotopia.StageWeightsFixed)
	}
	return nil
}

// JudgeOptions returns the judge the options ask for (nil for none),
// reading the older judge_model keys as judge: {model, process, context}.
func (c *RolloutOptions) JudgeOptions() (*JudgeOptions, error) {
	legacy := c.JudgeModel != "" || c.JudgeProcess || c.JudgeContext != 0
	if c.Judge != nil && legacy {
		return nil, errors.New("judge_model, judge_process and judge_context are the older spelling of judge: {model, process, context}; use only the judge section")
	}
	jc := c.Judge
	if jc == nil && c.JudgeModel != "" {
		jc = &JudgeOptions{Model: c.JudgeModel, Process: c.JudgeProcess, Context: c.JudgeContext}
	}
	if jc == nil {
		return nil, nil
	}
	if err := jc.Validate(); err != nil {
		return nil, err
	}
	out := *jc
	if out.Context == 0 {
		out.Context = DefaultJudgeContext
	}
	return &out, nil
}

// SmallModelBytes is the largest model file AutoContexts gives a second
// context: the built-in model (4 MB) runs no faster on two llama threads
// than on one, and 1.7× faster on two contexts of one thread (128
// evaluation episodes, 28.0 s against 16.1 s on 2 cores). Larger models
// were not measured; their products are wide enough for threads.
const SmallModelBytes = 32 << 20

// AutoContexts is the number of llama contexts a run whose rollout.contexts
// is 0 plays on: 2 for a model file of at most SmallModelBytes decoded on
// the CPU with one thread per context and two or more episodes in flight,
// else 1. It depends on the config and the model file, not on the
// machine, so a run's transcripts do not either.
func AutoContexts(r RolloutOptions) int {
	if r.GPULayers != 0 || r.Threads != 1 || r.Parallel < 2 || r.Model == "" {
		return 1
	}
	st, err := os.Stat(r.Model)
	if err != nil || st.Size() > SmallModelBytes {
		return 1
	}
	return 2
}
