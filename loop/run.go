package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/internal/cpuuse"
	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/internal/tensorboard"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/model/builtin"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// Trainer is the update side of a run. *train.Trainer implements it;
// tests and callers with their own trainer pass another through Parts.
// A run calls it from one goroutine at a time, but not always the same:
// Evaluate runs beside the rollout on a goroutine of its own (scorer).
type Trainer interface {
	Evaluate(ctx context.Context, seqs []train.Sequence) ([]train.Score, error)
	Step(ctx context.Context, seqs []train.Sequence) (train.Stats, error)
	SaveAdapter(path string) error
	LoadAdapter(path string) error
	SaveCheckpoint(dir string, extra []byte) error
	LoadCheckpoint(dir string) ([]byte, error)
	Close() error
}

// Swapper is the inference side of a run: the backend that samples with
// the adapter the trainer writes. *llama.Backend implements it.
type Swapper interface {
	SetAdapter(ctx context.Context, path string, scale float32) (int, error)
	PolicyVersion() int
}

// Parts replace what Open builds from Options: the game, the policy
// player (its backend must also be the Swapper), an optional frozen
// player and the trainer. Open closes none of them.
type Parts struct {
	Game    engine.Game
	Policy  *selfplay.Player
	Frozen  *selfplay.Player
	Swapper Swapper
	Trainer Trainer
	// Named are the players of further agents (Players.Named).
	Named map[string]*selfplay.Player
}

// Hooks let a caller follow a run (progress bars, logs, plots) without
// the run knowing about terminals. Every field may be nil; hooks run on
// the goroutine that called Step.
type Hooks struct {
	// Phase is called as iteration it enters a phase: rollout, score,
	// update, swap, eval (it is 0 for the evaluation of the starting
	// policy).
	Phase func(it int, phase string)
	// Episode is called after each finished episode of a rollout.
	Episode func(it, done, total int)
	// Iteration is called with each completed iteration's metrics (and
	// its held-out evaluation, when one was due), after they are written
	// to metrics.jsonl and before the checkpoint.
	Iteration func(m *runfiles.Metrics)
}

// Chain makes h call next's hooks after the ones already set, so that
// several followers (a progress bar, a dashboard) each set their own
// without knowing of the others.
func (h *Hooks) Chain(next Hooks) {
	phase, episode, iteration := h.Phase, h.Episode, h.Iteration
	if next.Phase != nil {
		h.Phase = func(it int, name string) {
			if phase != nil {
				phase(it, name)
			}
			next.Phase(it, name)
		}
	}
	if next.Episode != nil {
		h.Episode = func(it, done, total int) {
			if episode != nil {
				episode(it, done, total)
			}
			next.Episode(it, done, total)
		}
	}
	if next.Iteration != nil {
		h.Iteration = func(m *runfiles.Metrics) {
			if iteration != nil {
				iteration(m)
			}
			next.Iteration(m)
		}
	}
}

// ErrStopped is returned by Step and Train once early stopping has ended a
// run (State().Stopped says why).
var ErrStopped = errors.New("loop: stopped early")

// State is a run's own part of a checkpoint (the trainer writes its own
// files next to it).
type State struct {
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
	// Evals counts the held-out evaluations done (eval.jsonl's lines);
	// EvalBytes is that file's length. BestIteration and BestEval are the
	// iteration whose adapter is in best/ and its held-out mean reward.
	Evals         int     `json:"evals,omitempty"`
	EvalBytes     int64   `json:"eval_bytes,omitempty"`
	BestIteration int     `json:"best_iteration,omitempty"`
	BestEval      float64 `json:"best_eval,omitempty"`
	// League is the opponent league's pool and running means.
	League LeagueState `json:"league"`
}

