package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

func init() {
	register(command{name: "selfplay", summary: "the main job: self-play rollouts, PPO updates and adapter hot-swaps in one process", run: runSelfplay})
}

// selfplayConfig is the YAML form of a self-play run.
type selfplayConfig struct {
	// Iterations of rollout → score → update → swap.
	Iterations int `yaml:"iterations"`
	// Rollout configures the episodes of one iteration (episodes is per
	// iteration; first_episode is ignored: the run keeps a cursor).
	Rollout rolloutConfig `yaml:"rollout"`
	// ModelPreset is generated into the run directory when rollout.model
	// is empty.
	ModelPreset string `yaml:"model_preset"`
	ModelArch   string `yaml:"model_arch"`
	// Estimator names a selfplay estimator; EstimatorParams tune it.
	Estimator       string                   `yaml:"estimator"`
	EstimatorParams selfplay.EstimatorParams `yaml:"estimator_params"`
	Train           trainConfig              `yaml:"train"`
	// CheckpointEvery writes a checkpoint every n iterations (and always
	// at the end and on interrupt).
	CheckpointEvery int `yaml:"checkpoint_every"`
	// SaveTrajectories appends every iteration's trajectories to
	// trajectories.jsonl in the run directory.
	SaveTrajectories bool `yaml:"save_trajectories"`
	// EarlyStop ends the run when the policy drifts (a reward-hacking
	// guard); zero thresholds are off.
	EarlyStop earlyStopConfig `yaml:"early_stop"`
}

// earlyStopConfig are the drift thresholds.
type earlyStopConfig struct {
	// MaxKLRef stops when kl_ref (log π − log π_base on the generated
	// tokens) exceeds it.
	MaxKLRef float64 `yaml:"max_kl_ref"`
	// MinEntropyRatio stops when the update's entropy falls below this
	// fraction of the first iteration's.
	MinEntropyRatio float64 `yaml:"min_entropy_ratio"`
}

// earlyStop returns why the run should stop after metrics m, or "".
func (c earlyStopConfig) earlyStop(firstEntropy float64, m *iterationMetrics) string {
	if c.MaxKLRef > 0 && m.KLRef > c.MaxKLRef {
		return fmt.Sprintf("kl_ref %.3f > max_kl_ref %.3f", m.KLRef, c.MaxKLRef)
	}
	if c.MinEntropyRatio > 0 && firstEntropy > 0 && m.Entropy < c.MinEntropyRatio*firstEntropy {
		return fmt.Sprintf("entropy %.3f < %.2f × the first iteration's %.3f", m.Entropy, c.MinEntropyRatio, firstEntropy)
	}
	return ""
}

// trainConfig mirrors train.Options with YAML names.
type trainConfig struct {
	LoRARank    int      `yaml:"lora_rank"`
	LoRAAlpha   float32  `yaml:"lora_alpha"`
	LoRAModules []string `yaml:"lora_modules"`
	LR          float32  `yaml:"lr"`
	ValueLR     float32  `yaml:"value_lr"`
	WeightDecay float32  `yaml:"weight_decay"`
	ClipEps     float32  `yaml:"clip_eps"`
	ValueClip   float32  `yaml:"value_clip"`
	ValueCoef   float32  `yaml:"value_coef"`
	KLCoef      float32  `yaml:"kl_coef"`
	EntropyCoef float32  `yaml:"entropy_coef"`
	MaxGradNorm float32  `yaml:"max_grad_norm"`
	Epochs      int      `yaml:"epochs"`
	MiniBatch   int      `yaml:"minibatch"`
	BatchTokens int      `yaml:"batch_tokens"`
	Threads     int      `yaml:"threads"`
	Device      string   `yaml:"device"`
	Seed        uint64   `yaml:"seed"`
}

func trainConfigOf(o train.Options) trainConfig {
	return trainConfig{
		LoRARank: o.LoRARank, LoRAAlpha: o.LoRAAlpha, LoRAModules: o.LoRAModules, LR: o.LR, ValueLR: o.ValueLR,
		WeightDecay: o.WeightDecay, ClipEps: o.ClipEps, ValueClip: o.ValueClip, ValueCoef: o.ValueCoef,
		KLCoef: o.KLCoef, EntropyCoef: o.EntropyCoef, MaxGradNorm: o.MaxGradNorm, Epochs: o.Epochs,
		MiniBatch: o.MiniBatch, BatchTokens: o.BatchTokens, Threads: o.Threads, Device: o.Device, Seed: o.Seed,
	}
}