// Run is one training run in one directory and everything open for it.
// It is not safe for concurrent use.
type Run struct {
	// Hooks may be set any time between calls.
	Hooks Hooks

	// tb writes logging.tensorboard's event file, once opened.
	tb *tensorboard.Writer

	dir     string
	opts    Options
	game    engine.Game
	runner  *selfplay.Runner
	trainer Trainer
	threads *TrainThreads
	swapper Swapper
	est     advantage.Estimator
	state   State
	// player is the policy (the evaluation plays it too); runnerContext
	// the seat-stream context the runner was given.
	player        *selfplay.Player
	runnerContext int
	league        *league
	// source plays the rollouts when set (SetEpisodeSource); published
	// is the last iteration whose work it was given, draws the league
	// draws of the episodes published and not yet collected.
	source    EpisodeSource
	published int
	draws     map[int]leagueDraw
	// versionOffset turns the backend's policy versions into the run's:
	// a resumed backend counts its swaps from the resume, the run from
	// its start (one swap per completed iteration).
	versionOffset int
	closers       []io.Closer
}

// Mode says how Open treats the run directory.
type Mode int

const (
	// Fresh starts a run; a directory holding a previous run is refused.
	Fresh Mode = iota
	// Overwrite starts a run, removing a previous run's files (only those).
	Overwrite
	// Resume continues the run in the directory from its last checkpoint.
	// The options should be the run's own (ReadConfig).
	Resume
)

// ReadConfig reads a run directory's config.yaml onto Defaults(), the
// options a resumed run continues with.
func ReadConfig(dir string) (Options, error) {
	o := Options{}.Defaults()
	// A run from before the guard, the league or the evaluation existed
	// has no such section and continues without one (a config.yaml
	// written since records every key).
	o.Rollout.Guard = &selfplay.GuardOptions{}
	o.League.Enabled, o.Eval.Every = false, 0
	if err := strictyaml.DecodeFile(filepath.Join(dir, runfiles.ConfigFile), &o); err != nil {
		return o, fmt.Errorf("resume: %w", err)
	}
	return o, nil
}

// Open prepares a run in dir: the effective config (written to
// config.yaml on a fresh start), the model (generated when
// rollout.model is empty), the backends, the trainer and, when resuming,
// the checkpoint. parts, when not nil, replaces the backends, the trainer
// and the game.
func Open(dir string, o Options, mode Mode, parts *Parts) (_ *Run, err error) {
	o.applyEnvDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if mode != Resume {
		if err := clearRunDir(dir, mode == Overwrite); err != nil {
			return nil, err
		}
	}
	r := &Run{dir: dir, draws: map[int]leagueDraw{}}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(dir, runfiles.CheckpointDir), 0o755); err != nil {
		return nil, err
	}
	if o.Rollout.Model == "" && parts == nil {
		// Absolute: config.yaml records it, and a resume may run from
		// another working directory than the one dir was relative to.
		path, err := filepath.Abs(filepath.Join(dir, runfiles.ModelFile))
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			if err := WriteModel(path, o); err != nil {
				return nil, err
			}
		}
		o.Rollout.Model = path
	}
	if o.Rollout.Contexts == 0 {
		// A resumed config without the key was written before it
		// existed, and ran on one context.
		o.Rollout.Contexts = 1
		if mode != Resume {
			o.Rollout.Contexts = AutoContexts(o.Rollout)
		}
	}
	if mode != Resume {
		// config.yaml is what a resume reads, possibly from another
		// working directory: record every file path absolute.
		if err := o.Rollout.AbsPaths(); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(&o)
		if err != nil {
			return nil, err
		}
		// Atomic: a full disk leaves no config.yaml rather than a cut
		// one that a resume would misread.
		if err := writeFileAtomic(filepath.Join(dir, runfiles.ConfigFile), b); err != nil {
			return nil, err
		}
	}
	r.opts = o
	if parts == nil {
		if parts, err = r.openParts(); err != nil {
			return nil, err
		}
	}
	r.game, r.trainer, r.swapper = parts.Game, parts.Trainer, parts.Swapper
	if r.threads == nil { // the caller's trainer
		to := o.Train
		r.threads = NewTrainThreads(&to)
	}
	if r.game == nil || r.trainer == nil || r.swapper == nil || parts.Policy == nil {
		return nil, errors.New("loop: parts need a game, a policy player, a swapper and a trainer")
	}
	ro, err := o.Rollout.RunnerOptions(parts.Named)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	// A seat stream must fit the trainer's context (the model's training
	// context) as well as the backend's.
	if lb, ok := r.swapper.(*llama.Backend); ok {
		ro.Context = min(ro.Context, lb.ContextPerSequence(), lb.Model().NCtxTrain())
	}
	r.player, r.runnerContext = parts.Policy, ro.Context
	if o.League.Enabled {
		ro.Cast = func(i int) map[int]string { return r.league.cast(i) }
	}
	if r.runner, err = selfplay.NewRunner(r.game, parts.Policy, parts.Frozen, ro); err != nil {
		return nil, err
	}
	if r.est, err = advantage.New(o.Estimator, o.EstimatorParams); err != nil {
		return nil, err
	}
	if mode == Resume {
		if err := r.restore(); err != nil {
			return nil, err
		}
	}
	if err := r.newLeague(context.Background()); err != nil {
		return nil, err
	}
	return r, nil
}

// WriteModel writes the model a run without rollout.model plays: the
// built-in one or a random one of model_preset.
func WriteModel(path string, o Options) error {
	if o.ModelPreset == BuiltinPreset {
		return builtin.WriteFile(path)
	}
	mo := model.Options{Arch: o.ModelArch, Preset: o.ModelPreset, Seed: o.Rollout.Seed}.Defaults()
	if err := model.WriteFile(path, mo); err != nil {
		return fmt.Errorf("generate the %s model: %w", o.ModelPreset, err)
	}
	return nil
}

// openParts opens the game, the policy's backends and the trainer the
// options name.
func (r *Run) openParts() (*Parts, error) {
	o := &r.opts
	g, ps, err := openPolicyGame(&o.Rollout)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, ps)
	to := o.Train
	to.LibDir = o.Rollout.LlamaLib
	r.threads = NewTrainThreads(&to)
	tr, err := train.New(o.Rollout.Model, to)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, tr)
	// A seat stream grows to rollout.context tokens, and a pass packs up
	// to train.batch_tokens: refuse now, before any episode is played,
	// what an update could not hold in memory.
	if err := tr.CheckSequence(max(o.Rollout.Context, to.BatchTokens)); err != nil {
		return nil, fmt.Errorf("rollout.context %d, train.batch_tokens %d: %w", o.Rollout.Context, to.BatchTokens, err)
	}
	// The policy backend samples with rollout.adapter (a warm-up): the
	// trainer starts from the same weights (a resume's checkpoint then
	// replaces them).
	if o.Rollout.Adapter != "" {
		if err := tr.LoadAdapter(o.Rollout.Adapter); err != nil {
			return nil, err
		}
	}
	return &Parts{Game: g, Policy: ps.Policy, Frozen: ps.Frozen, Swapper: ps.Llama, Trainer: tr, Named: ps.Named}, nil
}

// openPolicyGame opens the environment c names, with its judge, and the
// players of a run whose policy is trained (a training run, or a worker
// playing its episodes): the policy model is required.
func openPolicyGame(c *RolloutOptions) (engine.Game, *Players, error) {
	g, err := envs.Find(c.Env)
	if err != nil {
		return nil, nil, err
	}
	specs, err := g.Seats(engine.Params(c.Params))
	if err != nil {
		return nil, nil, err
	}
	ps, err := OpenPlayers(c, len(specs))
	if err != nil {
		return nil, nil, err
	}
	if ps.Llama == nil {
		ps.Close()
		return nil, nil, errors.New("a training run needs a policy model")
	}
	if g, err = AttachJudge(g, c, ps, true); err != nil {
		ps.Close()
		return nil, nil, err
	}
	return g, ps, nil
}

// Close releases what Open opened (not the caller's Parts).
func (r *Run) Close() error {
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		errs = append(errs, r.closers[i].Close())
	}
	r.closers = nil
	return errors.Join(errs...)
}