func (c trainConfig) options() train.Options {
	return train.Options{
		LoRARank: c.LoRARank, LoRAAlpha: c.LoRAAlpha, LoRAModules: c.LoRAModules, LR: c.LR, ValueLR: c.ValueLR,
		WeightDecay: c.WeightDecay, ClipEps: c.ClipEps, ValueClip: c.ValueClip, ValueCoef: c.ValueCoef,
		KLCoef: c.KLCoef, EntropyCoef: c.EntropyCoef, MaxGradNorm: c.MaxGradNorm, Epochs: c.Epochs,
		MiniBatch: c.MiniBatch, BatchTokens: c.BatchTokens, Threads: c.Threads, Device: c.Device, Seed: c.Seed,
	}
}

// defaultSelfplayConfig is the built-in run: the tiny llama model
// (generated into the run directory), Craigslist bargaining in
// structured-move mode with grammar-constrained replies, self-play on both
// seats, the hierarchical estimator. It finishes in a few minutes on 2 CPU
// cores. Craigslist rather than Deal-or-No-Deal: the untrained tiny model
// reaches deals there (a price line is short), while in Deal-or-No-Deal it
// never accepted in 16 episodes, so every reward was 0 and nothing could
// be learnt.
func defaultSelfplayConfig() selfplayConfig {
	grammar := true
	retries := 1
	c := selfplayConfig{
		Iterations: 10,
		Rollout: rolloutConfig{
			Env:      "craigslist",
			Episodes: 8, Parallel: 8, Seed: 1,
			// The tiny model's 512-token vocabulary spends about one token
			// per character of a move line.
			MaxTokens: 40, Context: 4096, MinReplyTokens: 16,
			Temperature: 1, Grammar: &grammar, MaxRetries: &retries,
			KVCache: "f32", Threads: 1,
		},
		ModelPreset:     "tiny",
		ModelArch:       "llama",
		Estimator:       selfplay.DefaultEstimator,
		EstimatorParams: selfplay.EstimatorParams{}.Defaults(),
		Train:           trainConfigOf(train.Options{}.Defaults()),
		CheckpointEvery: 1,
	}
	guard := selfplay.GuardOptions{}.Defaults()
	c.Rollout.Guard = &guard
	c.Train.LR = 1e-3
	c.Train.ValueLR = 1e-3
	c.Train.Threads = 1
	return c
}

// defaultEnvParams are the default environment's parameters when a config
// names it without any (a YAML map would merge into a default map, so
// they are applied after decoding).
func (c *selfplayConfig) defaultEnvParams() {
	if c.Rollout.Params == nil && c.Rollout.Env == "craigslist" {
		c.Rollout.Params = map[string]any{"structured_only": true, "rounds": 3}
	}
}

// fallbackEnvs are tried in order when the default environment is not
// registered in this build.
var fallbackEnvs = []string{"craigslist", "dealornodeal", "sealedbid"}

// selfplayState is the run's own part of a checkpoint (the trainer writes
// its own files next to it).
type selfplayState struct {
	// Iteration is the number of completed iterations.
	Iteration int `json:"iteration"`
	// Cursor is the index of the next episode (the scenario cursor; every
	// seed derives from the run seed and the episode index).
	Cursor int `json:"cursor"`
	// Estimator state (RAE baselines), when the estimator has any.
	Estimator json.RawMessage `json:"estimator,omitempty"`
	// Lengths of the append-only output files at the checkpoint, so a
	// resumed run drops what an interrupted iteration wrote after it.
	MetricsBytes      int64 `json:"metrics_bytes"`
	EpisodesBytes     int64 `json:"episodes_bytes"`
	TrajectoriesBytes int64 `json:"trajectories_bytes"`
	// Adapter is true once an adapter has been swapped in (the
	// checkpoint's adapter is then loaded into the backend on resume).
	Adapter bool `json:"adapter"`
	// FirstEntropy is the first iteration's entropy (early stopping).
	FirstEntropy float64 `json:"first_entropy,omitempty"`
	// Stopped says why the run stopped early, if it did.
	Stopped string `json:"stopped,omitempty"`
}

// errStopped ends a run that stopped early.
var errStopped = errors.New("stopped early")

// iterationMetrics is one line of metrics.jsonl.
type iterationMetrics struct {
	Iteration int `json:"iteration"`
	Episodes  int `json:"episodes"`
	Cursor    int `json:"cursor"`
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

	// Seconds per phase and tokens/s per phase; they vary between runs
	// (everything above is reproducible from the seed).
	Seconds      map[string]float64 `json:"seconds"`
	TokensPerSec map[string]float64 `json:"tokens_per_s"`
	MeanBatch    float64            `json:"mean_batch"`
}

// selfplayHooks let the CLI attach progress display without the loop
// knowing about terminals.
type selfplayHooks struct {
	Phase     func(iteration int, phase string)
	Episode   func(done, total int)
	Iteration func(m *iterationMetrics)
}

// selfplayRun is one run directory and everything open for it.
type selfplayRun struct {
	dir     string
	cfg     selfplayConfig
	game    engine.Game
	players *rolloutPlayers
	runner  *selfplay.Runner
	trainer *train.Trainer
	est     selfplay.Estimator
	state   selfplayState
	hooks   selfplayHooks
	stdout  io.Writer
	// versionOffset turns the backend's policy versions into the run's:
	// a resumed backend counts its swaps from the resume, the run from
	// its start (one swap per completed iteration).
	versionOffset int
}

func runSelfplay(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "selfplay")
	config := fs.String("config", "", "YAML config (default: the built-in tiny-model Craigslist run, docs/selfplay.md)")
	resume := fs.String("resume", "", "run directory to continue from its last checkpoint")
	out := fs.String("out", "", "run directory (default runs/selfplay-<time>)")
	iterations := fs.Int("iterations", 0, "iterations (overrides the config)")
	overwrite := fs.Bool("overwrite", false, "start afresh in an --out directory that holds a previous run (its files are replaced)")
	var rf rolloutFlags
	rf.bind(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v: %w", fs.Args(), errUsage)
	}
	cfg := defaultSelfplayConfig()
	dir := *out
	resuming := *resume != ""
	switch {
	case resuming:
		// A resumed run must be the same run: only the iteration count and
		// where the libraries are may change.
		var bad []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "resume", "iterations", "llama-lib":
			case "out":
				if *out != *resume {
					bad = append(bad, "--out")
				}
			default:
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			return fmt.Errorf("--resume continues a run with its own config and directory; %s cannot change it: %w", strings.Join(bad, ", "), errUsage)
		}
		dir = *resume
		// A run from before the guard existed has no guard section and
		// continues without one.
		cfg.Rollout.Guard = &selfplay.GuardOptions{}
		if err := decodeYAMLFile(filepath.Join(dir, "config.yaml"), &cfg); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	case *config != "":
		if err := decodeYAMLFile(*config, &cfg); err != nil {
			return err
		}
	}
	if err := rf.apply(fs, &cfg.Rollout); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "iterations" {
			cfg.Iterations = *iterations
		}
	})
	if dir == "" {
		dir = filepath.Join("runs", "selfplay-"+time.Now().UTC().Format("20060102-150405"))
	}
	if !resuming && *config == "" {
		if _, err := findGame(cfg.Rollout.Env); err != nil {
			for _, id := range fallbackEnvs {
				if _, err := findGame(id); err == nil {
					fmt.Fprintf(env.stderr, "selfplay: %s is not available, using %s\n", cfg.Rollout.Env, id)
					cfg.Rollout.Env, cfg.Rollout.Params = id, nil
					break
				}
			}
		}
	}
	cfg.defaultEnvParams()
	if !resuming {
		if err := clearRunDir(dir, *overwrite); err != nil {
			return err
		}
	}
	run, err := openSelfplayRun(dir, cfg, resuming, env.stdout)
	if err != nil {
		return err
	}
	defer run.close()
	if env.interactive {
		attachProgress(run, env.stderr)
	}
	bar := run.hooks.Iteration
	run.hooks.Iteration = func(m *iterationMetrics) {
		if bar != nil {
			bar(m)
		}
		roles := make([]string, 0, len(m.Reward))
		for r := range m.Reward {
			roles = append(roles, r)
		}
		sort.Strings(roles)
		var parts []string
		for _, r := range roles {
			parts = append(parts, fmt.Sprintf("%s %.3f", r, m.Reward[r]))
		}
		fmt.Fprintf(env.stdout, "iteration %d/%d: reward %s; kl_ref %.3f, value loss %.4f, clip %.2f, degenerate %.2f; %.1fs\n",
			m.Iteration, run.cfg.Iterations, strings.Join(parts, ", "), m.KLRef, m.ValueLoss, m.ClipFrac, m.DegenerateRate, m.Seconds["iteration"])
	}
	err = run.loop(ctx)
	if errors.Is(err, errStopped) {
		fmt.Fprintf(env.stdout, "stopped early after iteration %d: %s\n", run.state.Iteration, run.state.Stopped)
		err = nil
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(env.stdout, "interrupted after iteration %d; checkpoint in %s (continue with: omar selfplay --resume %s)\n",
			run.state.Iteration, filepath.Join(dir, "checkpoint"), dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "done: %d iterations in %s\n  metrics     %s\n  reward plot %s\n  adapter     %s\n  episodes    %s\n  checkpoint  %s\n",
		run.state.Iteration, dir, filepath.Join(dir, "metrics.jsonl"), filepath.Join(dir, "reward.svg"),
		filepath.Join(dir, "adapter.gguf"), filepath.Join(dir, "episodes.jsonl"), filepath.Join(dir, "checkpoint"))
	return nil
}