// Dir is the run directory.
func (r *Run) Dir() string { return r.dir }

// ScheduleBypasses is the number of requests the policy's llama backend
// decoded out of its deterministic schedule's turn so far: 0 when the run
// is reproducible to the bit (llama.Stats.ScheduleBypasses).
func (r *Run) ScheduleBypasses() int64 {
	if lb, ok := r.swapper.(*llama.Backend); ok {
		return lb.Stats().ScheduleBypasses
	}
	return 0
}

// Options are the run's effective options.
func (r *Run) Options() Options { return r.opts }

// Game is the environment being played.
func (r *Run) Game() engine.Game { return r.game }

// Policy is the player the run trains (and evaluates): its backend
// samples with the latest adapter.
func (r *Run) Policy() *selfplay.Player { return r.player }

// State is the run's progress.
func (r *Run) State() State { return r.state }

// Done reports whether the run has nothing left to do: every iteration
// completed, or early stopping ended it.
func (r *Run) Done() bool { return r.state.Stopped != "" || r.state.Iteration >= r.opts.Iterations }

// Path is the path of a file in the run directory.
func (r *Run) Path(name string) string { return filepath.Join(r.dir, name) }

// clearRunDir refuses to start a fresh run over a previous one unless
// overwrite, in which case it removes the previous run's files (only
// those). A run that never finished an iteration (a start that failed,
// say on a mistyped environment) holds nothing to keep: its directory is
// reused as if overwrite were given.
func clearRunDir(dir string, overwrite bool) error {
	if _, err := os.Stat(filepath.Join(dir, runfiles.ConfigFile)); err != nil {
		return nil
	}
	if !overwrite && startedRun(dir) {
		return &PreviousRunError{Dir: dir}
	}
	for _, f := range runfiles.All() {
		if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}

// startedRun reports whether the run in dir finished an iteration: it
// wrote a metrics line or a checkpoint.
func startedRun(dir string) bool {
	if st, err := os.Stat(filepath.Join(dir, runfiles.MetricsFile)); err == nil && st.Size() > 0 {
		return true
	}
	ents, err := os.ReadDir(filepath.Join(dir, runfiles.CheckpointDir))
	return err != nil && !errors.Is(err, fs.ErrNotExist) || len(ents) > 0
}

// PreviousRunError is returned when a fresh run would start over another.
type PreviousRunError struct{ Dir string }

func (e *PreviousRunError) Error() string {
	return fmt.Sprintf("%s holds a previous run: continue it with --resume %s, or start afresh with --overwrite", e.Dir, e.Dir)
}

// Train runs the remaining iterations. It returns ErrStopped when early
// stopping ended the run and context.Canceled (after writing a
// checkpoint) when ctx was cancelled.
func (r *Run) Train(ctx context.Context) error {
	for !r.Done() {
		if _, err := r.Step(ctx); err != nil {
			return err
		}
	}
	if r.state.Stopped != "" {
		return ErrStopped
	}
	return nil
}

// Step runs the next iteration and writes a checkpoint when one is due
// (every checkpoint_every iterations, at the end, on early stop and on
// interrupt). The rollout is interruptible (its partial episodes are
// dropped); once it is complete the rest of the iteration runs to the end,
// so an interrupt always leaves a checkpoint at an iteration boundary and
// a resumed run continues exactly. An interrupted Step returns
// context.Canceled once the checkpoint is written.
func (r *Run) Step(ctx context.Context) (*runfiles.Metrics, error) {
	if r.state.Stopped != "" {
		return nil, ErrStopped
	}
	if r.Done() {
		return nil, errors.New("loop: the run has completed its iterations")
	}
	if r.state.Iteration == 0 && r.state.Evals == 0 && r.evalDue(0) {
		// The starting policy, for comparison.
		r.phase(0, "eval")
		if _, err := r.evaluate(ctx, 0); err != nil {
			return nil, err
		}
		r.state.Evals++
	}
	it := r.state.Iteration + 1
	m, err := r.iteration(ctx, it)
	if err != nil {
		if ctx.Err() != nil {
			// A failed checkpoint must not read as a plain interrupt:
			// the caller would then point at a checkpoint that is not
			// there.
			if cerr := r.checkpoint(); cerr != nil {
				return nil, fmt.Errorf("interrupted in iteration %d, and the checkpoint failed: %w", it, cerr)
			}
			return nil, context.Canceled
		}
		return nil, fmt.Errorf("iteration %d: %w", it, err)
	}
	if r.evalDue(it) {
		r.phase(it, "eval")
		start := time.Now()
		ev, err := r.evaluate(context.WithoutCancel(ctx), it)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", it, err)
		}
		r.state.Evals++
		m.Eval, m.EvalMean = ev.Reward, ev.Mean
		m.Seconds["eval"] = time.Since(start).Seconds()
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := appendFile(r.Path(runfiles.MetricsFile), append(b, '\n')); err != nil {
		return nil, err
	}
	if err := r.logScalars(it, b); err != nil {
		return nil, err
	}
	if r.Hooks.Iteration != nil {
		r.Hooks.Iteration(m)
	}
	if it == 1 {
		r.state.FirstEntropy = m.Entropy
	}
	r.state.Stopped = r.opts.EarlyStop.reason(r.state.FirstEntropy, m)
	if r.state.Stopped != "" {
		if err := r.checkpoint(); err != nil {
			return m, err
		}
		return m, nil
	}
	if err := ctx.Err(); err != nil || it%r.opts.CheckpointEvery == 0 || it == r.opts.Iterations {
		if cerr := r.checkpoint(); cerr != nil {
			return m, cerr
		}
		if err != nil {
			return m, context.Canceled
		}
	}
	return m, nil
}

func (r *Run) phase(it int, name string) {
	if r.Hooks.Phase != nil {
		r.Hooks.Phase(it, name)
	}
}

// scoreBeside reports whether the scoring pass runs beside the rollout: on
// a GPU trainer, or when the CPU has a core beyond the rollout's threads
// for the trainer's one (more would spin against them). The contexts
// beyond the first do not count: one-thread loops share cores without
// spinning, and scoring beside two contexts on 2 cores beat scoring after
// them (docs/results/2026-12-05-two-llama-contexts.md).
func (r *Run) scoreBeside() bool {
	return r.opts.Train.Device == "cuda" || r.opts.Rollout.Threads+1 <= cpuuse.Usable()
}

// Sequences turns trajectories into training sequences: those with at
// least two tokens whose first token is context (a sequence's first token
// has no prediction, so it cannot be one the model generated). kept[j] is
// the index in trajs of seqs[j]. It is the one bridge from what a rollout
// sampled to what the trainer trains on: the token ids and the mask are
// the trajectory's own (token-in/token-out).
func Sequences(trajs []selfplay.Trajectory) (seqs []train.Sequence, kept []int) {
	seqs = make([]train.Sequence, 0, len(trajs))
	kept = make([]int, 0, len(trajs))
	for i := range trajs {
		t := &trajs[i]
		if len(t.Tokens) < 2 || t.Mask[0] {
			continue
		}
		kept = append(kept, i)
		seqs = append(seqs, train.Sequence{Tokens: t.Tokens, Mask: t.Mask, Allowed: t.AllowedIDs()})
	}
	return seqs, kept
}

// oldLogprobs are PPO's "old" logprobs of a trajectory: the trainer's own
// logprobs under the current weights (scored) when the current policy
// played it, and the logprobs the sampler computed when an older policy
// did (a cluster run with staleness > 0), so the importance ratio is taken
// against the policy the tokens came from. The sampler's raw logprobs are
// the untempered ones, like the trainer's (renormalised over the grammar's
// sets with overGrammar, as the trainer's then are).
func oldLogprobs(t *selfplay.Trajectory, scored []float32, current int, overGrammar bool) []float32 {
	for _, v := range t.PolicyVersions {
		if v != current {
			return t.SampledLogprobs(overGrammar)
		}
	}
	return scored
}