// runFiles are the files a run writes into its directory.
var runFiles = []string{"config.yaml", "model.gguf", "metrics.jsonl", "episodes.jsonl", "trajectories.jsonl", "reward.svg", "adapter.gguf", "checkpoint"}

// clearRunDir refuses to start a fresh run over a previous one unless
// overwrite, in which case it removes the previous run's files (only
// those).
func clearRunDir(dir string, overwrite bool) error {
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err != nil {
		return nil
	}
	if !overwrite {
		return fmt.Errorf("%s holds a previous run: continue it with --resume %s, or start afresh with --overwrite: %w", dir, dir, errUsage)
	}
	for _, f := range runFiles {
		if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}

func (c *selfplayConfig) validate() error {
	if c.Iterations < 1 {
		return fmt.Errorf("iterations %d < 1", c.Iterations)
	}
	if c.CheckpointEvery < 1 {
		return fmt.Errorf("checkpoint_every %d < 1", c.CheckpointEvery)
	}
	if c.Rollout.Env == "" {
		return errors.New("no environment (rollout.env)")
	}
	if err := c.EstimatorParams.Validate(); err != nil {
		return err
	}
	if g := c.Rollout.GroupSize; g > 1 && c.Rollout.Episodes%g != 0 {
		// A group split across iterations would be scored in parts (a
		// part of one gets no GRPO advantage at all).
		return fmt.Errorf("rollout.episodes %d is not a multiple of rollout.group_size %d", c.Rollout.Episodes, g)
	}
	if c.EarlyStop.MaxKLRef < 0 || c.EarlyStop.MinEntropyRatio < 0 || c.EarlyStop.MinEntropyRatio >= 1 {
		return fmt.Errorf("early_stop: max_kl_ref %v must be ≥ 0 and min_entropy_ratio %v in [0, 1)", c.EarlyStop.MaxKLRef, c.EarlyStop.MinEntropyRatio)
	}
	return c.Train.options().Validate()
}

// openSelfplayRun prepares dir: the effective config, the model, the
// backends, the trainer and (when resuming) the checkpoint.
func openSelfplayRun(dir string, cfg selfplayConfig, resuming bool, stdout io.Writer) (_ *selfplayRun, err error) {
	cfg.Rollout.applyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g, err := findGame(cfg.Rollout.Env)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint"), 0o755); err != nil {
		return nil, err
	}
	if cfg.Rollout.Model == "" {
		// Absolute: config.yaml records it, and a resume may run from
		// another working directory than the one --out was relative to.
		path, err := filepath.Abs(filepath.Join(dir, "model.gguf"))
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			mo := model.Options{Arch: cfg.ModelArch, Preset: cfg.ModelPreset, Seed: cfg.Rollout.Seed}.Defaults()
			if err := model.WriteFile(path, mo); err != nil {
				return nil, fmt.Errorf("generate the %s model: %w", cfg.ModelPreset, err)
			}
		}
		cfg.Rollout.Model = path
	}
	if !resuming {
		// config.yaml is what --resume reads, possibly from another
		// working directory: record every file path absolute.
		if err := cfg.Rollout.absPaths(); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(&cfg)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), b, 0o644); err != nil {
			return nil, err
		}
	}
	r := &selfplayRun{dir: dir, cfg: cfg, game: g, stdout: stdout}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	specs, err := g.Seats(engine.Params(cfg.Rollout.Params))
	if err != nil {
		return nil, err
	}
	if r.players, err = openPlayers(&cfg.Rollout, len(specs)); err != nil {
		return nil, err
	}
	if r.players.llama == nil {
		return nil, errors.New("selfplay needs a policy model")
	}
	if g, err = attachJudge(g, &cfg.Rollout, r.players, true); err != nil {
		return nil, err
	}
	r.game = g
	opts, err := cfg.Rollout.options()
	if err != nil {
		return nil, err
	}
	// A seat stream must fit the trainer's context (the model's training
	// context) as well as the backend's.
	opts.Context = min(opts.Context, r.players.llama.ContextPerSequence(), r.players.llama.Model().NCtxTrain())
	if r.runner, err = selfplay.NewRunner(g, r.players.policy, r.players.frozen, opts); err != nil {
		return nil, err
	}
	if r.est, err = selfplay.NewEstimator(cfg.Estimator, cfg.EstimatorParams); err != nil {
		return nil, err
	}
	if err := llamacpp.Load(llamacpp.DefaultLibDir(cfg.Rollout.LlamaLib)); err != nil {
		return nil, err
	}
	if r.trainer, err = train.New(cfg.Rollout.Model, cfg.Train.options()); err != nil {
		return nil, err
	}
	// The policy backend samples with rollout.adapter (a warm-up): the
	// trainer starts from the same weights (a resume's checkpoint then
	// replaces them).
	if cfg.Rollout.Adapter != "" {
		if err := r.trainer.LoadAdapter(cfg.Rollout.Adapter); err != nil {
			return nil, err
		}
	}
	if resuming {
		if err := r.restore(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *selfplayRun) close() {
	if r.trainer != nil {
		r.trainer.Close()
	}
	if r.players != nil {
		r.players.Close()
	}
}

func (r *selfplayRun) path(name string) string { return filepath.Join(r.dir, name) }

// restore loads the last checkpoint: the trainer's state, the run state,
// the adapter into the inference backend, and truncates the output files
// to what they held at the checkpoint.
func (r *selfplayRun) restore() error {
	b, err := r.trainer.LoadCheckpoint(r.path("checkpoint"))
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.state); err != nil {
		return fmt.Errorf("resume: corrupt run state in the checkpoint of %s: %w", r.dir, err)
	}
	if len(r.state.Estimator) > 0 {
		se, ok := r.est.(selfplay.StatefulEstimator)
		if !ok {
			return fmt.Errorf("resume: the checkpoint has estimator state but %s keeps none", r.est.Name())
		}
		if err := se.UnmarshalState(r.state.Estimator); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	if r.state.Adapter {
		// The adapter file is renamed into place after trainer.ckpt, so a
		// crash between the two leaves an older adapter (or none) beside
		// the state just loaded: write it again from that state (the same
		// state gives the same bytes).
		adapter := r.path("checkpoint/" + train.AdapterFile)
		if err := r.trainer.SaveAdapter(adapter); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if _, err := r.players.llama.SetAdapter(context.Background(), adapter, 1); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	r.versionOffset = r.state.Iteration - r.players.llama.PolicyVersion()
	for _, f := range []struct {
		name string
		n    int64
	}{{"metrics.jsonl", r.state.MetricsBytes}, {"episodes.jsonl", r.state.EpisodesBytes}, {"trajectories.jsonl", r.state.TrajectoriesBytes}} {
		if err := os.Truncate(r.path(f.name), f.n); err != nil && !(errors.Is(err, os.ErrNotExist) && f.n == 0) {
			return fmt.Errorf("resume: %w", err)
		}
	}
	return nil
}

// checkpoint writes the trainer's state with the run state as its
// caller blob (one atomic, checksummed file) and the adapter.
func (r *selfplayRun) checkpoint() error {
	if se, ok := r.est.(selfplay.StatefulEstimator); ok {
		b, err := se.MarshalState()
		if err != nil {
			return err
		}
		r.state.Estimator = b
	}
	var err error
	if r.state.MetricsBytes, err = fileSize(r.path("metrics.jsonl")); err != nil {
		return err
	}
	if r.state.EpisodesBytes, err = fileSize(r.path("episodes.jsonl")); err != nil {
		return err
	}
	if r.state.TrajectoriesBytes, err = fileSize(r.path("trajectories.jsonl")); err != nil {
		return err
	}
	b, err := json.Marshal(r.state)
	if err != nil {
		return err
	}
	return r.trainer.SaveCheckpoint(r.path("checkpoint"), b)
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	return errors.Join(werr, f.Close())
}

func (r *selfplayRun) phase(it int, name string) {
	if r.hooks.Phase != nil {
		r.hooks.Phase(it, name)
	}
}

// loop runs the remaining iterations. The rollout of an iteration is
// interruptible (its partial episodes are dropped); once it is complete the
// rest of the iteration runs to the end, so an interrupt always leaves a
// checkpoint at an iteration boundary and a resumed run continues exactly.
func (r *selfplayRun) loop(ctx context.Context) error {
	if r.state.Stopped != "" {
		return errStopped
	}
	for r.state.Iteration < r.cfg.Iterations {
		it := r.state.Iteration + 1
		m, err := r.iteration(ctx, it)
		if err != nil {
			if ctx.Err() != nil {
				// A failed checkpoint must not read as a plain interrupt:
				// the CLI would then point at a checkpoint that is not there.
				if cerr := r.checkpoint(); cerr != nil {
					return fmt.Errorf("interrupted in iteration %d, and the checkpoint failed: %w", it, cerr)
				}
				return context.Canceled
			}
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		if r.hooks.Iteration != nil {
			r.hooks.Iteration(m)
		}
		if it == 1 {
			r.state.FirstEntropy = m.Entropy
		}
		r.state.Stopped = r.cfg.EarlyStop.earlyStop(r.state.FirstEntropy, m)
		if r.state.Stopped != "" {
			if err := r.checkpoint(); err != nil {
				return err
			}
			return errStopped
		}
		if err := ctx.Err(); err != nil || it%r.cfg.CheckpointEvery == 0 || it == r.cfg.Iterations {
			if cerr := r.checkpoint(); cerr != nil {
				return cerr
			}
			if err != nil {
				return context.Canceled
			}
		}
	}
	return nil
}

func (r *selfplayRun) iteration(ctx context.Context, it int) (*iterationMetrics, error) {
	wall := time.Now()
	m := &iterationMetrics{Iteration: it, Reward: map[string]float64{}, Seconds: map[string]float64{}, TokensPerSec: map[string]float64{}}
	n := r.cfg.Rollout.Episodes

	// Rollout.
	r.phase(it, "rollout")
	start := time.Now()
	var trajs []selfplay.Trajectory
	var eps bytes.Buffer
	var trajBuf bytes.Buffer
	tw := selfplay.NewTrajectoryWriter(&trajBuf)
	enc := json.NewEncoder(&eps)
	sums, counts := map[string]float64{}, map[string]int{}
	var seatRewards []float64
	var actions, invalid, decisions, defaults int
	var guard guardCounts
	done := 0
	st, err := r.runner.Run(ctx, r.state.Cursor, n, func(res *selfplay.EpisodeResult) error {
		for i := range res.Trajectories {
			for k := range res.Trajectories[i].PolicyVersions {
				res.Trajectories[i].PolicyVersions[k] += r.versionOffset
			}
		}
		trajs = append(trajs, res.Trajectories...)
		guard.add(res.Trajectories)
		for _, s := range res.Record.Seats {
			rw := res.Record.Outcome.Rewards[s.Index]
			sums[s.Role] += rw
			counts[s.Role]++
			seatRewards = append(seatRewards, rw)
		}
		for _, e := range res.Record.Events {
			switch e.Kind {
			case engine.KindAction:
				actions++
			case engine.KindValidationError:
				invalid++
			case engine.KindAck:
				decisions++
			case engine.KindDefault:
				decisions++
				defaults++
			}
		}
		if r.cfg.SaveTrajectories {
			for i := range res.Trajectories {
				if err := tw.Write(&res.Trajectories[i]); err != nil {
					return err
				}
			}
		}
		done++
		if r.hooks.Episode != nil {
			r.hooks.Episode(done, n)
		}
		return enc.Encode(res.Record)
	})
	if err != nil {
		return nil, err
	}
	m.Seconds["rollout"] = time.Since(start).Seconds()
	m.Episodes, m.Turns, m.GeneratedTokens = st.Episodes, st.Turns, st.GeneratedTokens
	m.TokensPerSec["rollout"] = st.TokensPerSecond()
	m.MeanBatch = st.MeanBatch()
	for role, s := range sums {
		m.Reward[role] = s / float64(counts[role])
	}
	m.RewardMean = meanReward(seatRewards)
	if actions > 0 {
		m.InvalidRate = float64(invalid) / float64(actions)
	}
	if decisions > 0 {
		m.DefaultRate = float64(defaults) / float64(decisions)
	}
	m.DegenerateRate, m.DegenerateTurns, m.Degenerate = guard.rate(), guard.Flagged, guard.Reasons
	// From here on the iteration completes even when interrupted.
	ctx = context.WithoutCancel(ctx)
	tw.Flush()
	if err := appendFile(r.path("episodes.jsonl"), eps.Bytes()); err != nil {
		return nil, err
	}
	if r.cfg.SaveTrajectories {
		if err := appendFile(r.path("trajectories.jsonl"), trajBuf.Bytes()); err != nil {
			return nil, err
		}
	}
	r.state.Cursor += n
	m.Cursor = r.state.Cursor

	// Score: values, current and reference logprobs.
	r.phase(it, "score")
	start = time.Now()
	seqs := make([]train.Sequence, 0, len(trajs))
	keep := make([]int, 0, len(trajs))
	for i := range trajs {
		t := &trajs[i]
		if len(t.Tokens) < 2 || t.Mask[0] {
			continue
		}
		keep = append(keep, i)
		seqs = append(seqs, train.Sequence{Tokens: t.Tokens, Mask: t.Mask})
	}
	if len(seqs) == 0 {
		return nil, errors.New("no trajectories to train on (is any seat played by the policy?)")
	}
	values, logprobs, ref, err := r.trainer.Evaluate(ctx, seqs)
	if err != nil {
		return nil, err
	}
	m.Seconds["score"] = time.Since(start).Seconds()
	seqTokens := 0
	for _, s := range seqs {
		seqTokens += len(s.Tokens)
	}
	m.TokensPerSec["score"] = float64(seqTokens) / m.Seconds["score"]
	var gap, kl, vsum float64
	var nGen int
	for j, i := range keep {
		t := &trajs[i]
		for k, on := range t.Mask {
			if on {
				gap += math.Abs(float64(t.RawLogprobs[k] - logprobs[j][k]))
				kl += float64(logprobs[j][k] - ref[j][k])
				vsum += float64(values[j][k])
				nGen++
			}
		}
	}
	if nGen > 0 {
		m.LogprobGap, m.KLRef, m.ValueMean = gap/float64(nGen), kl/float64(nGen), vsum/float64(nGen)
	}

	// Advantages.
	start = time.Now()
	in := selfplay.AdvantageInput{Samples: make([]selfplay.Sample, len(keep))}
	for j, i := range keep {
		in.Samples[j] = selfplay.SampleOf(&trajs[i], values[j])
	}
	adv, err := r.est.Estimate(in)
	if err != nil {
		return nil, err
	}
	var asum, asq float64
	for j := range seqs {
		seqs[j].OldLogprobs = logprobs[j]
		seqs[j].OldValues = values[j]
		seqs[j].Advantages = adv.Advantages[j]
		seqs[j].Returns = adv.Returns[j]
		for k, on := range seqs[j].Mask {
			if on {
				a := float64(adv.Advantages[j][k])
				asum, asq = asum+a, asq+a*a
			}
		}
	}
	if nGen > 0 {
		m.AdvantageMean = asum / float64(nGen)
		m.AdvantageStd = math.Sqrt(math.Max(0, asq/float64(nGen)-m.AdvantageMean*m.AdvantageMean))
	}
	m.Seconds["estimate"] = time.Since(start).Seconds()

	// Update.
	r.phase(it, "update")
	start = time.Now()
	ts, err := r.trainer.Step(ctx, seqs)
	if err != nil {
		return nil, err
	}
	m.Seconds["update"] = time.Since(start).Seconds()
	m.PolicyLoss, m.ValueLoss, m.KL, m.Entropy, m.ClipFrac, m.GradNorm = ts.PolicyLoss, ts.ValueLoss, ts.KL, ts.Entropy, ts.ClipFrac, ts.GradNorm
	m.SequenceTokens, m.TrainedTokens, m.OptimizerSteps = ts.Tokens, ts.TrainedTokens, ts.OptimizerSteps
	m.TokensPerSec["update"] = float64(ts.Tokens) / m.Seconds["update"]

	// Swap the new adapter into the inference backend.
	r.phase(it, "swap")
	start = time.Now()
	if err := r.trainer.SaveAdapter(r.path("adapter.gguf")); err != nil {
		return nil, err
	}
	if _, err := r.players.llama.SetAdapter(ctx, r.path("adapter.gguf"), 1); err != nil {
		return nil, err
	}
	r.state.Adapter = true
	m.Seconds["swap"] = time.Since(start).Seconds()
	m.Seconds["iteration"] = time.Since(wall).Seconds()
	r.state.Iteration = it

	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := appendFile(r.path("metrics.jsonl"), append(b, '\n')); err != nil {
		return nil, err
	}
	if err := r.plot(); err != nil {
		return nil, err
	}
	return m, nil
}

// plot rewrites reward.svg from metrics.jsonl.
func (r *selfplayRun) plot() error {
	b, err := os.ReadFile(r.path("metrics.jsonl"))
	if err != nil {
		return err
	}
	var ms []iterationMetrics
	for line := range bytes.SplitSeq(bytes.TrimSpace(b), []byte("\n")) {
		var m iterationMetrics
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("metrics.jsonl: %w", err)
		}
		ms = append(ms, m)
	}
	lo, hi := r.game.RewardRange()
	svg := rewardSVG(r.game.ID(), ms, lo, hi)
	return os.WriteFile(r.path("reward.svg"), svg, 0o644)
}

// rewardSVG draws mean reward per role against iteration.
func rewardSVG(title string, ms []iterationMetrics, lo, hi float64) []byte {
	const W, H, L, R, T, B = 640.0, 400.0, 60.0, 150.0, 40.0, 50.0
	roleSet := map[string]bool{}
	for _, m := range ms {
		for role := range m.Reward {
			roleSet[role] = true
		}
	}
	roles := make([]string, 0, len(roleSet))
	for role := range roleSet {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	n := max(len(ms), 2)
	x := func(i int) float64 { return L + (W-L-R)*float64(i-1)/float64(n-1) }
	y := func(v float64) float64 { return H - B - (H-T-B)*(v-lo)/(hi-lo) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%g" y="20" font-size="14">%s: mean reward per role</text>`+"\n", L, xmlEscape(title))
	fmt.Fprintf(&s, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&s, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, T, L, H-B)
	for k := 0; k <= 4; k++ {
		v := lo + (hi-lo)*float64(k)/4
		fmt.Fprintf(&s, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", L, y(v), W-R, y(v))
		fmt.Fprintf(&s, `<text x="%g" y="%.1f" text-anchor="end">%.2f</text>`+"\n", L-6, y(v)+4, v)
	}
	for _, i := range []int{1, len(ms)} {
		if i >= 1 {
			fmt.Fprintf(&s, `<text x="%.1f" y="%g" text-anchor="middle">%d</text>`+"\n", x(i), H-B+16, i)
		}
	}
	fmt.Fprintf(&s, `<text x="%g" y="%g" text-anchor="middle">iteration</text>`+"\n", (L+W-R)/2, H-12)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	for k, role := range roles {
		c := colors[k%len(colors)]
		var pts []string
		for _, m := range ms {
			if v, ok := m.Reward[role]; ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(m.Iteration), y(v)))
			}
		}
		fmt.Fprintf(&s, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		fmt.Fprintf(&s, `<line x1="%g" y1="%d" x2="%g" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", W-R+10, int(T)+18*k, W-R+30, int(T)+18*k, c)
		fmt.Fprintf(&s, `<text x="%g" y="%d">%s</text>`+"\n", W-R+36, int(T)+18*k+4, xmlEscape(role))
	}
	s.WriteString("</svg>\n")
	return []byte(s.String())
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }

// attachProgress shows an iteration bar and the current phase on w.
func attachProgress(r *selfplayRun, w io.Writer) {
	bar := progressbar.NewOptions(r.cfg.Iterations,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("selfplay"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	)
	bar.Set(r.state.Iteration)
	phase := ""
	r.hooks.Phase = func(it int, name string) {
		phase = name
		bar.Describe(fmt.Sprintf("iteration %d: %s", it, name))
	}
	r.hooks.Episode = func(done, total int) {
		bar.Describe(fmt.Sprintf("iteration %d: %s %d/%d episodes", r.state.Iteration+1, phase, done, total))
	}
	r.hooks.Iteration = func(m *iterationMetrics) {
		bar.Describe(fmt.Sprintf("iteration %d: reward %.3f", m.Iteration, m.RewardMean))
		bar.Set(m.Iteration)
		// The iteration's summary line goes to stdout next; the bar is
		// drawn again by its next update.
		bar.Clear()
	}
}
